/*
 * handler_preempt — a preemption that lands inside an application's signal
 * handler does not move the handler to another vcore.
 *
 * A handler runs on the interrupted uthread's stack, above the frame the
 * kernel pushed for it, which records the kernel thread's signal stack.
 * Switched out there and resumed on another vcore, the handler would return
 * through that frame on the other vcore's kernel thread and install the
 * first vcore's signal stack there: two vcores sharing one signal stack,
 * whose next SA_ONSTACK handlers (weft's SIGSEGV handler among them)
 * overwrite each other's frames (sigsafe once died so under ASan: a sigreturn
 * from a zeroed frame, every register 0). Proves:
 *  - uthreads on every vcore are interrupted by handlers that run for
 *    several preemption periods: each handler ends on the kernel thread it
 *    started on; afterwards each vcore's thread still has the signal stack
 *    it started with (no two share one) and does not block the signal;
 *  - preemption worked meanwhile (the workers were preempted; handlers ran).
 */
#define _GNU_SOURCE
#include "check.h"

#define RUN_NS SCALE(MS(600), MS(1500))

static int nvc;
static pthread_t vthreads[64];
static void *altstacks[64];
static atomic_bool stop;
static atomic_long handled, sent;
static atomic_int in_handler;
static atomic_long moved;                   /* handlers that ended on another thread */
static _Atomic unsigned long sink;          /* results, so the loops are not dropped */

/* Runs a few preemption periods in the application's own code, so that a
 * tick finds the handler at a safe point. */
static void on_usr1(int sig)
{
    (void)sig;
    atomic_fetch_add(&in_handler, 1);
    pthread_t self = pthread_self();
    volatile unsigned long acc = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 1000; i++)
            acc = acc * 31u + (unsigned long)i;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 400000L);
    if (!pthread_equal(self, pthread_self()))
        atomic_fetch_add(&moved, 1);
    atomic_fetch_add(&handled, 1);
    atomic_fetch_sub(&in_handler, 1);
}

static void *record_altstack(void *arg)
{
    stack_t ss;
    CHECK(sigaltstack(NULL, &ss) == 0, "sigaltstack");
    altstacks[(intptr_t)arg] = ss.ss_sp;
    return NULL;
}

static void *check_altstack(void *arg)
{
    intptr_t v = (intptr_t)arg;
    stack_t ss;
    CHECK(sigaltstack(NULL, &ss) == 0, "sigaltstack");
    CHECK(ss.ss_sp == altstacks[v], "vcore %d: its kernel thread's signal stack is %p, not its own %p",
          (int)v, ss.ss_sp, altstacks[v]);
    sigset_t m;
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &m) == 0, "pthread_sigmask");
    /* Not under TSan, which never lets weft switch from a signal (event.h)
     * and runs deferred handlers itself with every signal blocked. Its
     * runtime (LLVM 19) can leave a thread with that whole mask (60 signals)
     * when signals come often and the handlers use atomics: a plain pthread
     * program with a 50 us timer signal and SIGUSR1, both handlers doing one
     * atomic add, ends so in 5 runs of 5 under TSan, never without it. */
    CHECK(TEST_TSAN || !sigismember(&m, SIGUSR1), "vcore %d: its kernel thread blocks SIGUSR1",
          (int)v);
    return NULL;
}

/* Runs fn(v) on each vcore v, pinned, and waits for it. */
static void on_each_vcore(void *(*fn)(void *))
{
    weft_t t[64];
    for (int v = 0; v < nvc; v++) {
        weft_attr_t a = { .flags = WEFT_PINNED, .vcore = v };
        CHECK_RC(weft_spawn(&t[v], &a, fn, (void *)(intptr_t)v), 0);
    }
    for (int v = 0; v < nvc; v++)
        CHECK_RC(weft_join(t[v], NULL), 0);
}

/* Application code that calls weft only to sleep a little between bursts
 * of a few periods, so that vcores run dry now and then and steal the
 * uthreads preempted on the other (inside a handler among them). */
