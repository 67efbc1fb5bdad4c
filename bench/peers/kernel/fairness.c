/*
 * fairness.c (kernel peer) — the fixed-work fairness benchmark of issue 5
 * with one pthread per thread: T kernel threads each run the same fixed
 * computation and the program records when each one finishes. impl=pthread.
 *
 *   kernel_fairness [--threads T] [--work N]
 *
 * T = 1024 and N = 2 400 000 mixing steps by default; the work (a loop that
 * calls nothing), its check and the output are bench/common/fairness.h's,
 * the same as bench/weft/fairness.c's. The kernel's scheduler time-slices
 * the threads (the peer of weft's preemption variants).
 *
 * Threads: pthread_create() with default attributes, unpinned (the process's
 * affinity: every CPU it may use). Start: main creates every thread; each
 * waits at a barrier of T + 1 (main is the last member), then on a gate (a
 * futex word); when main passes the barrier every thread exists and has
 * arrived, main takes t0 and opens the gate (FUTEX_WAKE of all). Each thread
 * takes its finish time after its last step; main joins them all (untimed:
 * the total is the last finish time).
 *
 * Exit: 0 measured, 1 FAIL (a wrong sink, a thread without a finish time, a
 * failed call), 2 bad command line.
 */
#include "bench.h"
#include "fairness.h"
#include "opts.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct {
    uint64_t work;
    uint64_t *finish;          /* absolute ns, per thread */
    volatile uint64_t *sink;   /* per thread */
    pthread_barrier_t ready;
    _Atomic uint32_t gate;     /* 1: open */
} g;

static void gate_wait(void)
{
    while (atomic_load(&g.gate) == 0)
        if (syscall(SYS_futex, &g.gate, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0) != 0 &&
            errno != EAGAIN && errno != EINTR)
            bench_fail("FUTEX_WAIT: %s", strerror(errno));
}

static void gate_open(void)
{
    atomic_store(&g.gate, 1);
    if (syscall(SYS_futex, &g.gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0) < 0)
        bench_fail("FUTEX_WAKE: %s", strerror(errno));
}

static void *worker(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    pthread_barrier_wait(&g.ready);
    gate_wait();

    struct fair_state s = fair_start();
    fair_mix(&s, g.work);
    g.sink[i] = fair_sink(&s);
    g.finish[i] = bench_now_ns();
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t threads = 1024;
    g.work = 2400000;
    struct bench_opt opts[] = {
        { "--threads", &threads, 1, 1u << 20 },
        { "--work", &g.work, 1, UINT64_MAX / 2 },
    };
    bench_opts_parse(argc, argv, "[--threads T] [--work N]", opts, sizeof opts / sizeof opts[0]);

    struct fair_run run = { .impl = "pthread", .threads = threads, .work = g.work,
                            .chunk = g.work };
    run.expected = fair_expected(g.work, &run.alone_ns);
    pthread_t *ts = calloc(threads, sizeof *ts);
    run.finish = g.finish = calloc(threads, sizeof *g.finish);
    run.sink = g.sink = calloc(threads, sizeof *g.sink);
    if (!ts || !g.finish || !g.sink)
        bench_fail("pthread fairness: no memory for %llu threads", (unsigned long long)threads);

    bench_check_rc(pthread_barrier_init(&g.ready, NULL, (unsigned)threads + 1));
    for (uint64_t i = 0; i < threads; i++)
        bench_check_rc(pthread_create(&ts[i], NULL, worker, (void *)(uintptr_t)i));
    pthread_barrier_wait(&g.ready);
    run.t0 = bench_now_ns();
    gate_open();
    for (uint64_t i = 0; i < threads; i++)
        bench_check_rc(pthread_join(ts[i], NULL));
    pthread_barrier_destroy(&g.ready);

    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        bench_fail("sched_getaffinity: %s", strerror(errno));
    bench_note("pthread", "unpinned: %d CPUs in the affinity mask", CPU_COUNT(&set));
    fair_report(&run, "");
    free(ts);
    free(g.finish);
    free((void *)g.sink);
    return 0;
}
