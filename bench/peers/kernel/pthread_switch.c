/*
 * pthread_switch.c — the parlib thesis's switch table (its Table 2.2) for a
 * plain pthread program: nanoseconds per switch between two threads that
 * (a) take turns with sched_yield() and (b) hand a token back and forth
 * through one mutex and one condition variable. The same binary is run on
 * the C library's threads (NPTL), the process pinned to CPU 0, and under
 * LD_PRELOAD=libweft-pthread.so with WEFT_VCORES=1, pinned the same way
 * (bench/sections.py: the "pthread" section). It knows nothing of weft.
 *
 *   RESULT bench=pthread impl=<BENCH_IMPL, default nptl> param=yield   value=<ns per switch>
 *   RESULT bench=pthread impl=...                        param=condvar value=<ns per hand-off>
 *
 * yield: n sched_yield() calls per thread; a switch is a yield after which
 * the other thread ran (counted, as kernel_yield does): time ÷ switches, and
 * the run fails if fewer than 90 % of the yields switched (the figure would
 * then be a system call's cost, not a switch's). condvar: the token makes n
 * round trips; time ÷ 2n hand-offs; each thread checks it only ever sees
 * its own turn. Threads are created and meet at a barrier before the clock
 * starts; exits and joins are untimed.
 */
#include "bench.h"

#include <stdatomic.h>

static const char *impl;

/* ---- yield ------------------------------------------------------------------------ */

static pthread_barrier_t gate;
static atomic_int last_runner;
static _Atomic uint64_t switches;
static uint64_t yield_n;

static void *yielder(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t h = 0;
    pthread_barrier_wait(&gate);
    for (uint64_t i = 0; i < yield_n; i++) {
        sched_yield();
        if (atomic_load_explicit(&last_runner, memory_order_relaxed) != id) {
            atomic_store_explicit(&last_runner, id, memory_order_relaxed);
            h++;
        }
    }
    atomic_fetch_add(&switches, h);
    return NULL;
}

static uint64_t run_yield(void *ctx, uint64_t n)
{
    (void)ctx;
    pthread_t t[2];
    yield_n = n;
    atomic_store(&switches, 0);
    pthread_barrier_init(&gate, NULL, 3);
    for (intptr_t i = 0; i < 2; i++)
        bench_check_rc(pthread_create(&t[i], NULL, yielder, (void *)(i + 1)));
    pthread_barrier_wait(&gate);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    uint64_t dt = bench_now_ns() - t0; /* the joins: two more switches, in the noise */
    pthread_barrier_destroy(&gate);
    uint64_t s = atomic_load(&switches);
    if (s < 2 * n * 9 / 10)
        bench_fail("%s: only %llu of %llu yields switched threads", impl, (unsigned long long)s,
                   (unsigned long long)(2 * n));
    return dt * (2 * n) / s; /* time per switch, scaled back to 2n iterations */
}

/* ---- condvar hand-off ----------------------------------------------------------------- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
static uint64_t rounds;

static void *passer(void *arg)
{
    int me = (int)(intptr_t)arg;
    pthread_barrier_wait(&gate);
    pthread_mutex_lock(&m);
    for (uint64_t i = 0; i < rounds; i++) {
        while (turn != me)
            pthread_cond_wait(&cv, &m);
        turn = !me;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&m);
    return NULL;
}

static uint64_t run_condvar(void *ctx, uint64_t n)
{
    (void)ctx;
    pthread_t t[2];
    rounds = n;
    turn = 0;
    pthread_barrier_init(&gate, NULL, 3);
    for (intptr_t i = 0; i < 2; i++)
        bench_check_rc(pthread_create(&t[i], NULL, passer, (void *)i));
    pthread_barrier_wait(&gate);
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    uint64_t dt = bench_now_ns() - t0;
    pthread_barrier_destroy(&gate);
    if (turn != 0)
        bench_fail("%s: the token ended on the wrong side", impl);
    return dt;
}

int main(void)
{
    impl = getenv("BENCH_IMPL") ? getenv("BENCH_IMPL") : "nptl";
    struct bench_sample y = bench_measure(run_yield, NULL, 1000, 1ull << 32);
    bench_result("pthread", impl, "yield", (double)y.ns / (double)(2 * y.iters), "ns");
    struct bench_sample c = bench_measure(run_condvar, NULL, 1000, 1ull << 32);
    bench_result("pthread", impl, "condvar", (double)c.ns / (double)(2 * c.iters), "ns");
    return 0;
}
