/*
 * ws.c — the default scheduler: per-vcore FIFO run queues with work stealing.
 *
 * Written only against <weft/sched.h>, like an application's scheduler.
 *  - A uthread made runnable goes to the queue of the vcore it last ran on
 *    (or the one asked for at spawn, or the spawner's, or round robin from
 *    outside): behind the other woken or new ones at the front (wtail
 *    marks where they end), ahead of the uthreads that were paused (yield,
 *    preemption). A sleeper whose alarm fired runs after the wake-ups
 *    before it, not behind every CPU-bound uthread the preemption tick
 *    rotates; with nothing paused the queue is plain FIFO, and a batch of
 *    wake-ups (alarms in deadline order, the poller's events) keeps its
 *    order. At most NEXT_CHAIN decisions in a row come from `next` and the
 *    front part (wchain), then a paused one runs: wake-ups cannot starve
 *    the paused.
 *  - A yielding or preempted uthread goes to the back of its own vcore's queue.
 *  - A vcore runs the front of its queue; when it is empty it picks two
 *    other vcores at random and steals the older half of the longer queue
 *    (WEFT_PINNED uthreads are never stolen).
 *  - A lone uthread just queued on a busy vcore is left there for a few
 *    idle rounds of the thief (LONE_ROUNDS), like Go's runnext: a spawner
 *    that joins, or a waker that blocks next, usually runs it itself within
 *    a few hundred ns, and stealing it would only move its cache lines.
 *    Only while the victim vcore is busy (weft_vcore_busy()), and
 *    never when the thief is about to park (weft_vcore_parking()): nothing
 *    may wait on a vcore that could be busy for long.
 *  - A uthread that has run before (WS_RAN), woken by a uthread running on
 *    its own vcore, goes to that vcore's one-slot `next` instead (Go's
 *    runnext; fresh spawns keep their FIFO order, and wake-ups from vcore
 *    context, which come in batches in deadline or event order (alarms,
 *    the poller), keep theirs): it runs at the
 *    vcore's next decision, while what its waker just wrote for it is still
 *    in cache. A thread it displaces goes to the back of the queue. At most
 *    NEXT_CHAIN decisions in a row are taken from `next`, then the front of
 *    the queue runs: two uthreads waking each other cannot starve the rest.
 *    For thieves `next` is one more queued uthread (it counts in the length
 *    they look at, and a lone one is left alone as above).
 * Each queue is a singly linked list under its own spinlock; len is read
 * without the lock to choose victims and to skip empty queues. `next` is
 * taken with an atomic exchange by whoever runs it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include <weft/sched.h>

struct rq {
    weft_spinlock_t lock;            /* head, tail, wtail, len */
    _Atomic unsigned len;            /* written under lock, read anywhere */
    struct weft_uthread *head, *tail;/* linked by weft_uthread_link()->next */
    struct weft_uthread *wtail;      /* last of the woken uthreads at the front, or NULL */
    struct weft_uthread *_Atomic next; /* runs next; exchanged, no lock */
    unsigned chain;                  /* decisions in a row taken from next;
                                        owned by this queue's vcore */
    unsigned wchain;                 /* decisions in a row taken from next or the
                                        front (woken) part; owned likewise */
} __attribute__((aligned(64)));

#define NEXT_CHAIN 16
#define WS_RAN 1u  /* sched_flags: the uthread has been picked to run before */

static struct rq *rqs;               /* one per vcore; fixed between init and fini */
static int nrq;

/* How long each thief has seen a victim's queue hold exactly one uthread;
 * owned by that thief's vcore. */
#define LONE_ROUNDS 32
static struct lone {
    int victim;
    unsigned rounds;
} __attribute__((aligned(64))) *lones;
static _Atomic unsigned rr;          /* round robin for runnables from outside */