static void *worker(void *arg)
{
    (void)arg;
    unsigned long x = 1;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        uint64_t until = weft_now_ns() + 1000000u;
        while (weft_now_ns() < until)
            for (int i = 0; i < 1000; i++)
                x = x * 6364136223846793005u + 1;
        /* TSan's runtime can leave the vcore thread with every signal
         * blocked (see the vcore-mask check above); once it did so after 3
         * handlers of 2507 signals (prio, one vcore). Give SIGUSR1 back, so
         * that the handler count below still means something there. */
        if (TEST_TSAN)
            pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
        CHECK_RC(weft_sleep_ns(300000), 0);
    }
    atomic_store_explicit(&sink, x, memory_order_relaxed);
    return NULL;
}

static void *killer(void *arg)
{
    (void)arg;
    uint64_t end = weft_now_ns() + RUN_NS;
    for (unsigned k = 0; weft_now_ns() < end; k++) {
        CHECK(pthread_kill(vthreads[k % (unsigned)nvc], SIGUSR1) == 0, "pthread_kill");
        atomic_fetch_add(&sent, 1);
        usleep(500);
    }
    return NULL;
}

int main(void)
{
    check_watchdog(SCALE(60, 300));
    struct sigaction sa = { 0 };
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    struct weft_config cfg = { .preempt_us = 100 };
    CHECK_RC(weft_init(&cfg), 0);
    nvc = weft_num_vcores();
    CHECK(nvc > 0 && nvc <= 64, "%d vcores", nvc);

    check_phase("record each vcore's thread and signal stack");
    check_vcore_threads(vthreads, nvc);
    on_each_vcore(record_altstack);
    for (int v = 0; v < nvc; v++) {
        CHECK(altstacks[v] != NULL, "vcore %d has no signal stack", v);
        for (int w = 0; w < v; w++)
            CHECK(altstacks[v] != altstacks[w], "vcores %d and %d share a signal stack", w, v);
    }

    check_phase("handlers under preemption");
    weft_t workers[64];
    int nworkers = nvc + 1;
    for (int i = 0; i < nworkers; i++)
        CHECK_RC(weft_spawn(&workers[i], NULL, worker, NULL), 0);
    pthread_t kt;
    CHECK(pthread_create(&kt, NULL, killer, NULL) == 0, "pthread_create");
    CHECK(pthread_join(kt, NULL) == 0, "pthread_join");
    usleep(10 * 1000); /* a signal sent may still be on its way */
    WAIT_UNTIL(atomic_load(&in_handler) == 0, "handlers done");
    /* (signals sent while one is pending merge: fewer run than were sent) */
    CHECK(atomic_load(&moved) == 0, "%ld of %ld handlers ended on another kernel thread",
          atomic_load(&moved), atomic_load(&handled));
    CHECK(atomic_load(&handled) >= 10, "only %ld handlers ran of %ld signals", atomic_load(&handled),
          atomic_load(&sent));
    atomic_store(&stop, true);
    for (int i = 0; i < nworkers; i++)
        CHECK_RC(weft_join(workers[i], NULL), 0);

    check_phase("each vcore's signal stack is still its own");
    on_each_vcore(check_altstack);
    uint64_t taken = 0, deferred = 0;
    for (int v = 0; v < nvc; v++) {
        struct weft_vcore_stats st;
        CHECK_RC(weft_stats(v, &st), 0);
        taken += st.preempt_taken;
        deferred += st.preempt_deferred;
    }
    fprintf(stderr, "handler_preempt: %d vcores, %ld handlers, %llu preemptions, %llu deferred\n",
            nvc, atomic_load(&handled), (unsigned long long)taken, (unsigned long long)deferred);
    CHECK(taken > 0 || TEST_TSAN, "no preemption"); /* TSan: never from a signal (event.h) */
    weft_shutdown();
    return 0;
}
