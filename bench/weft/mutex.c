/*
 * mutex.c — contended weft_mutex_t: 4 uthreads spread over all vcores
 * (WEFT_ON_VCORE i % vcores) each take the lock n times around a short
 * critical section (bump a counter, add to a sum). The value is wall time
 * divided by the total number of acquisitions, so lower is better.
 *
 * The library spins WEFT_MUTEX_SPIN iterations before parking a locker; the
 * driver runs this program once as is (param spin=default) and once with
 * WEFT_MUTEX_SPIN=0 (param spin=0) to see whether spinning pays. The counter
 * and the sum are checked at the end: a lost update fails the run.
 *
 * Peer: bench/peers/kernel/mutex.c (pthread_mutex_t, 4 pthreads).
 */
#include "bench.h"

#include <stdatomic.h>
#include <weft/weft.h>
#include <weft/sched.h>

#define NTHREADS 4

static weft_mutex_t lock = WEFT_MUTEX_INIT;
static uint64_t counter;        /* guarded by lock */
static uint64_t sum;            /* guarded by lock */
static weft_barrier_t start;    /* all NTHREADS lockers begin together */
static atomic_uint_fast64_t t_start;   /* set by the barrier's serial thread */

static void *locker(void *arg)
{
    uint64_t n = (uint64_t)(uintptr_t)arg;
    if (weft_barrier_wait(&start) == WEFT_BARRIER_SERIAL)
        atomic_store(&t_start, bench_now_ns());
    for (uint64_t i = 0; i < n; i++) {
        bench_check_rc(weft_mutex_lock(&lock));
        counter++;
        sum += i;
        bench_check_rc(weft_mutex_unlock(&lock));
    }
    return NULL;
}

/* run_mutex() has NTHREADS lockers take the lock n times each; returns the ns it took. */
static uint64_t run_mutex(void *unused, uint64_t n)
{
    (void)unused;
    int nv = weft_num_vcores();
    weft_t t[NTHREADS];

    counter = sum = 0;
    bench_check_rc(weft_barrier_init(&start, NTHREADS));
    for (int i = 0; i < NTHREADS; i++) {
        weft_attr_t attr = { .flags = WEFT_ON_VCORE, .vcore = i % nv };
        bench_check_rc(weft_spawn(&t[i], &attr, locker, (void *)(uintptr_t)n));
    }
    for (int i = 0; i < NTHREADS; i++)
        bench_check_rc(weft_join(t[i], NULL));
    uint64_t t1 = bench_now_ns();
    bench_check_rc(weft_barrier_destroy(&start));

    /* The joins ordered every locker's last unlock before these reads. */
    if (counter != NTHREADS * n || sum != NTHREADS * (n * (n - 1) / 2))
        bench_fail("weft mutex: counter %llu (want %llu), sum %llu (want %llu): lost updates",
                   (unsigned long long)counter, (unsigned long long)(NTHREADS * n),
                   (unsigned long long)sum, (unsigned long long)(NTHREADS * (n * (n - 1) / 2)));
    return t1 - atomic_load(&t_start);
}

int main(void)
{
    const char *spin = getenv("WEFT_MUTEX_SPIN");
    char param[64];

    bench_check_rc(weft_init(NULL));
    snprintf(param, sizeof param, "threads=%d,spin=%s", NTHREADS,
             spin && *spin ? spin : "default");
    bench_note("weft", "%d uthreads over %d vcores (WEFT_ON_VCORE i%%%d), WEFT_MUTEX_SPIN=%s",
               NTHREADS, weft_num_vcores(), weft_num_vcores(), spin ? spin : "(unset)");
    struct bench_sample s = bench_measure(run_mutex, NULL, 1000, 1u << 28);
    bench_result("mutex", "weft", param, (double)s.ns / (double)(s.iters * NTHREADS), "ns/lock");
    weft_shutdown();
    return 0;
}
