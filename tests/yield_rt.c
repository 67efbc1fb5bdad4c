/*
 * yield_rt — the runtime side of the yield pass, with checks written by
 * hand where the pass would put them (see yield_common.h for what it
 * proves), plus the slow paths' contracts:
 *  (e) a flag set for an earlier run is stale: weft__yield_slow() clears it
 *      and does not yield;
 *  (f) weft__yield_count_slow() resets the count and yields once;
 *  (g) outside a uthread (main, a kernel thread) both slow paths only clear.
 * The hand-written check reads the TLS flag in C: fine here, where
 * everything runs on one vcore (the pass reads it relative to the thread
 * pointer at each check because uthreads migrate).
 */
#include "yield_common.h"

void spin_checked(atomic_int *stop, atomic_ulong *count)
{
    while (!atomic_load_explicit(stop, memory_order_relaxed)) {
        atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
        if (__builtin_expect(__atomic_load_n(&weft__yield_flag, __ATOMIC_RELAXED), 0))
            weft__yield_slow();
    }
}

void spin_unchecked(atomic_int *stop, atomic_ulong *count)
{
    while (!atomic_load_explicit(stop, memory_order_relaxed))
        atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

static void *slow_paths(void *arg)
{
    (void)arg;
    CHECK_RC(weft_set_preempt_period(0), 0); /* nobody sets the flag meanwhile */
    struct weft_vcore_stats s0, s1;
    weft_yield();                            /* a fresh run: the ticker never flagged it */
    CHECK_RC(weft_stats(0, &s0), 0);
    __atomic_store_n(&weft__yield_flag, 1, __ATOMIC_RELAXED);
    weft__yield_slow();
    CHECK_RC(weft_stats(0, &s1), 0);
    CHECK(__atomic_load_n(&weft__yield_flag, __ATOMIC_RELAXED) == 0, "the slow path left the flag set");
    CHECK(s1.decisions == s0.decisions, "a stale flag made the uthread yield");

    weft__yield_count = 41;
    weft__yield_count_slow();
    CHECK_RC(weft_stats(0, &s0), 0);
    CHECK(weft__yield_count == 0, "the counter slow path left the count at %u", weft__yield_count);
    CHECK(s0.decisions == s1.decisions + 1 && s0.preempt_taken == s1.preempt_taken + 1,
          "the counter slow path: %llu decisions, %llu preemptions (want one each)",
          (unsigned long long)(s0.decisions - s1.decisions),
          (unsigned long long)(s0.preempt_taken - s1.preempt_taken));
    CHECK_RC(weft_set_preempt_period(YQ_US), 0);
    return (void *)1;
}

int main(void)
{
    int r = yield_main("yield_rt");
    CHECK_RC(weft_init(&(struct weft_config){ .vcores = 1 }), 0);
    check_phase("(e, f) the slow paths");
    CHECK(in_uthread(slow_paths, NULL) == (void *)1, "slow paths");
    check_phase("(g) outside a uthread");
    weft__yield_flag = 1;
    weft__yield_slow();
    CHECK(weft__yield_flag == 0, "the slow path left main's flag set");
    weft__yield_count = 7;
    weft__yield_count_slow();
    CHECK(weft__yield_count == 0, "the counter slow path left main's count set");
    weft_shutdown();
    return r;
}
