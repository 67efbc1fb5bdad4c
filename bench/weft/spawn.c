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
 *   weft_spawn [--child-stack-copy]
 *
 * With --child-stack-copy (impl=weft-stackcopy) every child is spawned with
 * WEFT_STACK_COPY and only join=each and join=batch1000 run: the cost of a
 * stack-copy uthread that returns without blocking. The spawner is an
 * ordinary uthread either way (WEFT_STACK_OWN, whatever the process default),
 * so only the children change.
 *
 * Peers: bench/peers/kernel/spawn.c (pthread_create + pthread_join),
 * bench/peers/go (spawn), bench/peers/cpp/boost_fiber_spawn.cpp.
 */
#include "bench.h"

#include <weft/weft.h>
#include <weft/sched.h>   /* weft_num_vcores */

#define BATCH 1000

static weft_attr_t child_attr; /* flags = WEFT_STACK_COPY with --child-stack-copy */
static const char *impl = "weft";

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
        bench_check_rc(weft_spawn(&t, &child_attr, child, (void *)(uintptr_t)i));
        bench_check_rc(weft_join(t, &r));
        if ((uintptr_t)r != i)
            bench_fail("%s spawn: child %llu returned %llu", impl, (unsigned long long)i,
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
            bench_check_rc(weft_spawn(&batch[i], &child_attr, child, (void *)(i + 1)));
        for (uintptr_t i = 0; i < BATCH; i++) {
            void *r;
            bench_check_rc(weft_join(batch[i], &r));
            if ((uintptr_t)r != i + 1)
                bench_fail("%s spawn batch: child %zu returned %zu", impl, (size_t)(i + 1),
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
    bench_result("spawn", impl, "join=each", (double)s.ns / (double)s.iters, "ns/spawn");
    s = bench_measure(run_batch, NULL, BATCH, 1u << 26);
    bench_result("spawn", impl, "join=batch1000", (double)s.ns / (double)s.iters, "ns/spawn");
    return NULL;
}

int main(int argc, char **argv)
{
    weft_t coord;
    const weft_attr_t own = { .flags = WEFT_STACK_OWN };

    if (argc == 2 && strcmp(argv[1], "--child-stack-copy") == 0) {
        child_attr.flags = WEFT_STACK_COPY;
        impl = "weft-stackcopy";
    } else if (argc != 1) {
        fprintf(stderr, "%s: unknown option %s\nusage: %s [--child-stack-copy]\n", argv[0],
                argv[1], argv[0]);
        return 2;
    }
    bench_check_rc(weft_init(NULL));
    bench_note(impl, "%d vcores (all); spawner is an ordinary uthread unless from=main%s",
               weft_num_vcores(), child_attr.flags ? "; children WEFT_STACK_COPY" : "");
    bench_check_rc(weft_spawn(&coord, &own, coordinator, NULL));
    bench_check_rc(weft_join(coord, NULL));
    if (child_attr.flags) { /* from main (a kernel thread): not measured for stack copying */
        weft_shutdown();
        return 0;
    }

    struct bench_sample s = bench_measure(run_each, NULL, 100, 1u << 24);
    bench_result("spawn", "weft", "join=each,from=main", (double)s.ns / (double)s.iters,
                 "ns/spawn");
    weft_shutdown();
    return 0;
}
