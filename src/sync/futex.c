/*
 * futex.c — weft_futex_wait/wake on any 32-bit word, for uthreads and kernel
 * threads alike: a hashed table of wait queues keyed by address. The value
 * check happens under the bucket lock that wake takes too, so a wake that
 * follows a change of the word cannot miss a waiter that saw the old value.
 */
#include <errno.h>
#include <limits.h>

#include "internal.h"

#define NBUCKETS 256
#define PI_SCAN 64 /* sleepers a priority-inheriting unlock compares */

static struct bucket {
    struct weft__waitq q;   /* waiters of every address hashing here */
} __attribute__((aligned(WEFT__CACHELINE))) buckets[NBUCKETS];

static struct bucket *bucket_of(const uint32_t *addr)
{
    uintptr_t a = (uintptr_t)addr;
    a ^= a >> 17;
    a *= 0x9e3779b97f4a7c15ull;
    return &buckets[(a >> 32) % NBUCKETS];
}

void weft__futex_forked(void)
{
    /* The waiters were the parent's uthreads and threads: none is here. */
    for (int i = 0; i < NBUCKETS; i++)
        buckets[i].q = (struct weft__waitq){ 0, 0, NULL, NULL };
}

int weft_futex_wait(uint32_t *addr, uint32_t val, uint64_t deadline_ns)
{
    if (!addr || ((uintptr_t)addr & 3) || weft__deadline_check(deadline_ns))
        return EINVAL;
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK; /* a signal handler that interrupted weft */
    return weft__futex_wait_checked(addr, val, deadline_ns);
}

int weft__futex_wait_checked(uint32_t *addr, uint32_t val, uint64_t deadline_ns)
{
    weft__sc_check(addr, "a futex word (mutex, condition variable, semaphore, barrier, "
                         "once, wait group or weft_futex_wait word) waited on");
    struct bucket *b = bucket_of(addr);
    weft__spin_lock(&b->q.lock);
    if (atomic_load_explicit(WEFT__AT(addr), memory_order_acquire) != val) {
        weft__spin_unlock(&b->q.lock);
        return EAGAIN;
    }
    if (deadline_ns != WEFT_FOREVER && weft__now_ns() >= deadline_ns) {
        weft__spin_unlock(&b->q.lock);
        return ETIMEDOUT;
    }
    struct weft__waiter local, *w = weft__waiter_mine(&local);
    w->data = (uintptr_t)addr;
    weft__waitq_push(&b->q, w);
    return weft__wait(&b->q.lock, &b->q, w, deadline_ns, WEFT_BLOCK_SYNC);
}

void weft__futex_wake_everyone(void)
{
    for (int i = 0; i < NBUCKETS; i++) {
        struct bucket *b = &buckets[i];
        weft__spin_lock(&b->q.lock);
        struct weft__waiter *all = weft__waitq_take_all(&b->q);
        weft__spin_unlock(&b->q.lock);
        weft__waiter_wake_list(all); /* spurious for most: they look again */
    }
}

int weft_futex_wake(uint32_t *addr, int n)
{
    if (n <= 0 || !addr)
        return 0;
    struct weft__vcore *vc = weft__vc_at_entry();
    if (WEFT__UNLIKELY(weft__interrupted(vc))) {
        /* Vcore context, or a signal handler's call (weft_sem_post's
         * wake-up, say) that may have interrupted weft holding this very
         * bucket: the vcore does it at its next decision. The count of
         * woken sleepers is not known yet: 0. */
        if (weft__rt.nvcores > 0) {
            weft__defer_futex_wake(vc, addr, n);
            return 0;
        }
    }
    return weft__futex_wake_now(addr, n);
}

