/*
 * cond.c — weft_cond_t: a sequence word and weft's futex table.
 *
 * A waiter reads the sequence while it holds the mutex, releases the mutex
 * and sleeps while the sequence is unchanged; signal and broadcast bump the
 * sequence and wake one or all sleepers by address. A signal that lands
 * between the release and the sleep changes the sequence, so the sleep does
 * not happen: nothing is lost. Wakers never touch the condition after the
 * bump; a woken waiter's last touch is leaving the waiters count, which
 * weft_cond_destroy() waits for, so it may be destroyed right after a
 * broadcast.
 */
#include <errno.h>
#include <limits.h>

#include "internal.h"

int weft_cond_init(weft_cond_t *c)
{
    *c = (weft_cond_t)WEFT_COND_INIT;
    return 0;
}

int weft_cond_destroy(weft_cond_t *c)
{
    /* A waiter is either asleep in the futex table (EBUSY), or on its way
     * in or out: wait for it to get there or to leave. */
    while (atomic_load_explicit(WEFT__AT(&c->waiters), memory_order_acquire)) {
        if (weft__futex_waiters(&c->seq))
            return EBUSY;
        weft_yield();
    }
    return 0;
}

int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline_ns)
{
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK; /* a signal handler that interrupted weft */
    if (weft__deadline_check(deadline_ns))
        return EINVAL;
    if (atomic_load_explicit(WEFT__ATOMIC(void *, &m->owner), memory_order_relaxed) != weft__self_token() || m->depth != 1)
        return EPERM;
    uint32_t seq = atomic_load_explicit(WEFT__AT(&c->seq), memory_order_relaxed);
    atomic_fetch_add_explicit(WEFT__AT(&c->waiters), 1, memory_order_relaxed);
    weft_mutex_unlock(m);
    int r = weft__futex_wait_checked(&c->seq, seq, deadline_ns);
    atomic_fetch_sub_explicit(WEFT__AT(&c->waiters), 1, memory_order_release); /* last touch of c */
    weft_mutex_lock(m);
    return r == ETIMEDOUT || r == ENOMEM ? r : 0; /* ENOMEM: no timer for the deadline */
}

int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m)
{
    return weft_cond_timedwait(c, m, WEFT_FOREVER);
}

static int bump_and_wake(weft_cond_t *c, int n)
{
    uint32_t *seq = &c->seq;
    atomic_fetch_add_explicit(WEFT__AT(seq), 1, memory_order_release);
    weft_futex_wake(seq, n);
    weft__resched_point();
    return 0;
}

int weft_cond_signal(weft_cond_t *c)
{
    return bump_and_wake(c, 1);
}

int weft_cond_broadcast(weft_cond_t *c)
{
    return bump_and_wake(c, INT_MAX);
}
