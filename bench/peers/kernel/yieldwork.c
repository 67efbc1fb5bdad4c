/*
 * yieldwork.c (kernel peer) — the yield pass's benchmark (issue 6) with one
 * pthread per thread, every thread on one CPU: the seed's counting and
 * pointer-chasing programs and the sort (bench/common/yieldwork.h), the
 * same work and checks as bench/weft/yieldwork.c's. impl=pthread.
 *
 *   kernel_yieldwork count|chase|sort [--threads T] [--work N] [--cpu C]
 *
 * T = 2, N = total iterations (split evenly), C = 0. The process pins
 * itself to CPU C (sched_setaffinity, before creating any thread: every
 * thread inherits it), so the kernel time-slices the threads on one CPU as
 * weft's single vcore does.
 *
 * Start: main creates every thread; each waits at a barrier of T + 1 (main
 * is the last member), then on a gate (a futex word); main takes t0 and
 * opens the gate (FUTEX_WAKE of all). Each thread stamps its finish; main
 * joins them (untimed).
 *
 * Exit: 0 measured, 1 FAIL (a wrong result, a failed call), 2 bad command
 * line, 77 CPU C is not in the affinity mask.
 */
#include "bench.h"
#include "opts.h"
#include "yieldwork.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct yw_run run;
static pthread_barrier_t ready;
static _Atomic uint32_t gate;   /* 1: open */

static void gate_wait(void)
{
    while (atomic_load(&gate) == 0)
        if (syscall(SYS_futex, &gate, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0) != 0 &&
            errno != EAGAIN && errno != EINTR)
            bench_fail("FUTEX_WAIT: %s", strerror(errno));
}

static void gate_open(void)
{
    atomic_store(&gate, 1);
    if (syscall(SYS_futex, &gate, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0) < 0)
        bench_fail("FUTEX_WAKE: %s", strerror(errno));
}

static void *worker(void *arg)
{
    pthread_barrier_wait(&ready);
    gate_wait();
    yw_work(&run, (size_t)(uintptr_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t cpu = 0;
    run.threads = 2;
    run.work = 100000000;
    struct bench_opt opts[] = {
        { "--threads", &run.threads, 1, YW_MAX_THREADS },
        { "--work", &run.work, 1, UINT64_MAX / 2 },
        { "--cpu", &cpu, 0, CPU_SETSIZE - 1 },
    };
    yw_parse(&run, argc, argv, opts, sizeof opts / sizeof opts[0],
             "count|chase|sort [--threads T] [--work N] [--cpu C]");
    bench_need_cpus((int)cpu + 1);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        bench_fail("sched_setaffinity(CPU %llu): %s", (unsigned long long)cpu, strerror(errno));
    yw_setup(&run);

    pthread_t *ts = calloc(run.threads, sizeof *ts);
    if (!ts)
        bench_fail("yieldwork: no memory for %llu threads", (unsigned long long)run.threads);
    bench_check_rc(pthread_barrier_init(&ready, NULL, (unsigned)run.threads + 1));
    for (uint64_t i = 0; i < run.threads; i++)
        bench_check_rc(pthread_create(&ts[i], NULL, worker, (void *)(uintptr_t)i));
    pthread_barrier_wait(&ready);
    run.t0 = bench_now_ns();
    gate_open();
    for (uint64_t i = 0; i < run.threads; i++)
        bench_check_rc(pthread_join(ts[i], NULL));
    pthread_barrier_destroy(&ready);

    bench_note("pthread", "every thread pinned to CPU %llu (sched_setaffinity of the process)",
               (unsigned long long)cpu);
    yw_report(&run, "pthread", "");
    free(ts);
    yw_free(&run);
    return 0;
}
