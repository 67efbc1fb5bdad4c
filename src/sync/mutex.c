/*
 * mutex.c — weft_mutex_t: plain and recursive, with owner checking.
 *
 * The futex mutex of "Futexes Are Tricky" over weft's own futex table:
 * state 0 free, 1 held, 2 held and maybe waiters. Lock is one CAS 0 -> 1 when
 * free; a contended locker spins a little (only when another vcore could be
 * running the holder), then swaps in 2 and sleeps on the word while it reads
 * non-zero. Unlock swaps in 0 and, if it was 2, wakes one sleeper by address:
 * after the swap it never touches the mutex again, so the next owner may
 * destroy and free it at once. A woken sleeper competes again (no hand-off:
 * a hand-off convoys every critical section behind a wake-up).
 *
 * Priority inheritance, when the scheduler orders by priority (it has
 * thread_prio_changed: weft__rt.pi). A sleeper lends its priority to the
 * holder (weft__prio_boost) before it sleeps, and the holder gives back what
 * it got through this mutex right after releasing it (weft__prio_unboost),
 * then meets a safe point (the sleeper it woke may be more urgent). The
 * holder must be alive while it is boosted: the sleeper boosts under the
 * futex bucket lock, with the word still 2, and a contended unlock then
 * releases under that same lock (weft__futex_unlock_pi: the uncontended one
 * is a CAS 1 -> 0, which fails once the word is 2), so the holder cannot
 * finish unlocking meanwhile. Unlock wakes the most urgent of the 64
 * oldest sleepers (a bound: thousands asleep are not walked each time). The
 * boost covers the holder only, not a chain (the holder waiting in turn for
 * another mutex does not pass it on), and lasts until that mutex is
 * released, also when the lender gave up (a timed lock).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

#define STATE(m) WEFT__AT(&(m)->state)

/* Spin iterations before sleeping; WEFT_MUTEX_SPIN overrides (0 = never). */
static int mutex_spin_limit(void)
{
    return (int)weft__cfg_num(WEFT__CFG_MUTEX_SPIN, 100);
}

int weft_mutex_init(weft_mutex_t *m, int kind)
{
    if (kind != WEFT_MUTEX_PLAIN && kind != WEFT_MUTEX_RECURSIVE)
        return EINVAL;
    *m = (weft_mutex_t)WEFT_MUTEX_INIT;
    m->kind = (uint32_t)kind;
    return 0;
}

int weft_mutex_destroy(weft_mutex_t *m)
{
    return atomic_load_explicit(STATE(m), memory_order_seq_cst) != 0 || atomic_load_explicit(WEFT__AT(&m->contenders), memory_order_seq_cst) ? EBUSY : 0;
}

static void *owner_of(weft_mutex_t *m)
{
    return atomic_load_explicit(WEFT__ATOMIC(void *, &m->owner), memory_order_relaxed);
}

/* relock(): the caller already holds m: -1 if not, else the result. */
static int relock(weft_mutex_t *m, void *me)
{
    if (owner_of(m) != me)
        return -1;
    if (m->kind != WEFT_MUTEX_RECURSIVE)
        return EDEADLK;
    if (m->depth == UINT32_MAX)
        return EAGAIN;
    m->depth++;
    return 0;
}

static int took(weft_mutex_t *m, void *me)
{
    /* release: a lender that reads it (weft__futex_wait_pi, acquire) may read
     * the owner's uthread (its priorities) */
    atomic_store_explicit(WEFT__ATOMIC(void *, &m->owner), me, memory_order_release);
    m->depth = 1;
    return 0;
}

static bool try_fast(weft_mutex_t *m)
{
    uint32_t zero = 0;
    return atomic_compare_exchange_strong_explicit(STATE(m), &zero, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

int weft_mutex_trylock(weft_mutex_t *m)
{
    void *me = weft__self_token();
    if (try_fast(m))
        return took(m, me);
    /* As pthread_mutex_trylock: a plain mutex held by anyone, the caller
     * included, is EBUSY; a recursive one the caller holds counts one more. */
    if (m->kind == WEFT_MUTEX_RECURSIVE) {
        int r = relock(m, me);
        if (r >= 0)
            return r;
    }
    return EBUSY;
}

static int lock_slow(weft_mutex_t *m, void *me, uint64_t deadline)
{
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK; /* a signal handler that interrupted weft */
    int r = relock(m, me);
    if (r >= 0)
        return r;
    if (weft_num_vcores() > 1) {
        for (int i = mutex_spin_limit(); i > 0; i--) {
            uint32_t s = atomic_load_explicit(STATE(m), memory_order_relaxed);
            if (s == 0 && try_fast(m))
                return took(m, me);
            if (s == 2)
                break; /* others already sleep: join them */
            weft__cpu_relax();
        }
    }
    /* Counted from here until we own m or give up: destroy sees us even
     * between a wake-up and our next try. */
    atomic_fetch_add_explicit(WEFT__AT(&m->contenders), 1, memory_order_relaxed);
    r = 0;
    bool pi = weft__rt.pi;
    while (atomic_exchange_explicit(STATE(m), 2, memory_order_acquire) != 0)
        if ((r = pi ? weft__futex_wait_pi(&m->state, &m->owner, deadline)
                    : weft__futex_wait_checked(&m->state, 2, deadline)) == ETIMEDOUT || r == ENOMEM) {
            break; /* ENOMEM: no timer for the deadline */
        } else {
            r = 0;
        }
    atomic_fetch_sub_explicit(WEFT__AT(&m->contenders), 1, memory_order_release);
    return r ? r : took(m, me);
}

int weft_mutex_lock(weft_mutex_t *m)
{
    void *me = weft__self_token();
    if (WEFT__LIKELY(try_fast(m)))
        return took(m, me);
    return lock_slow(m, me, WEFT_FOREVER);
}

int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline_ns)
{
    if (weft__deadline_check(deadline_ns))
        return EINVAL;
    void *me = weft__self_token();
    if (try_fast(m))
        return took(m, me);
    return lock_slow(m, me, deadline_ns);
}

int weft_mutex_unlock(weft_mutex_t *m)
{
    if (owner_of(m) != weft__self_token() || atomic_load_explicit(STATE(m), memory_order_relaxed) == 0)
        return EPERM;
    if (--m->depth > 0)
        return 0;
    atomic_store_explicit(WEFT__ATOMIC(void *, &m->owner), NULL, memory_order_relaxed);
    uint32_t *word = &m->state;
    if (weft__rt.pi) {
        uint32_t one = 1;
        if (atomic_compare_exchange_strong_explicit(WEFT__AT(word), &one, 0, memory_order_release,
                                                    memory_order_relaxed))
            return 0;
        weft__futex_unlock_pi(word); /* contended: see the top of this file */
        struct weft__vcore *vc = weft__vc_at_entry();
        if (vc && vc->current)
            weft__prio_unboost(vc->current, &m->owner); /* m may be gone: only its address */
        weft__resched_point(); /* the sleeper woken may be more urgent than we are now */
        return 0;
    }
    if (atomic_exchange_explicit(WEFT__AT(word), 0, memory_order_release) == 2)
        weft_futex_wake(word, 1); /* by address: m itself may be gone already */
    return 0;
}
