/*
 * wait.c — the one way anything in weft blocks: a waiter on a wait queue.
 *
 * A blocking primitive takes its queue's spinlock, decides it must wait,
 * queues a struct weft__waiter (its uthread's own, weft__waiter_mine(), or
 * on a kernel thread's stack) and calls weft__wait():
 *  - a uthread switches away, and the lock is released only once its
 *    context is saved, so no waker can see it before (the parlib pattern;
 *    no lost wake-up): by the switch itself when the scheduler names a local
 *    successor (weft__block_unlock: weft__ctx_swap_unlock), otherwise by a
 *    callback after the save. A timed wait arms its timer first, still
 *    under the lock: the timeout takes the lock too, so it cannot end the
 *    wait before the save either;
 *  - an outside kernel thread releases the lock and sleeps on the futex word
 *    in its waiter.
 * A waker takes the lock, unlinks waiters and sets their status, releases the
 * lock and only then calls weft__waiter_wake() on each: a uthread is handed
 * to the scheduler, a kernel thread's word is set and futex-woken. A timeout
 * unlinks the waiter under the same lock, so exactly one of "woken" and
 * "timed out" happens.
 */
#include <errno.h>

#include "internal.h"

struct weft__waiter *weft__waitq_pop(struct weft__waitq *q)
{
    struct weft__waiter *w = q->head;
    if (w) {
        weft__waitq_remove(q, w);
        w->status = 0;
    }
    return w;
}

struct weft__waiter *weft__waitq_take_all(struct weft__waitq *q)
{
    struct weft__waiter *head = q->head;
    for (struct weft__waiter *w = head; w; w = w->next)
        w->status = 0;
    q->head = q->tail = NULL;
    atomic_store_explicit(WEFT__AT(&q->n), 0, memory_order_relaxed);
    return head; /* still linked by next, ends in NULL */
}


/* leave_queue() takes w, still waiting, off q with status (the queue's
 * lock held): false if a waker has it already (its status stands). */
static bool leave_queue(struct weft__waitq *q, struct weft__waiter *w, int status)
{
    if (w->status != WEFT__WAITING)
        return false;
    weft__waitq_remove(q, w);
    w->status = status;
    return true;
}

static void block_timeout(struct weft_alarm *tm)
{
    struct weft__wait_rec *b = WEFT__CONTAINER(tm, struct weft__wait_rec, tm);
    struct weft__waiter *w = b->w;
    weft__spin_lock(b->lock);
    bool ours = leave_queue(b->q, w, ETIMEDOUT);
    weft__spin_unlock(b->lock);
    if (ours)
        weft__waiter_wake(w);
}

static int wait_kernel_thread(uint32_t *lock, struct weft__waitq *q, struct weft__waiter *w,
                              uint64_t deadline)
{
    weft__spin_unlock(lock);
    while (atomic_load_explicit(WEFT__AT(&w->word), memory_order_acquire) == 0) {
        if (weft__futex_wait(&w->word, 0, deadline) != ETIMEDOUT)
            continue;
        weft__spin_lock(lock);
        bool ours = leave_queue(q, w, ETIMEDOUT);
        weft__spin_unlock(lock);
        if (ours)
            return ETIMEDOUT;
        deadline = WEFT_FOREVER; /* a waker has us: wait for its word */
    }
    /* TSan ignores the atomics of a fiber that is inside one of its blocking
     * interceptors: under the I/O shim, the waker may be a callback running
     * on a uthread that sleeps in an intercepted usleep(), read()... Only
     * explicit annotations (and the spin locks') count there. */
    weft__san_acquire(&w->word);
    return w->status;
}

/* weft__wait_slow() is weft__wait() (internal.h) for a kernel thread, or
 * a uthread's timed wait. */
int weft__wait_slow(uint32_t *lock, struct weft__waitq *q, struct weft__waiter *w,
                     uint64_t deadline_ns, int why)
{
    struct weft_uthread *ut = weft_self();
    w->ut = ut;
    if (!ut)
        return wait_kernel_thread(lock, q, w, deadline_ns);
    /* A timed wait: the timer reaches the record while we wait, so it is
     * the uthread's, never on its stack. */
    struct weft__wait_rec *b = &ut->rec;
    b->lock = lock;
    b->q = q;
    b->w = w;
    weft_alarm_init(&b->tm, block_timeout);
    b->tm.deadline = deadline_ns;
    /* Armed here, under the queue lock, before the switch: the timeout
     * takes the lock first, so it cannot end the wait before the switch
     * has saved us and released the lock (weft__block_unlock). */
    if (WEFT__UNLIKELY(weft__alarm_arm(&b->tm) != 0)) {
        /* No timer for the deadline: do not wait unbounded. Nobody has
         * taken w yet (we hold the lock since it was queued). */
        leave_queue(q, w, ENOMEM);
        weft__spin_unlock(lock);
        return ENOMEM;
    }
    weft__block_unlock(lock, why);
    /* Waits out a timeout that lost the race (it reads w, so without a
     * wait of ours that would reuse w). */
    weft__alarm_stop_own(&b->tm);
    return w->status;
}

void weft__waiter_wake_kernel(struct weft__waiter *w)
{
    /* The waiter may return as soon as it sees the word: touch nothing after. */
    uint32_t *word = &w->word;
    weft__san_release(word); /* partner: wait_kernel_thread (see there) */
    atomic_store_explicit(WEFT__AT(word), 1, memory_order_release);
    weft__futex_wake(word, 1); /* a stale address only risks a spurious wake-up */
}
