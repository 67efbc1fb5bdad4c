/*
 * fifo.c — the simplest scheduler: one global FIFO queue for every vcore.
 *
 * It proves the scheduler API is pluggable (WEFT_SCHED=fifo) and serves as a
 * baseline for ws. WEFT_PINNED uthreads are honoured: a vcore skips uthreads
 * pinned to another vcore.
 */
#include <stdatomic.h>

#include <weft/sched.h>

static struct {
    weft_spinlock_t lock;            /* head, tail */
    struct weft_uthread *head, *tail;/* linked by weft_uthread_link()->next */
} q;

static void push(struct weft_uthread *t)
{
    weft_uthread_link(t)->next = NULL;
    weft_spin_lock(&q.lock);
    if (q.tail)
        weft_uthread_link(q.tail)->next = t;
    else
        atomic_store_explicit((struct weft_uthread *_Atomic *)&q.head, t, memory_order_relaxed); /* read unlocked in sched_entry */
    q.tail = t;
    weft_spin_unlock(&q.lock);
}

/* take_local_fifo() takes the oldest uthread vcore me may run. */
static struct weft_uthread *take_local_fifo(int me)
{
    struct weft_uthread *prev = NULL, *t;
    if (!atomic_load_explicit((struct weft_uthread *_Atomic *)&q.head, memory_order_relaxed))
        return NULL;
    weft_spin_lock(&q.lock);
    for (t = q.head; t; prev = t, t = weft_uthread_link(t)->next) {
        struct weft_sched_link *l = weft_uthread_link(t);
        if (!(l->flags & WEFT_PINNED) || l->vcore == me)
            break;
    }
    if (t) {
        struct weft_uthread *next = weft_uthread_link(t)->next;
        if (prev)
            weft_uthread_link(prev)->next = next;
        else
            atomic_store_explicit((struct weft_uthread *_Atomic *)&q.head, next, memory_order_relaxed);
        if (q.tail == t)
            q.tail = prev;
    }
    weft_spin_unlock(&q.lock);
    return t;
}

static void sched_entry_fifo(void)
{
    struct weft_uthread *t = take_local_fifo(weft_vcore_id());
    if (t)
        weft_run_uthread(t);
}

static void thread_runnable_fifo(struct weft_uthread *t)
{
    struct weft_sched_link *l = weft_uthread_link(t);
    int pinned_to = (l->flags & WEFT_PINNED) ? l->vcore : -1;
    push(t); /* t may run, even finish, on another vcore from here on */
    if (pinned_to >= 0)
        weft_vcore_wake(pinned_to);
    else
        weft_vcore_kick(-1);
}

static void thread_paused_fifo(struct weft_uthread *t)
{
    push(t);
}

/* init_fifo(): an empty queue (in a fork child it holds the parent's
 * uthreads, which do not exist there). */
static int init_fifo(int nvcores)
{
    (void)nvcores;
    q.lock = (weft_spinlock_t)WEFT_SPINLOCK_INIT;
    q.head = q.tail = NULL;
    return 0;
}

const struct weft_sched_ops weft__sched_fifo = {
    .name = "fifo",
    .init = init_fifo,
    .sched_entry = sched_entry_fifo,
    .thread_runnable = thread_runnable_fifo,
    .thread_paused = thread_paused_fifo,
    .take_local = take_local_fifo,
};