static void push_locked(struct rq *q, struct weft_uthread *t)
{
    weft_uthread_link(t)->next = NULL;
    if (q->tail)
        weft_uthread_link(q->tail)->next = t;
    else
        q->head = t;
    q->tail = t;
    atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* push_woken_locked() queues t behind the uthreads woken before it, ahead
 * of those that were paused or are fresh. */
static void push_woken_locked(struct rq *q, struct weft_uthread *t)
{
    struct weft_uthread *after = q->wtail;
    if (!after) {
        weft_uthread_link(t)->next = q->head;
        q->head = t;
    } else {
        weft_uthread_link(t)->next = weft_uthread_link(after)->next;
        weft_uthread_link(after)->next = t;
    }
    if (q->tail == after)
        q->tail = t;
    q->wtail = t;
    atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* unlink_locked() removes t, which follows prev (NULL: t is the head). */
static void unlink_locked(struct rq *q, struct weft_uthread *prev, struct weft_uthread *t)
{
    struct weft_uthread *next = weft_uthread_link(t)->next;
    if (prev)
        weft_uthread_link(prev)->next = next;
    else
        q->head = next;
    if (q->tail == t)
        q->tail = prev;
    if (q->wtail == t)
        q->wtail = prev;
    atomic_store_explicit(&q->len, atomic_load_explicit(&q->len, memory_order_relaxed) - 1,
                          memory_order_relaxed);
}

/* pop() takes the front of q; with skip_woken, the first uthread behind the
 * woken ones (if there is one). *woken says which kind it took. */
static struct weft_uthread *pop(struct rq *q, bool skip_woken, bool *woken)
{
    if (!atomic_load_explicit(&q->len, memory_order_relaxed))
        return NULL;
    weft_spin_lock(&q->lock);
    struct weft_uthread *prev = NULL, *t = q->head;
    if (skip_woken && q->wtail && weft_uthread_link(q->wtail)->next) {
        prev = q->wtail;
        t = weft_uthread_link(prev)->next;
    }
    if (t) {
        *woken = q->wtail && !prev;
        unlink_locked(q, prev, t);
    }
    weft_spin_unlock(&q->lock);
    return t;
}

/* queued() is what v holds for a thief: its queue and its next slot. */
static unsigned queued(int v)
{
    return atomic_load_explicit(&rqs[v].len, memory_order_relaxed) +
           (atomic_load_explicit(&rqs[v].next, memory_order_relaxed) != NULL);
}

/* steal_half() moves about half of v's stealable uthreads from its front to
 * a private list; returns the first, links the rest in *rest. */
static struct weft_uthread *steal_half(struct rq *v, struct weft_uthread **rest, unsigned *nrest)
{
    struct weft_uthread *first = NULL, *tail = NULL;
    unsigned got = 0;
    weft_spin_lock(&v->lock);
    unsigned want = (atomic_load_explicit(&v->len, memory_order_relaxed) + 1) / 2;
    struct weft_uthread *prev = NULL, *t = v->head;
    while (t && got < want) {
        struct weft_uthread *next = weft_uthread_link(t)->next;
        if (weft_uthread_link(t)->flags & WEFT_PINNED) {
            prev = t;
        } else {
            unlink_locked(v, prev, t);
            weft_uthread_link(t)->next = NULL;
            if (tail)
                weft_uthread_link(tail)->next = t;
            else
                first = t;
            tail = t;
            got++;
        }
        t = next;
    }
    weft_spin_unlock(&v->lock);
    *rest = first ? weft_uthread_link(first)->next : NULL;
    *nrest = got ? got - 1 : 0;
    return first;
}

/* steal_from() takes about half of v's stealable uthreads: runs the first,
 * queues the rest on me. */
static struct weft_uthread *steal_from(struct rq *v, int me)
{
    struct weft_uthread *rest, *first = steal_half(v, &rest, &(unsigned){ 0 });
    if (!first) /* nothing stealable queued: its next (never a pinned one) */
        return atomic_exchange_explicit(&v->next, NULL, memory_order_acquire);
    if (rest) {
        struct rq *q = &rqs[me];
        weft_spin_lock(&q->lock);
        while (rest) {
            struct weft_uthread *next = weft_uthread_link(rest)->next;
            push_locked(q, rest);
            rest = next;
        }
        weft_spin_unlock(&q->lock);
    }
    return first;
}

/* steal(): two random victims, the longer queue first; if neither has
 * anything we may take, every other queue in turn, so that a vcore about to
 * park never overlooks work (with many vcores two random picks can miss the
 * one busy queue). */
/* may_steal(): v has something, and not only a lone fresh uthread. */
static bool may_steal(int me, int v)
{
    struct lone *l = &lones[me];
    unsigned len = queued(v);
    if (len != 1) {
        if (l->victim == v)
            l->victim = -1; /* emptied (or grew): start counting afresh next time */
        return len > 1;
    }
    if (weft_vcore_parking() || !weft_vcore_busy(v))
        return true; /* we are about to sleep, or its own vcore is idle or parked */
    if (l->victim != v) {
        l->victim = v;
        l->rounds = 0;
    }
    return ++l->rounds >= LONE_ROUNDS;
}

static struct weft_uthread *steal(int me)
{
    if (nrq < 2)
        return NULL;
    int a = (int)(weft_sched_rand() % (unsigned)(nrq - 1));
    int b = (int)(weft_sched_rand() % (unsigned)(nrq - 1));
    a += a >= me;
    b += b >= me;
    if (queued(b) > queued(a)) {
        int t = a;
        a = b;
        b = t;
    }
    struct weft_uthread *t = NULL;
    if (may_steal(me, a))
        t = steal_from(&rqs[a], me);
    for (int i = 1; !t && i < nrq; i++) {
        int v = (a + i) % nrq;
        if (v != me && may_steal(me, v))
            t = steal_from(&rqs[v], me);
    }
    return t;
}

/* take_next() takes q's next slot, if anything is there. With one vcore
 * there are no thieves: only that vcore's own kernel thread touches next
 * (thread_runnable_ws fills it only from a uthread running there), so plain
 * accesses do; otherwise a thief may race us for it. */
static struct weft_uthread *take_next(struct rq *q)
{
    struct weft_uthread *t = atomic_load_explicit(&q->next, memory_order_relaxed);
    if (!t)
        return NULL;
    if (nrq == 1) {
        atomic_store_explicit(&q->next, NULL, memory_order_relaxed);
        return t;
    }
    return atomic_exchange_explicit(&q->next, NULL, memory_order_acquire);
}

/* put_next() puts t in q's next slot (the caller runs on q's vcore) and
 * returns what it displaced. */
static struct weft_uthread *put_next(struct rq *q, struct weft_uthread *t)
{
    if (nrq == 1) { /* as in take_next */
        struct weft_uthread *old = atomic_load_explicit(&q->next, memory_order_relaxed);
        atomic_store_explicit(&q->next, t, memory_order_relaxed);
        return old;
    }
    return atomic_exchange_explicit(&q->next, t, memory_order_acq_rel);
}

static void sched_entry_ws(void)
{
    int me = weft_vcore_id();
    struct rq *q = &rqs[me];
    struct weft_uthread *t = NULL;
    bool woken = false;
    if (q->chain < NEXT_CHAIN && (t = take_next(q)) != NULL) {
        q->chain++;
        q->wchain++;
    } else {
        bool fair = q->wchain >= NEXT_CHAIN; /* the paused ones' turn */
        t = pop(q, fair, &woken);
        q->chain = 0;
        q->wchain = woken && !fair ? q->wchain + 1 : 0; /* woken when fair: none paused */
        if (!t)
            t = take_next(q);
    }
    if (!t)
        t = steal(me);
    if (t) {
        weft_uthread_link(t)->sched_flags |= WS_RAN; /* ours until it runs */
        weft_run_uthread(t);
    }
}

static int home_of(struct weft_uthread *t)
{
    int v = weft_uthread_link(t)->vcore;
    if (v >= 0 && v < nrq)
        return v;
    v = weft_vcore_id();
    if (v >= 0)
        return v;
    return (int)(atomic_fetch_add_explicit(&rr, 1, memory_order_relaxed) % (unsigned)nrq);
}

static void thread_runnable_ws(struct weft_uthread *t)
{
    int v = home_of(t);
    bool pinned = weft_uthread_link(t)->flags & WEFT_PINNED;
    struct rq *q = &rqs[v];
    if (!pinned && (weft_uthread_link(t)->sched_flags & WS_RAN) && v == weft_vcore_id() &&
        weft_self() != NULL) {
        /* Woken on its own vcore: run it next (a thief may take it first). */
        t = put_next(q, t);
        if (!t) {
            weft_vcore_kick(v);
            return;
        }
    }
    weft_spin_lock(&q->lock);
    push_woken_locked(q, t); /* woken or new: ahead of the paused */
    weft_spin_unlock(&q->lock); /* t may run, even finish, elsewhere from here on */
    if (pinned)
        weft_vcore_wake(v); /* nobody else may run it */
    else
        weft_vcore_kick(v);
}

static void thread_paused_ws(struct weft_uthread *t)
{
    int v = home_of(t);
    struct rq *q = &rqs[v];
    weft_spin_lock(&q->lock);
    push_locked(q, t);
    weft_spin_unlock(&q->lock);
}

/* thread_yield_ws(): t to the back, the front out, under one lock (the
 * length does not change). */
static struct weft_uthread *thread_yield_ws(struct weft_uthread *t)
{
    struct rq *q = &rqs[weft_uthread_link(t)->vcore]; /* it just ran here */
    struct weft_uthread *n = take_next(q);
    if (n) { /* someone woken here runs before the yielder gets back */
        weft_spin_lock(&q->lock);
        push_locked(q, t);
        weft_spin_unlock(&q->lock);
        return n;
    }
    weft_spin_lock(&q->lock);
    struct weft_uthread *next = q->head;
    if (next) {
        if (q->wtail == next)
            q->wtail = NULL;
        weft_uthread_link(t)->next = NULL;
        weft_uthread_link(q->tail)->next = t;
        q->head = weft_uthread_link(next)->next ? weft_uthread_link(next)->next : t;
        q->tail = t;
    }
    weft_spin_unlock(&q->lock);
    return next ? next : t;
}

static int init_ws(int nvcores)
{
    rqs = aligned_alloc(64, sizeof *rqs * (size_t)nvcores);
    lones = aligned_alloc(64, sizeof *lones * (size_t)nvcores);
    if (!rqs || !lones) {
        free(rqs);
        free(lones);
        return ENOMEM;
    }
    for (int i = 0; i < nvcores; i++) {
        rqs[i].lock = (weft_spinlock_t)WEFT_SPINLOCK_INIT;
        atomic_init(&rqs[i].len, 0);
        lones[i] = (struct lone){ .victim = -1 };
        rqs[i].head = rqs[i].tail = rqs[i].wtail = NULL;
        atomic_init(&rqs[i].next, NULL);
        rqs[i].chain = rqs[i].wchain = 0;
    }
    nrq = nvcores;
    return 0;
}

static void fini_ws(void)
{
    free(rqs);
    free(lones);
    rqs = NULL;
    lones = NULL;
    nrq = 0;
}

const struct weft_sched_ops weft__sched_ws = {
    .name = "ws",
    .init = init_ws,
    .fini = fini_ws,
    .sched_entry = sched_entry_ws,
    .thread_runnable = thread_runnable_ws,
    .thread_paused = thread_paused_ws,
    .thread_yield = thread_yield_ws,
};
