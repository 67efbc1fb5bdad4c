/*
 * sem.c — weft_sem_t, a counting semaphore. wait takes a unit with one CAS
 * when there is one; post, under the queue lock, hands its unit straight to
 * the oldest waiter if there is one and adds it to the count only otherwise,
 * so a unit is never both counted and given, and never lost.
 */
#include <errno.h>

#include "internal.h"

#define VALUE(s) WEFT__AT(&(s)->value)

int weft_sem_init(weft_sem_t *s, int value)
{
    if (value < 0)
        return EINVAL;
    *s = (weft_sem_t)WEFT_SEM_INIT((uint32_t)value);
    return 0;
}

int weft_sem_destroy(weft_sem_t *s)
{
    weft__spin_lock(&s->q.lock);
    bool busy = s->q.n != 0;
    weft__spin_unlock(&s->q.lock);
    return busy ? EBUSY : 0;
}

static bool take(weft_sem_t *s)
{
    uint32_t v = atomic_load_explicit(VALUE(s), memory_order_relaxed);
    while (v > 0)
        if (atomic_compare_exchange_weak_explicit(VALUE(s), &v, v - 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return true;
    return false;
}

int weft_sem_trywait(weft_sem_t *s)
{
    return take(s) ? 0 : EAGAIN;
}

int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline_ns)
{
    if (weft__deadline_check(deadline_ns))
        return EINVAL;
    if (take(s))
        return 0;
    weft__spin_lock(&s->q.lock);
    if (take(s)) {
        weft__spin_unlock(&s->q.lock);
        return 0;
    }
    if (deadline_ns != WEFT_FOREVER && weft_now_ns() >= deadline_ns) {
        weft__spin_unlock(&s->q.lock);
        return ETIMEDOUT;
    }
    struct weft__waiter w;
    weft__waiter_init(&w);
    weft__waitq_push(&s->q, &w);
    return weft__wait(&s->q.lock, &s->q, &w, deadline_ns, WEFT_BLOCK_SYNC);
}

int weft_sem_wait(weft_sem_t *s)
{
    return weft_sem_timedwait(s, WEFT_FOREVER);
}

int weft_sem_post(weft_sem_t *s)
{
    weft__spin_lock(&s->q.lock);
    struct weft__waiter *w = weft__waitq_pop(&s->q);
    if (!w) {
        if (atomic_load_explicit(VALUE(s), memory_order_relaxed) >= WEFT_SEM_VALUE_MAX) {
            weft__spin_unlock(&s->q.lock);
            return EOVERFLOW;
        }
        atomic_fetch_add_explicit(VALUE(s), 1, memory_order_release);
    }
    weft__spin_unlock(&s->q.lock);
    if (w)
        weft__waiter_wake(w); /* the unit is its own: status 0 */
    return 0;
}

int weft_sem_value(weft_sem_t *s)
{
    return (int)atomic_load_explicit(VALUE(s), memory_order_relaxed);
}
