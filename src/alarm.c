/*
 * alarm.c — one-shot timers whose callbacks run in vcore context.
 *
 * For now one binary min-heap for the whole process, guarded by a spinlock;
 * the time and I/O work replaces it with a heap per vcore. Nobody needs a
 * thread for timers: busy vcores run due timers at each scheduling decision
 * (weft__vcore_loop), and one parked vcore sleeps until the earliest deadline
 * (vcore_park). Adding a timer earlier than the one that vcore sleeps for
 * wakes it (weft__vcore_wake_for_timer).
 *
 * Lock order: a wait queue's lock may be held while arming a timer (queue ->
 * heap); callbacks run with the heap lock released, so they may take queue
 * locks.
 */
#include <stdlib.h>

#include "internal.h"

static struct {
    uint32_t lock;               /* spinlock: everything below */
    struct weft__timer **heap;   /* min-heap on deadline */
    int n, cap;
} th;

_Atomic uint64_t weft__timer_min = UINT64_MAX; /* heap[0]->deadline or UINT64_MAX; written under th.lock */

static void put(int i, struct weft__timer *t)
{
    th.heap[i] = t;
    t->idx = i;
}

static void sift_up(int i)
{
    struct weft__timer *t = th.heap[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (th.heap[p]->deadline <= t->deadline)
            break;
        put(i, th.heap[p]);
        i = p;
    }
    put(i, t);
}

static void sift_down(int i)
{
    struct weft__timer *t = th.heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= th.n)
            break;
        if (c + 1 < th.n && th.heap[c + 1]->deadline < th.heap[c]->deadline)
            c++;
        if (th.heap[c]->deadline >= t->deadline)
            break;
        put(i, th.heap[c]);
        i = c;
    }
    put(i, t);
}

static void remove_at(int i)
{
    struct weft__timer *last = th.heap[--th.n];
    if (i < th.n) {
        put(i, last);
        sift_up(i);
        sift_down(last->idx);
    }
}

static void publish_min(void)
{
    atomic_store_explicit(&weft__timer_min, th.n ? th.heap[0]->deadline : UINT64_MAX, memory_order_release);
}

void weft__timer_start(struct weft__timer *t)
{
    weft__spin_lock(&th.lock);
    if (th.n == th.cap) {
        int cap = th.cap ? th.cap * 2 : 64;
        struct weft__timer **h = realloc(th.heap, sizeof *h * (size_t)cap);
        if (!h)
            weft__panic("out of memory for the timer heap (%d timers)", th.n);
        th.heap = h;
        th.cap = cap;
    }
    atomic_store_explicit(&t->state, WEFT__T_ARMED, memory_order_relaxed);
    put(th.n++, t);
    sift_up(th.n - 1);
    bool earliest = th.heap[0] == t;
    publish_min();
    uint64_t d = t->deadline;
    weft__spin_unlock(&th.lock);
    if (earliest)
        weft__vcore_wake_for_timer(d);
}

bool weft__timer_cancel(struct weft__timer *t)
{
    if (atomic_load_explicit(&t->state, memory_order_acquire) == WEFT__T_IDLE)
        return false;
    weft__spin_lock(&th.lock);
    bool armed = atomic_load_explicit(&t->state, memory_order_relaxed) == WEFT__T_ARMED;
    if (armed) {
        remove_at(t->idx);
        atomic_store_explicit(&t->state, WEFT__T_IDLE, memory_order_relaxed);
        publish_min();
    }
    weft__spin_unlock(&th.lock);
    if (armed)
        return true;
    while (atomic_load_explicit(&t->state, memory_order_acquire) != WEFT__T_IDLE)
        weft__cpu_relax(); /* its callback is running on another vcore: a few instructions */
    return false;
}

void weft__timers_run(uint64_t now)
{
    for (;;) {
        weft__spin_lock(&th.lock);
        if (!th.n || th.heap[0]->deadline > now) {
            weft__spin_unlock(&th.lock);
            return;
        }
        struct weft__timer *t = th.heap[0];
        remove_at(0);
        atomic_store_explicit(&t->state, WEFT__T_FIRING, memory_order_relaxed);
        publish_min();
        weft__spin_unlock(&th.lock);
        t->fn(t);
        atomic_store_explicit(&t->state, WEFT__T_IDLE, memory_order_release); /* partner: cancel */
    }
}
