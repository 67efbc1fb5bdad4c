/*
 * mutex.c — weft_mutex_t: plain and recursive, with owner checking.
 *
 * state: 0 free, 1 held, 2 held and maybe waiters. Lock is one CAS 0 -> 1 in
 * the common case; unlock is one exchange to 0, plus a wake when it was 2.
 * A contended locker first spins (only when more than one vcore runs: with
 * one, the holder cannot run while we spin), then takes the queue lock,
 * marks the mutex 2 and queues itself, unless the exchange found it free. The
 * unlocker wakes the oldest waiter, which competes again (no hand-off: a
 * hand-off convoys every critical section behind a wake-up). A woken waiter
 * always locks with state 2, so the next unlock looks at the queue again.
 * No wake-up is lost: a waiter queues itself only after setting 2 under the
 * queue lock, and an unlocker that saw 2 takes the same lock to pop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

/* Spin iterations before parking; WEFT_MUTEX_SPIN overrides (0 = never spin). */
static int spin_limit = -1;

static int mutex_spin_limit(void)
{
    int s = __atomic_load_n(&spin_limit, __ATOMIC_RELAXED);
    if (WEFT__UNLIKELY(s < 0)) {
        const char *e = getenv("WEFT_MUTEX_SPIN");
        s = e && *e ? atoi(e) : 100;
        if (s < 0)
            s = 0;
        __atomic_store_n(&spin_limit, s, __ATOMIC_RELAXED);
    }
    return s;
}

#define STATE(m) WEFT__AT(&(m)->state)

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
    weft__spin_lock(&m->q.lock);
    bool busy = atomic_load(STATE(m)) != 0 || m->q.n;
    weft__spin_unlock(&m->q.lock);
    return busy ? EBUSY : 0;
}

static void **owner(weft_mutex_t *m)
{
    return &m->owner;
}

static int already_owned(weft_mutex_t *m, void *me)
{
    if (__atomic_load_n(owner(m), __ATOMIC_RELAXED) != me)
        return -1;
    if (m->kind != WEFT_MUTEX_RECURSIVE)
        return EDEADLK;
    if (m->depth == UINT32_MAX)
        return EAGAIN;
    m->depth++;
    return 0;
}

static void took(weft_mutex_t *m, void *me)
{
    __atomic_store_n(owner(m), me, __ATOMIC_RELAXED);
    m->depth = 1;
}

int weft_mutex_trylock(weft_mutex_t *m)
{
    void *me = weft__self_token();
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong_explicit(STATE(m), &zero, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        took(m, me);
        return 0;
    }
    int r = already_owned(m, me);
    return r >= 0 ? r : EBUSY;
}

static int lock_slow(weft_mutex_t *m, void *me, uint64_t deadline)
{
    int r = already_owned(m, me);
    if (r >= 0)
        return r;
    if (weft__deadline_check(deadline))
        return EINVAL;
    if (weft_num_vcores() > 1) {
        for (int i = mutex_spin_limit(); i > 0; i--) {
            uint32_t s = atomic_load_explicit(STATE(m), memory_order_relaxed);
            if (s == 0 && atomic_compare_exchange_weak_explicit(STATE(m), &s, 1, memory_order_acquire,
                                                                memory_order_relaxed)) {
                took(m, me);
                return 0;
            }
            if (s == 2)
                break; /* others already sleep: join them */
            weft__cpu_relax();
        }
    }
    for (;;) {
        weft__spin_lock(&m->q.lock);
        if (atomic_exchange_explicit(STATE(m), 2, memory_order_acquire) == 0) {
            weft__spin_unlock(&m->q.lock);
            took(m, me);
            return 0;
        }
        if (deadline != WEFT_FOREVER && weft_now_ns() >= deadline) {
            weft__spin_unlock(&m->q.lock);
            return ETIMEDOUT;
        }
        struct weft__waiter w;
        weft__waiter_init(&w);
        weft__waitq_push(&m->q, &w);
        if (weft__wait(&m->q.lock, &m->q, &w, deadline, WEFT_BLOCK_SYNC) == ETIMEDOUT)
            return ETIMEDOUT;
    }
}

int weft_mutex_lock(weft_mutex_t *m)
{
    void *me = weft__self_token();
    uint32_t zero = 0;
    if (WEFT__LIKELY(atomic_compare_exchange_strong_explicit(STATE(m), &zero, 1, memory_order_acquire,
                                                             memory_order_relaxed))) {
        took(m, me);
        return 0;
    }
    return lock_slow(m, me, WEFT_FOREVER);
}

int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline_ns)
{
    if (weft__deadline_check(deadline_ns))
        return EINVAL;
    void *me = weft__self_token();
    uint32_t zero = 0;
    if (atomic_compare_exchange_strong_explicit(STATE(m), &zero, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
        took(m, me);
        return 0;
    }
    return lock_slow(m, me, deadline_ns);
}

int weft_mutex_unlock(weft_mutex_t *m)
{
    void *me = weft__self_token();
    if (__atomic_load_n(owner(m), __ATOMIC_RELAXED) != me || atomic_load_explicit(STATE(m), memory_order_relaxed) == 0)
        return EPERM;
    if (--m->depth > 0)
        return 0;
    __atomic_store_n(owner(m), NULL, __ATOMIC_RELAXED);
    if (WEFT__LIKELY(atomic_exchange_explicit(STATE(m), 0, memory_order_release) == 1))
        return 0;
    weft__spin_lock(&m->q.lock);
    struct weft__waiter *w = weft__waitq_pop(&m->q);
    weft__spin_unlock(&m->q.lock);
    if (w)
        weft__waiter_wake(w);
    return 0;
}
