/*
 * tickcost.c (kernel peer) — what a periodic timer signal costs on this
 * machine: the floor under any preemption by signal (issue 5, section
 * fairness: weft's preemption tick is such a signal). impl=kernel-tick.
 *
 *   kernel_tickcost [--period-us P] [--work N] [--pairs K]
 *
 * One kernel thread per CPU of the affinity mask, each pinned to its CPU,
 * runs N steps of the fairness benchmark's mixing loop (bench/common/
 * fairness.h: it calls nothing). A run is timed from a common start to the
 * last thread's finish. K pairs of runs, the two kinds of a pair in
 * alternating order: "quiet" (no timer) and "ticked" (each thread has its
 * own timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID) timer every P us whose
 * handler does nothing; the signal is SIGRTMIN+1, SA_RESTART). A pair's
 * overhead is ticked / quiet - 1 (paired: this VM's speed drifts over
 * seconds); the result is the median over the pairs, and the cost of one
 * tick is that overhead times P. The work's result is checked every run.
 * A P longer than a run prices a timer that is armed but never fires.
 *
 *   RESULT bench=fairness impl=kernel-tick param=tick,period=<P>us
 *          value=<median overhead %> unit=% per_tick_us=<us> ticks=<per thread, median>
 *          quiet_s=<median> pairs=<K> cpus=<n>
 *
 * Exit: 0 measured, 1 FAIL (a wrong result, a failed call), 2 bad command line.
 */
#include "bench.h"
#include "fairness.h"
#include "opts.h"

#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_CPUS 256

static struct {
    uint64_t work, period_us, expect;
    int cpu[MAX_CPUS], ncpu;
    bool ticked;                      /* this run: with timers */
    pthread_barrier_t start, done;
    uint64_t finish[MAX_CPUS];
    _Atomic uint64_t ticks;           /* handler runs, all threads, this run */
} g;

static void on_tick(int sig)
{
    (void)sig;
    atomic_fetch_add_explicit(&g.ticks, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    bench_pin_self(g.cpu[i]);
    for (;;) {
        pthread_barrier_wait(&g.start);   /* main set up the run */
        if (g.work == 0)
            return NULL;
        timer_t tm;
        if (g.ticked) {
            struct sigevent ev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN + 1 };
            ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
            if (timer_create(CLOCK_MONOTONIC, &ev, &tm) != 0)
                bench_fail("timer_create: %s", strerror(errno));
            long ns = (long)(g.period_us * 1000u);
            struct itimerspec its = { { ns / 1000000000, ns % 1000000000 },
                                      { ns / 1000000000, ns % 1000000000 } };
            if (timer_settime(tm, 0, &its, NULL) != 0)
                bench_fail("timer_settime: %s", strerror(errno));
        }
        pthread_barrier_wait(&g.start);   /* every timer armed: go */
        struct fair_state s = fair_start();
        fair_mix(&s, g.work);
        g.finish[i] = bench_now_ns();
        if (g.ticked && timer_delete(tm) != 0)
            bench_fail("timer_delete: %s", strerror(errno));
        if (fair_sink(&s) != g.expect)
            bench_fail("kernel-tick: thread %d got a wrong result", i);
        pthread_barrier_wait(&g.done);
    }
}

/* run() is one timed run; returns seconds from the start to the last finish. */
static double run(bool ticked, uint64_t *ticks)
{
    g.ticked = ticked;
    atomic_store(&g.ticks, 0);
    pthread_barrier_wait(&g.start);
    pthread_barrier_wait(&g.start);
    uint64_t t0 = bench_now_ns();
    pthread_barrier_wait(&g.done);
    uint64_t last = 0;
    for (int i = 0; i < g.ncpu; i++)
        last = g.finish[i] > last ? g.finish[i] : last;
    *ticks = atomic_load(&g.ticks) / (uint64_t)g.ncpu;
    return (double)(last - t0) / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    uint64_t pairs = 7;
    g.period_us = 1000;
    g.work = 200000000;
    struct bench_opt opts[] = {
        { "--period-us", &g.period_us, 10, 1000000 },
        { "--work", &g.work, 1, UINT64_MAX / 2 },
        { "--pairs", &pairs, 1, 1000 },
    };
    bench_opts_parse(argc, argv, "[--period-us P] [--work N] [--pairs K]", opts,
                     sizeof opts / sizeof opts[0]);
    g.ncpu = bench_affinity_cpus(g.cpu, MAX_CPUS);
    uint64_t alone_ns;
    g.expect = fair_expected(g.work, &alone_ns);

    struct sigaction sa = { .sa_handler = on_tick, .sa_flags = SA_RESTART };
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGRTMIN + 1, &sa, NULL) != 0)
        bench_fail("sigaction: %s", strerror(errno));
    bench_check_rc(pthread_barrier_init(&g.start, NULL, (unsigned)g.ncpu + 1));
    bench_check_rc(pthread_barrier_init(&g.done, NULL, (unsigned)g.ncpu + 1));
    pthread_t th[MAX_CPUS];
    for (int i = 0; i < g.ncpu; i++)
        bench_check_rc(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i));

    double *over = malloc(pairs * sizeof *over), *quiet = malloc(pairs * sizeof *quiet);
    double *ticks = malloc(pairs * sizeof *ticks);
    if (!over || !quiet || !ticks)
        bench_fail("kernel-tick: out of memory");
    for (uint64_t k = 0; k < pairs; k++) {
        uint64_t tq, tt;
        double q, t;
        if (k % 2) {
            t = run(true, &tt);
            q = run(false, &tq);
        } else {
            q = run(false, &tq);
            t = run(true, &tt);
        }
        if (tq != 0)
            bench_fail("kernel-tick: a quiet run took %llu ticks", (unsigned long long)tq);
        if (tt == 0 && t * 1e6 >= 2.0 * (double)g.period_us) /* a long P may not fire */
            bench_fail("kernel-tick: a ticked run took no tick");
        over[k] = t / q - 1;
        quiet[k] = q;
        ticks[k] = (double)tt;
    }
    uint64_t work = g.work;
    g.work = 0; /* tells the workers to return */
    pthread_barrier_wait(&g.start);
    for (int i = 0; i < g.ncpu; i++)
        bench_check_rc(pthread_join(th[i], NULL));

    double ov = median(over, pairs), lo = over[0], hi = over[pairs - 1];
    bench_note("kernel-tick", "%d threads, one pinned per CPU, %llu steps each (%.3f s alone); "
               "%llu pairs of runs without and with an empty SIGRTMIN+1 handler every %llu us; "
               "overhead per pair from %.2f%% to %.2f%%", g.ncpu,
               (unsigned long long)work, (double)alone_ns / 1e9, (unsigned long long)pairs,
               (unsigned long long)g.period_us, lo * 100, hi * 100);
    printf("RESULT bench=fairness impl=kernel-tick param=tick,period=%lluus value=%.3f unit=%% "
           "per_tick_us=%.2f ticks=%.0f quiet_s=%.3f pairs=%llu cpus=%d\n",
           (unsigned long long)g.period_us, ov * 100, ov * (double)g.period_us,
           median(ticks, pairs), median(quiet, pairs), (unsigned long long)pairs, g.ncpu);
    fflush(stdout);
    free(over);
    free(quiet);
    free(ticks);
    return 0;
}
