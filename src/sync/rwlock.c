/*
 * rwlock.c — weft_rwlock_t, phase-fair. Everything is guarded by rq.lock.
 * Readers enter at once unless a writer holds the lock or waits for it; then
 * they queue. A writer's unlock admits every queued reader (a read phase),
 * else hands the lock to the oldest writer; the last reader's unlock hands it
 * to the oldest writer. Hand-offs set the new owner's state before it wakes,
 * so nobody can barge in between. Neither side starves.
 */
#include <errno.h>

#include "internal.h"

int weft_rwlock_init(weft_rwlock_t *l)
{
    *l = (weft_rwlock_t)WEFT_RWLOCK_INIT;
    return 0;
}

int weft_rwlock_destroy(weft_rwlock_t *l)
{
    weft__spin_lock(&l->rq.lock);
    bool busy = l->readers || l->writer || l->rq.n || l->wq.n;
    weft__spin_unlock(&l->rq.lock);
    return busy ? EBUSY : 0;
}

/* admit_readers(): start a read phase with every queued reader (lock held). */
static struct weft__waiter *admit_readers(weft_rwlock_t *l)
{
    l->readers += l->rq.n;
    return weft__waitq_take_all(&l->rq);
}

/* hand_to_writer(): give the free lock to the oldest queued writer (lock held). */
static struct weft__waiter *hand_to_writer(weft_rwlock_t *l)
{
    struct weft__waiter *w = weft__waitq_pop(&l->wq);
    if (w) {
        l->writer = 1;
        l->wowner = (void *)w->data;
    }
    return w;
}

static int rdlock(weft_rwlock_t *l, uint64_t deadline, bool try)
{
    if (weft__deadline_check(deadline))
        return EINVAL;
    struct weft__waiter local; /* a kernel thread's waiter */
    void *me = weft__self_token();
    weft__spin_lock(&l->rq.lock);
    if (l->writer && l->wowner == me) {
        weft__spin_unlock(&l->rq.lock);
        return EDEADLK;
    }
    if (!l->writer && !l->wq.n) {
        l->readers++;
        weft__spin_unlock(&l->rq.lock);
        return 0;
    }
    if (try || (deadline != WEFT_FOREVER && weft__now_ns() >= deadline)) {
        weft__spin_unlock(&l->rq.lock);
        return try ? EBUSY : ETIMEDOUT;
    }
    struct weft__waiter *w = weft__waiter_mine(&local);
    weft__waitq_push(&l->rq, w);
    return weft__wait(&l->rq.lock, &l->rq, w, deadline, WEFT_BLOCK_SYNC);
}

static int wrlock(weft_rwlock_t *l, uint64_t deadline, bool try)
{
    if (weft__deadline_check(deadline))
        return EINVAL;
    struct weft__waiter local; /* a kernel thread's waiter */
    void *me = weft__self_token();
    weft__spin_lock(&l->rq.lock);
    if (l->writer && l->wowner == me) {
        weft__spin_unlock(&l->rq.lock);
        return EDEADLK;
    }
    if (!l->writer && !l->readers) {
        l->writer = 1;
        l->wowner = me;
        weft__spin_unlock(&l->rq.lock);
        return 0;
    }
    if (try || (deadline != WEFT_FOREVER && weft__now_ns() >= deadline)) {
        weft__spin_unlock(&l->rq.lock);
        return try ? EBUSY : ETIMEDOUT;
    }
    struct weft__waiter *w = weft__waiter_mine(&local);
    w->data = (uintptr_t)me;
    weft__waitq_push(&l->wq, w);
    int r = weft__wait(&l->rq.lock, &l->wq, w, deadline, WEFT_BLOCK_SYNC);
    if (r != ETIMEDOUT && r != ENOMEM) /* ENOMEM: no timer for the deadline; we left too */
        return r;
    /* We left the writer queue: readers queued behind us may enter now. */
    weft__spin_lock(&l->rq.lock);
    struct weft__waiter *wake = NULL;
    if (!l->writer && !l->wq.n)
        wake = admit_readers(l);
    weft__spin_unlock(&l->rq.lock);
    weft__waiter_wake_list(wake);
    return r;
}

int weft_rwlock_rdlock(weft_rwlock_t *l) { return rdlock(l, WEFT_FOREVER, false); }
int weft_rwlock_tryrdlock(weft_rwlock_t *l) { return rdlock(l, WEFT_FOREVER, true); }
int weft_rwlock_timedrdlock(weft_rwlock_t *l, uint64_t d) { return rdlock(l, d, false); }
int weft_rwlock_wrlock(weft_rwlock_t *l) { return wrlock(l, WEFT_FOREVER, false); }
int weft_rwlock_trywrlock(weft_rwlock_t *l) { return wrlock(l, WEFT_FOREVER, true); }
int weft_rwlock_timedwrlock(weft_rwlock_t *l, uint64_t d) { return wrlock(l, d, false); }

int weft_rwlock_unlock(weft_rwlock_t *l)
{
    void *me = weft__self_token();
    struct weft__waiter *wake = NULL;
    weft__spin_lock(&l->rq.lock);
    if (l->writer) {
        if (l->wowner != me) {
            weft__spin_unlock(&l->rq.lock);
            return EPERM;
        }
        l->writer = 0;
        l->wowner = NULL;
        wake = l->rq.n ? admit_readers(l) : hand_to_writer(l);
    } else if (l->readers) {
        if (--l->readers == 0)
            wake = hand_to_writer(l);
    } else {
        weft__spin_unlock(&l->rq.lock);
        return EPERM;
    }
    weft__spin_unlock(&l->rq.lock);
    weft__waiter_wake_list(wake);
    if (wake)
        weft__resched_point();
    return 0;
}
