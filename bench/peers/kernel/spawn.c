/*
 * spawn.c (kernel peer) — nanoseconds per pthread_create() + pthread_join()
 * of an empty thread, default attributes, no pinning. Each child returns its
 * argument and main checks it.
 */
#include "bench.h"

static void *child(void *arg)
{
    return arg;
}

static uint64_t run_each(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        pthread_t t;
        void *r;
        bench_check_rc(pthread_create(&t, NULL, child, (void *)(uintptr_t)i));
        bench_check_rc(pthread_join(t, &r));
        if ((uintptr_t)r != i)
            bench_fail("pthread spawn: child %llu returned %llu", (unsigned long long)i,
                       (unsigned long long)(uintptr_t)r);
    }
    return bench_now_ns() - t0;
}

int main(void)
{
    struct bench_sample s = bench_measure(run_each, NULL, 100, 1u << 24);
    bench_result("spawn", "pthread", "join=each", (double)s.ns / (double)s.iters, "ns/spawn");
    return 0;
}