int weft__futex_wake_now(uint32_t *addr, int n)
{
    struct bucket *b = bucket_of(addr);
    struct weft__waiter *wake = NULL, **tail = &wake;
    int woken = 0;
    weft__spin_lock(&b->q.lock);
    for (struct weft__waiter *w = b->q.head, *next; w && woken < n; w = next) {
        next = w->next;
        if (w->data != (uintptr_t)addr)
            continue;
        weft__waitq_remove(&b->q, w);
        w->status = 0;
        *tail = w;
        tail = &w->next;
        woken++;
    }
    weft__spin_unlock(&b->q.lock);
    weft__waiter_wake_list(wake);
    return woken;
}

/* ---- priority inheritance for weft mutexes (sync/mutex.c) ------------------------- */

int weft__futex_wait_pi(uint32_t *addr, void *const *owner, uint64_t deadline_ns)
{
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK;
    struct weft__vcore *vc = weft__vc_at_entry(); /* nothing below switches before the wait */
    struct weft_uthread *me = vc ? vc->current : NULL;
    weft__sc_check(addr, "a mutex waited on");
    struct bucket *b = bucket_of(addr);
    weft__spin_lock(&b->q.lock);
    if (atomic_load_explicit(WEFT__AT(addr), memory_order_acquire) != 2) {
        weft__spin_unlock(&b->q.lock);
        return EAGAIN;
    }
    if (deadline_ns != WEFT_FOREVER && weft__now_ns() >= deadline_ns) {
        weft__spin_unlock(&b->q.lock);
        return ETIMEDOUT;
    }
    /* The mutex is held and contended, and we hold its bucket: its holder
     * cannot release it (a contended unlock takes this lock, see mutex.c),
     * so the owner word names the live holder, or NULL if it has not
     * written it yet. Lend it our priority if it is a less urgent uthread
     * of this runtime (an outside thread's token is odd). */
    void *o = atomic_load_explicit(WEFT__ATOMIC(void *, owner), memory_order_acquire); /* partner: mutex.c took() */
    if (me && o && o != me && !((uintptr_t)o & 1)) {
        struct weft_uthread *h = o;
        int mine = weft_uthread_prio(me);
        if (h->prio.gen == weft__rt.gen && weft_uthread_prio(h) < mine)
            weft__prio_boost(h, owner, mine);
    }
    struct weft__waiter local, *w = weft__waiter_mine(&local);
    w->data = (uintptr_t)addr;
    weft__waitq_push(&b->q, w);
    return weft__wait(&b->q.lock, &b->q, w, deadline_ns, WEFT_BLOCK_SYNC);
}

void weft__futex_unlock_pi(uint32_t *addr)
{
    struct bucket *b = bucket_of(addr);
    struct weft__waiter *best = NULL;
    int best_prio = 0;
    weft__spin_lock(&b->q.lock);
    atomic_store_explicit(WEFT__AT(addr), 0, memory_order_release); /* last touch of the mutex */
    /* The most urgent of the first PI_SCAN sleepers (the oldest of those),
     * a kernel thread counting as the default priority: a bound, or an
     * unlock with thousands asleep walks them all, every time. */
    int seen = 0;
    for (struct weft__waiter *w = b->q.head; w && seen < PI_SCAN; w = w->next) {
        if (w->data != (uintptr_t)addr)
            continue;
        seen++;
        int p = w->ut ? weft_uthread_prio(w->ut) : 0;
        if (!best || p > best_prio) {
            best = w;
            best_prio = p;
        }
    }
    if (best) {
        weft__waitq_remove(&b->q, best);
        best->status = 0;
    }
    weft__spin_unlock(&b->q.lock);
    if (best)
        weft__waiter_wake(best);
}

int weft__futex_waiters(const uint32_t *addr)
{
    struct bucket *b = bucket_of(addr);
    int n = 0;
    weft__spin_lock(&b->q.lock);
    for (struct weft__waiter *w = b->q.head; w; w = w->next)
        n += w->data == (uintptr_t)addr;
    weft__spin_unlock(&b->q.lock);
    return n;
}
