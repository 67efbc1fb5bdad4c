/*
 * barrier.c — weft_barrier_t. The last thread to arrive resets the phase and
 * wakes everyone; woken waiters never touch the barrier again, so it may be
 * destroyed or reused as soon as weft_barrier_wait() returns anywhere.
 */
#include <errno.h>

#include "internal.h"

int weft_barrier_init(weft_barrier_t *b, unsigned count)
{
    if (count == 0)
        return EINVAL;
    b->count = count;
    b->arrived = 0;
    b->q = (struct weft__waitq){ 0, 0, 0, 0 };
    return 0;
}

int weft_barrier_destroy(weft_barrier_t *b)
{
    weft__spin_lock(&b->q.lock);
    bool busy = b->arrived != 0;
    weft__spin_unlock(&b->q.lock);
    return busy ? EBUSY : 0;
}

int weft_barrier_wait(weft_barrier_t *b)
{
    weft__spin_lock(&b->q.lock);
    if (++b->arrived == b->count) {
        b->arrived = 0;
        struct weft__waiter *all = weft__waitq_take_all(&b->q);
        weft__spin_unlock(&b->q.lock);
        weft__waiter_wake_list(all);
        return WEFT_BARRIER_SERIAL;
    }
    struct weft__waiter w;
    weft__waiter_init(&w);
    weft__waitq_push(&b->q, &w);
    weft__wait(&b->q.lock, &b->q, &w, WEFT_FOREVER, WEFT_BLOCK_SYNC);
    return 0;
}
