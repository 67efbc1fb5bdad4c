/*
 * cond.c — weft_cond_t. A waiter queues itself on the condition's queue
 * before it releases the mutex, both under the queue lock, so a signal sent
 * after the release finds it (lock order: cond queue, then mutex queue).
 */
#include <errno.h>

#include "internal.h"

int weft_cond_init(weft_cond_t *c)
{
    *c = (weft_cond_t)WEFT_COND_INIT;
    return 0;
}

int weft_cond_destroy(weft_cond_t *c)
{
    weft__spin_lock(&c->q.lock);
    bool busy = c->q.n != 0;
    weft__spin_unlock(&c->q.lock);
    return busy ? EBUSY : 0;
}

int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline_ns)
{
    if (weft__deadline_check(deadline_ns))
        return EINVAL;
    if (__atomic_load_n(&m->owner, __ATOMIC_RELAXED) != weft__self_token() || m->depth != 1)
        return EPERM;
    struct weft__waiter w;
    weft__waiter_init(&w);
    weft__spin_lock(&c->q.lock);
    weft__waitq_push(&c->q, &w);
    weft_mutex_unlock(m);
    int r;
    if (deadline_ns != WEFT_FOREVER && weft_now_ns() >= deadline_ns) {
        weft__waitq_remove(&c->q, &w);
        weft__spin_unlock(&c->q.lock);
        r = ETIMEDOUT;
    } else {
        r = weft__wait(&c->q.lock, &c->q, &w, deadline_ns, WEFT_BLOCK_SYNC);
    }
    weft_mutex_lock(m);
    return r == ETIMEDOUT ? ETIMEDOUT : 0;
}

int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m)
{
    return weft_cond_timedwait(c, m, WEFT_FOREVER);
}

int weft_cond_signal(weft_cond_t *c)
{
    weft__spin_lock(&c->q.lock);
    struct weft__waiter *w = weft__waitq_pop(&c->q);
    weft__spin_unlock(&c->q.lock);
    if (w)
        weft__waiter_wake(w);
    return 0;
}

int weft_cond_broadcast(weft_cond_t *c)
{
    weft__spin_lock(&c->q.lock);
    struct weft__waiter *all = weft__waitq_take_all(&c->q);
    weft__spin_unlock(&c->q.lock);
    weft__waiter_wake_list(all);
    return 0;
}
