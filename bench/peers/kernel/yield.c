/*
 * yield.c (kernel peer) — nanoseconds per sched_yield() with 2, 100 and
 * 10 000 pthreads, all pinned to CPU 0 (pthread_setaffinity_np, as
 * `taskset -c 0`).
 *
 * Timing (the one boundary of every yield program, bench/README.md): the
 * threads are created and meet main at a barrier (the start gate); main
 * takes the start time as it passes, and each thread calls sched_yield() n
 * times; the thread that finishes last takes the end time. A finished thread
 * waits at a second barrier (the release, which main joins too) instead of
 * exiting, so no thread exits inside the timed span; creation, the exits and
 * main's joins (a sizeable part of the run at 10 000 threads) are untimed.
 * Handovers (another thread ran since this one last did) are
 * counted and reported as a NOTE: unlike weft's FIFO the kernel
 * does not promise that sched_yield() switches, and if it often did not, the
 * figure would be a syscall cost rather than a switch cost. The 10 000-thread
 * row starts its warm-up from fewer yields per thread, and creates its
 * threads afresh for every run (untimed), which is most of its wall time.
 *
 * --bench=baseline prints instead the kernel baseline of the issue: two
 * threads pinned to CPU 0 taking turns with sched_yield(), in nanoseconds per
 * switch (run time / handovers; with two threads each handover is one
 * switch), as
 *   RESULT bench=baseline impl=kernel-sched_yield param=cpus=0 value=<ns> unit=ns
 * (its pipe and futex companions: kernel_pingpong --bench=baseline).
 *
 * Usage: kernel_yield [--bench=baseline]
 */
#include "bench.h"

#include <stdatomic.h>

struct worker_arg;

static const struct {
    int nthreads;
    uint64_t n0;                 /* yields per thread in the first warm-up run */
} rows[] = { { 2, 1000 }, { 100, 1000 }, { 10000, 2 } };

struct yield_ctx {
    int nthreads;
    uint64_t n;                  /* yields per thread */
    pthread_barrier_t start, release;
    pthread_t *threads;
    struct worker_arg *args;
};

static atomic_int last_runner;            /* id of the thread that ran last */
static atomic_uint_fast64_t handovers;
static atomic_int running;                /* threads not yet done with their yields */
static _Atomic uint64_t end_ns;           /* taken by the last of them */
static uint64_t last_total, last_handovers;   /* of the latest run, for the NOTE */

struct worker_arg {
    struct yield_ctx *c;
    int id;
};

static void *worker(void *p)
{
    struct worker_arg *w = p;
    uint64_t h = 0, i;

    bench_pin_self(0);
    pthread_barrier_wait(&w->c->start);
    for (i = 0; i < w->c->n; i++) {
        sched_yield();
        if (atomic_load_explicit(&last_runner, memory_order_relaxed) != w->id) {
            atomic_store_explicit(&last_runner, w->id, memory_order_relaxed);
            h++;
        }
    }
    if (atomic_fetch_sub(&running, 1) == 1)
        atomic_store(&end_ns, bench_now_ns());
    pthread_barrier_wait(&w->c->release); /* untimed from here */
    atomic_fetch_add(&handovers, h);
    return (void *)(uintptr_t)i;
}

static uint64_t run_yield(void *arg, uint64_t n)
{
    struct yield_ctx *c = arg;
    struct worker_arg *w = c->args;
    uint64_t done = 0, t0, t1, total = n * (uint64_t)c->nthreads;

    c->n = n;
    atomic_store(&last_runner, -1);
    atomic_store(&handovers, 0);
    atomic_store(&running, c->nthreads);
    bench_check_rc(pthread_barrier_init(&c->start, NULL, (unsigned)c->nthreads + 1));
    bench_check_rc(pthread_barrier_init(&c->release, NULL, (unsigned)c->nthreads + 1));
    for (int i = 0; i < c->nthreads; i++) {
        w[i] = (struct worker_arg){ c, i };
        bench_check_rc(pthread_create(&c->threads[i], NULL, worker, &w[i]));
    }
    pthread_barrier_wait(&c->start);
    t0 = bench_now_ns();
    pthread_barrier_wait(&c->release);
    for (int i = 0; i < c->nthreads; i++) {
        void *r;
        bench_check_rc(pthread_join(c->threads[i], &r));
        done += (uintptr_t)r;
    }
    t1 = atomic_load(&end_ns);
    pthread_barrier_destroy(&c->start);
    pthread_barrier_destroy(&c->release);
    if (done != total)
        bench_fail("sched_yield: %llu yields done, %llu asked", (unsigned long long)done,
                   (unsigned long long)total);
    last_total = total;
    last_handovers = atomic_load(&handovers);
    return t1 - t0;
}

/* alloc_ctx() sizes c's arrays for its thread count. */
static void alloc_ctx(struct yield_ctx *c)
{
    c->threads = malloc(sizeof *c->threads * (size_t)c->nthreads);
    c->args = malloc(sizeof *c->args * (size_t)c->nthreads);
    if (!c->threads || !c->args)
        bench_fail("sched_yield: no memory for %d threads", c->nthreads);
}

static void free_ctx(struct yield_ctx *c)
{
    free(c->threads);
    free(c->args);
}

int main(int argc, char **argv)
{
    int baseline = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--bench=baseline") == 0) {
            baseline = 1;
        } else {
            fprintf(stderr, "usage: %s [--bench=baseline]\n", argv[0]);
            return 2;
        }
    }
    bench_need_cpus(1);
    if (baseline) {
        struct yield_ctx c = { .nthreads = 2 };
        alloc_ctx(&c);
        struct bench_sample s = bench_measure(run_yield, &c, 1000, 1u << 27);
        free_ctx(&c);
        if (last_handovers < last_total / 2)
            bench_fail("sched_yield baseline: only %llu of %llu sched_yield() calls switched "
                       "thread", (unsigned long long)last_handovers,
                       (unsigned long long)last_total);
        bench_result("baseline", "kernel-sched_yield", "cpus=0",
                     (double)s.ns / (double)last_handovers, "ns");
        bench_note("kernel-sched_yield", "cpus=0: 2 threads, %.1f%% of %llu sched_yield() calls "
                   "switched thread; %.1f ns per call", 100.0 * (double)last_handovers /
                   (double)last_total, (unsigned long long)last_total,
                   (double)s.ns / (double)last_total);
        return 0;
    }
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        struct yield_ctx c = { .nthreads = rows[k].nthreads };
        char param[32];
        alloc_ctx(&c);
        struct bench_sample s =
            bench_measure(run_yield, &c, rows[k].n0, (1u << 28) / c.nthreads);
        free_ctx(&c);
        snprintf(param, sizeof param, "threads=%d", c.nthreads);
        bench_result("yield", "kernel-sched_yield", param,
                     (double)s.ns / (double)(s.iters * c.nthreads), "ns/yield");
        bench_note("kernel-sched_yield", "%s: %.1f%% of sched_yield() calls switched thread", param,
                   100.0 * (double)last_handovers / (double)last_total);
    }
    return 0;
}
