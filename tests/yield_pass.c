/*
 * yield_pass — loops compiled with the yield pass (plugin/) in flag mode, on
 * the runtime (see yield_common.h for cases (a)-(d)): spin_checked is a
 * plain loop the pass instruments, spin_unchecked the same loop in a
 * WEFT_NOYIELD function, which the pass must leave alone ((b) fails if it
 * does not). Also proves:
 *  (e) counter mode (yield_pass_counter.c, compiled with
 *      -weft-yield-mode=counter -weft-yield-threshold=1000): a loop of
 *      10 000 iterations yields exactly 10 times.
 */
#include "yield_common.h"

void spin_checked(atomic_int *stop, atomic_ulong *count)
{
    while (!atomic_load_explicit(stop, memory_order_relaxed))
        atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

WEFT_NOYIELD void spin_unchecked(atomic_int *stop, atomic_ulong *count)
{
    while (!atomic_load_explicit(stop, memory_order_relaxed))
        atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
}

unsigned long count_latches(unsigned long n); /* yield_pass_counter.c */

static void *counter_case(void *arg)
{
    (void)arg;
    struct weft_vcore_stats s0, s1;
    weft__yield_count = 0;
    CHECK_RC(weft_stats(0, &s0), 0);
    unsigned long r = count_latches(10000);
    CHECK_RC(weft_stats(0, &s1), 0);
    CHECK(r == 10000, "count_latches returned %lu", r);
    CHECK(s1.preempt_taken - s0.preempt_taken == 10,
          "counter mode at threshold 1000: %llu yields in 10 000 latches (want 10)",
          (unsigned long long)(s1.preempt_taken - s0.preempt_taken));
    return (void *)1;
}

int main(void)
{
    int r = yield_main("yield_pass");
    CHECK_RC(weft_init(&(struct weft_config){ .vcores = 1 }), 0);
    check_phase("(e) counter mode");
    CHECK(in_uthread(counter_case, NULL) == (void *)1, "counter mode");
    weft_shutdown();
    return r;
}
