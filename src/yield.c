/*
 * yield.c — the runtime side of the yield pass (<weft/yield.h>, plugin/).
 *
 * Instrumented code tests this kernel thread's weft__yield_flag at its
 * checks; the ticker (preempt.c) sets a vcore's flag through tick.yield_flagp
 * when the same uthread has run there for a whole quantum, after writing
 * the nrun it saw into tick.yield_for. The slow path clears the flag and yields
 * only if the flag is still meant for the uthread running now (nrun ==
 * tick.yield_for): a flag set for a uthread that blocked before its next check
 * must not cut the next one's quantum short. The yield is a preemption
 * like the signal's (WEFT_EV_PREEMPT for this nrun, then
 * weft__notif_deliver), so stats, the paused queue position and
 * disabled regions (delivered at the outermost enable) are the same.
 */
#define _GNU_SOURCE
#include <weft/yield.h>

#include "internal.h"

__thread unsigned char weft__yield_flag __attribute__((tls_model("initial-exec")));
__thread unsigned weft__yield_count __attribute__((tls_model("initial-exec")));

static _Atomic int modes; /* WEFT_YIELD_* of the modules that registered */

void weft__yield_register(int mode)
{
    int before = atomic_fetch_or_explicit(&modes, mode, memory_order_seq_cst);
    if ((mode & WEFT_YIELD_FLAG) && !(before & WEFT_YIELD_FLAG))
        weft__notif_repoll();
}

bool weft__yield_flags_wanted(void)
{
    /* With uthread TLS a uthread reads its own flag, not the vcore's that
     * the ticker sets: no flags then (signals still preempt). */
    return (atomic_load_explicit(&modes, memory_order_relaxed) & WEFT_YIELD_FLAG) &&
           !weft__tls_flag_mode_refused();
}

/* preempt_self(): the running uthread yields as a preemption meant for run
 * n, now, or at the outermost enable when it holds notifications off. */
static void preempt_self(struct weft__vcore *vc, struct weft_uthread *ut, uint64_t n)
{
    vc->tick.preempt_for = n;
    weft__event_post_bits(vc, 1ull << WEFT_EV_PREEMPT);
    if (ut->notif_depth == 0 && ut->in_sched == 0)
        weft__notif_deliver(vc, ut);
}

void weft__yield_slow(void)
{
    atomic_store_explicit(WEFT__ATOMIC(unsigned char, &weft__yield_flag), 0, memory_order_relaxed); /* the ticker writes it too */
    struct weft__vcore *vc = weft__vc();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut)
        return;
    uint64_t n = atomic_load_explicit(&vc->nrun, memory_order_relaxed);
    if (atomic_load_explicit(&vc->tick.yield_for, memory_order_acquire) != n)
        return; /* set for an earlier run here: that one's quantum, not ours */
    preempt_self(vc, ut, n);
}

void weft__yield_count_slow(void)
{
    weft__yield_count = 0;
    struct weft__vcore *vc = weft__vc();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (ut)
        preempt_self(vc, ut, atomic_load_explicit(&vc->nrun, memory_order_relaxed));
}
