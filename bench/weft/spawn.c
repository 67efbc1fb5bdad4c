/*
 * spawn.c — nanoseconds per weft_spawn() + weft_join() of an empty uthread.
 *
 * Three ways, on all vcores (the runtime's default):
 *   join=each              a uthread spawns one child and joins it, n times;
 *   join=batch1000         a uthread spawns 1000 children, then joins them all;
 *   join=each,from=main    the same as join=each from main, an ordinary kernel
 *                          thread (the join then sleeps on a futex).
 * Each child returns its argument; the parent checks it got it back, so a
 * child that never ran cannot go unnoticed.
 *
 * Peers: bench/peers/kernel/spawn.c (pthread_create + pthread_join),
 * bench/peers/go (spawn), bench/peers/cpp/boost_fiber_spawn.cpp.
 */
#include "bench.h"

#include <weft/weft.h>
#include <weft/sched.h>   /* weft_num_vcores */

#define BATCH 1000

static void *child(void *arg)
{
    return arg;
}

/* run_each() spawns and joins n children one at a time; returns the ns it took. */
static uint64_t run_each(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        weft_t t;
        void *r;
        bench_check_rc(weft_spawn(&t, NULL, child, (void *)(uintptr_t)i));
        bench_check_rc(weft_join(t, &r));
        if ((uintptr_t)r != i)
            bench_fail("weft spawn: child %llu returned %llu", (unsigned long long)i,
                       (unsigned long long)(uintptr_t)r);
    }
    return bench_now_ns() - t0;
}

/* run_batch() spawns n children (rounded up to whole batches), BATCH at a
 * time, joining each batch; returns the ns per spawn times n, so that the
 * harness's arithmetic stays per spawn. */
static uint64_t run_batch(void *unused, uint64_t n)
{
    (void)unused;
    static weft_t batch[BATCH];   /* only the coordinator uthread touches it */
    uint64_t rounds = (n + BATCH - 1) / BATCH, t0 = bench_now_ns();

    for (uint64_t b = 0; b < rounds; b++) {
        for (uintptr_t i = 0; i < BATCH; i++)
            bench_check_rc(weft_spawn(&batch[i], NULL, child, (void *)(i + 1)));
        for (uintptr_t i = 0; i < BATCH; i++) {
            void *r;
            bench_check_rc(weft_join(batch[i], &r));
            if ((uintptr_t)r != i + 1)
                bench_fail("weft spawn batch: child %zu returned %zu", (size_t)(i + 1),
                           (size_t)(uintptr_t)r);
        }
    }
    uint64_t ns = bench_now_ns() - t0;
    return (uint64_t)((double)ns * (double)n / (double)(rounds * BATCH));
}

static void *coordinator(void *unused)
{
    (void)unused;
    struct bench_sample s = bench_measure(run_each, NULL, 1000, 1u << 26);
    bench_result("spawn", "weft", "join=each", (double)s.ns / (double)s.iters, "ns/spawn");
    s = bench_measure(run_batch, NULL, BATCH, 1u << 26);
    bench_result("spawn", "weft", "join=batch1000", (double)s.ns / (double)s.iters, "ns/spawn");
    return NULL;
}

int main(void)
{
    weft_t coord;

    bench_check_rc(weft_init(NULL));
    bench_note("weft", "%d vcores (all); spawner is a uthread unless from=main", weft_num_vcores());
    bench_check_rc(weft_spawn(&coord, NULL, coordinator, NULL));
    bench_check_rc(weft_join(coord, NULL));

    struct bench_sample s = bench_measure(run_each, NULL, 100, 1u << 24);
    bench_result("spawn", "weft", "join=each,from=main", (double)s.ns / (double)s.iters,
                 "ns/spawn");
    weft_shutdown();
    return 0;
}
