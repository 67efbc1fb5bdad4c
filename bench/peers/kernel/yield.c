/*
 * yield.c (kernel peer) — nanoseconds per sched_yield() with 2 and with 100
 * pthreads, all pinned to CPU 0 (pthread_setaffinity_np, as `taskset -c 0`).
 *
 * The threads meet at a barrier, main takes the start time, and each thread
 * calls sched_yield() n times. Handovers (another thread ran since this one
 * last did) are counted and reported as a NOTE: unlike weft's FIFO the kernel
 * does not promise that sched_yield() switches, and if it often did not, the
 * figure would be a syscall cost rather than a switch cost.
 */
#include "bench.h"

#include <stdatomic.h>

static const int thread_counts[] = { 2, 100 };

struct yield_ctx {
    int nthreads;
    uint64_t n;                  /* yields per thread */
    pthread_barrier_t start;
    pthread_t threads[100];
};

static atomic_int last_runner;            /* id of the thread that ran last */
static atomic_uint_fast64_t handovers;
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
    atomic_fetch_add(&handovers, h);
    return (void *)(uintptr_t)i;
}

static uint64_t run_yield(void *arg, uint64_t n)
{
    struct yield_ctx *c = arg;
    struct worker_arg w[100];
    uint64_t done = 0, t0, t1, total = n * (uint64_t)c->nthreads;

    c->n = n;
    atomic_store(&last_runner, -1);
    atomic_store(&handovers, 0);
    bench_check_rc(pthread_barrier_init(&c->start, NULL, (unsigned)c->nthreads + 1));
    for (int i = 0; i < c->nthreads; i++) {
        w[i] = (struct worker_arg){ c, i };
        bench_check_rc(pthread_create(&c->threads[i], NULL, worker, &w[i]));
    }
    pthread_barrier_wait(&c->start);
    t0 = bench_now_ns();
    for (int i = 0; i < c->nthreads; i++) {
        void *r;
        bench_check_rc(pthread_join(c->threads[i], &r));
        done += (uintptr_t)r;
    }
    t1 = bench_now_ns();
    pthread_barrier_destroy(&c->start);
    if (done != total)
        bench_fail("sched_yield: %llu yields done, %llu asked", (unsigned long long)done,
                   (unsigned long long)total);
    last_total = total;
    last_handovers = atomic_load(&handovers);
    return t1 - t0;
}

int main(void)
{
    bench_need_cpus(1);
    for (size_t k = 0; k < sizeof thread_counts / sizeof thread_counts[0]; k++) {
        struct yield_ctx c = { .nthreads = thread_counts[k] };
        char param[32];
        struct bench_sample s = bench_measure(run_yield, &c, 1000, (1u << 28) / c.nthreads);
        snprintf(param, sizeof param, "threads=%d", c.nthreads);
        bench_result("yield", "kernel-sched_yield", param,
                     (double)s.ns / (double)(s.iters * c.nthreads), "ns/yield");
        bench_note("kernel-sched_yield", "%s: %.1f%% of sched_yield() calls switched thread", param,
                   100.0 * (double)last_handovers / (double)last_total);
    }
    return 0;
}
