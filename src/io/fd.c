/*
 * fd.c — the file-descriptor table, readiness dispatch, waiting on a
 * descriptor, and choosing the poller. The model is in fd.h.
 *
 * The table is two-level (FD_TOP chunks of FD_CHUNK entries, chunks made on
 * demand and never freed), so a lookup is two loads and entries never move:
 * a poller event or a waiter may hold an entry pointer at any time. Entries
 * live for the process; weft_close() only bumps the generation and resets the
 * kind, and the poller stays up across weft_shutdown()/weft_init() for the
 * same reason (its registrations describe descriptors, not runtimes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "poller.h"

#define FD_CHUNK 1024
#define FD_TOP   4096 /* descriptors up to 4M */

static struct weft__fd *_Atomic fdtab[FD_TOP];
const struct weft__poller_ops *_Atomic weft__poller;
_Atomic int weft__io_nwaiting; /* I/O waiters on kernel threads that are not vcores (internal.h) */
static _Atomic uint64_t last_poll; /* when a vcore last polled, ns */

struct weft__fd *weft__fd_lookup(int fd)
{
    if (fd < 0 || fd >= FD_CHUNK * FD_TOP)
        return NULL;
    struct weft__fd *chunk = atomic_load_explicit(&fdtab[fd / FD_CHUNK], memory_order_acquire);
    return chunk ? &chunk[fd % FD_CHUNK] : NULL;
}

static struct weft__fd *fd_create(int fd)
{
    struct weft__fd *chunk = atomic_load_explicit(&fdtab[fd / FD_CHUNK], memory_order_acquire);
    if (!chunk) {
        struct weft__fd *c = calloc(FD_CHUNK, sizeof *c);
        if (!c)
            return NULL;
        for (int i = 0; i < FD_CHUNK; i++)
            c[i].fd = fd / FD_CHUNK * FD_CHUNK + i;
        if (atomic_compare_exchange_strong_explicit(&fdtab[fd / FD_CHUNK], &chunk, c, memory_order_seq_cst, memory_order_seq_cst))
            chunk = c;
        else
            free(c); /* someone else made it; chunk now holds theirs */
    }
    return &chunk[fd % FD_CHUNK];
}

/* ---- choosing the poller ---------------------------------------------------- */

/* The poller starts on the first I/O call and again on later calls for as
 * long as it cannot (no descriptors left, say): a failure is never kept. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static bool uring_refusal_said; /* guarded by start_lock */

/* start_poller(): start_lock held, no poller yet. 0 or an errno. */
static int start_poller(void)
{
    const char *want = weft__cfg_str(WEFT__CFG_POLLER); /* epoll, uring or io_uring */
    const struct weft__poller_ops *p = &weft__poll_epoll;
    if (want && strcmp(want, "epoll") != 0) {
        int e = weft__poll_uring.init();
        if (!e) {
            p = &weft__poll_uring;
            goto started;
        }
        if (!uring_refusal_said)
            fprintf(stderr, "weft: io_uring refused (%s); using epoll\n", strerror(e));
        uring_refusal_said = true;
    }
    int e = p->init();
    if (e)
        return e;
started:
    atomic_store_explicit(&weft__poller, p, memory_order_release);
    /* A vcore may hold the timer duty asleep on its futex: make it re-park
     * in the poller now that there is one. */
    weft__vcore_duty_wake(0);
    return 0;
}

int weft__io_start(void)
{
    if (WEFT__LIKELY(atomic_load_explicit(&weft__poller, memory_order_acquire) != NULL))
        return 0;
    weft__sys.pthread_mutex_lock(&start_lock);
    int e = atomic_load_explicit(&weft__poller, memory_order_relaxed) ? 0 : start_poller();
    weft__sys.pthread_mutex_unlock(&start_lock);
    return e;
}

void weft__io_forked(void)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_relaxed);
    if (p && p->forget)
        p->forget();
    atomic_store_explicit(&weft__poller, NULL, memory_order_relaxed);
    weft__sys.pthread_mutex_init(&start_lock, NULL);
    atomic_store_explicit(&weft__io_nwaiting, 0, memory_order_relaxed);
    atomic_store_explicit(&last_poll, 0, memory_order_relaxed);
    /* Every entry goes back to "not seen": the new poller has none of them
     * registered, and their waiters were the parent's. A descriptor weft
     * made non-blocking stays so (the flag belongs to the open file, shared
     * with the parent), so remember it was weft's doing. */
    for (int c = 0; c < FD_TOP; c++) {
        struct weft__fd *chunk = atomic_load_explicit(&fdtab[c], memory_order_relaxed);
        for (int i = 0; chunk && i < FD_CHUNK; i++) {
            struct weft__fd *f = &chunk[i];
            int kind = atomic_load_explicit(&f->kind, memory_order_relaxed);
            f->lock = 0;
            f->weft_nonblock = kind == WEFT__FD_POLLED && !f->user_nonblock;
            f->user_nonblock = false;
            atomic_store_explicit(&f->kind, WEFT__FD_UNKNOWN, memory_order_relaxed);
            atomic_fetch_add_explicit(&f->gen, 1, memory_order_relaxed);
            for (int d = 0; d < 2; d++) {
                f->d[d].q = (struct weft__waitq){ 0, 0, NULL, NULL };
                f->d[d].armed = false;
            }
            f->any = (struct weft__waitq){ 0, 0, NULL, NULL };
        }
    }
    weft__offload_forked();
}

const char *weft_poller_name(void)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    return p ? p->name : "none";
}

/* ---- hooks for the vcore loop ----------------------------------------------- */

bool weft__io_active(void)
{
    return atomic_load_explicit(&weft__poller, memory_order_relaxed) != NULL;
}

int weft__io_poll(uint64_t deadline)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    if (!p)
        return 0;
    int n = p->wait(deadline);
    atomic_store_explicit(&last_poll, weft__now_ns(), memory_order_relaxed);
    return n;
}

bool weft__io_stale(uint64_t now)
{
    return now - atomic_load_explicit(&last_poll, memory_order_relaxed) >= 200000 &&
           weft__io_waiting(weft__vc());
}

void weft__io_poll_if_stale(uint64_t now)
{
    if (weft__io_stale(now))
        weft__io_poll(0);
}

void weft__io_wakeup(void)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    if (p)
        p->wakeup();
}

bool weft__io_wakeup_signal_safe(void)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    if (!p || !p->wakeup_signal_safe)
        return false;
    p->wakeup();
    return true;
}

/* ---- classification ---------------------------------------------------------- */

/* classify() decides how weft treats f on first use; f->lock held. */
static int classify(struct weft__fd *f, const struct weft__poller_ops *p)
{
    int fl = fcntl(f->fd, F_GETFL);
    if (fl < 0)
        return errno;
    f->user_nonblock = (fl & O_NONBLOCK) != 0 && !f->weft_nonblock;
    f->weft_nonblock = false;
    int kind = WEFT__FD_DIRECT;
    struct stat st;
    if (f->fd <= 2) {
        kind = WEFT__FD_DIRECT; /* shared with other processes: never switched */
    } else if (fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode)) {
        kind = WEFT__FD_FILE;
    } else {
        if (!f->user_nonblock && fcntl(f->fd, F_SETFL, fl | O_NONBLOCK) < 0)
            return errno;
        int e = p->add(f);
        if (e == 0) {
            kind = WEFT__FD_POLLED;
        } else {
            if (!f->user_nonblock)
                fcntl(f->fd, F_SETFL, fl); /* put it back: we will not poll it */
            if (e != EPERM)
                return e;
        }
    }
    for (int d = 0; d < 2; d++) {
        f->d[d].armed = false;
    }
    atomic_store_explicit(&f->kind, kind, memory_order_release);
    return 0;
}

int weft__fd_get(int fd, struct weft__fd **out, uint32_t *gen)
{
    if (fd < 0 || fd >= FD_CHUNK * FD_TOP) {
        if (fd < 0)
            return EBADF;
        *out = NULL; /* beyond the table: plain calls */
        return 0;
    }
    int e = weft__io_start();
    if (e)
        return e;
    struct weft__fd *f = weft__fd_lookup(fd);
    if (!f && !(f = fd_create(fd)))
        return ENOMEM;
    *out = f;
    if (WEFT__LIKELY(atomic_load_explicit(&f->kind, memory_order_acquire) != WEFT__FD_UNKNOWN)) {
        *gen = atomic_load_explicit(&f->gen, memory_order_relaxed);
        return 0;
    }
    weft__spin_lock(&f->lock);
    e = 0;
    if (atomic_load_explicit(&f->kind, memory_order_relaxed) == WEFT__FD_UNKNOWN)
        e = classify(f, atomic_load_explicit(&weft__poller, memory_order_acquire));
    *gen = atomic_load_explicit(&f->gen, memory_order_relaxed);
    weft__spin_unlock(&f->lock);
    return e;
}

/* ---- events --------------------------------------------------------------------- */

static void append(struct weft__waiter **list, struct weft__waiter *w)
{
    /* Lists are short (one per direction plus poll_fd waiters): prepend. */
    struct weft__waiter *last = w;
    while (last->next)
        last = last->next;
    last->next = *list;
    *list = w;
}

/* ---- several descriptors at once ----------------------------------------------
 *
 * A uthread that waits on several descriptors (weft_poll, and so the
 * shim's poll and select; weft_epoll_wait) queues one member waiter on each
 * descriptor's poll queue (`any`) and sleeps on one waiter of its own, `main`, in a group. A
 * member's data points at its group. The first event on any member fires
 * the group: under the group's lock it sets `fired` and unlinks `main` if
 * the uthread already sleeps; the waker wakes `main` like any waiter. Every
 * touch of a member or of the group happens under the member's descriptor
 * lock (lock order: descriptor, then group), so once the woken uthread has
 * taken each of its descriptors' locks to unlink the members still queued,
 * nobody else holds a pointer to anything on its stack. */
struct group {
    uint32_t lock;               /* spinlock: fired, q */
    bool fired;                  /* a member saw an event; guarded by lock */
    struct weft__waitq q;        /* holds main while the uthread sleeps; guarded by lock */
    struct weft__waiter main;    /* the uthread's own waiter */
};

/* fire(): a member of g saw an event (its descriptor's lock held). */
static void fire(struct group *g, struct weft__waiter **list)
{
    weft__spin_lock(&g->lock);
    g->fired = true;
    struct weft__waiter *main = weft__waitq_pop(&g->q);
    weft__spin_unlock(&g->lock);
    if (main)
        append(list, main);
}

/* take_any() unlinks f's poll waiters with status st (f->lock held) and
 * appends those to wake to *list; a group member fires its group instead. */
static void take_any(struct weft__fd *f, int st, struct weft__waiter **list)
{
    struct weft__waiter *w = weft__waitq_take_all(&f->any);
    while (w) {
        struct weft__waiter *next = w->next;
        w->next = NULL;
        w->status = st;
        if (w->data)
            fire((struct group *)w->data, list);
        else
            append(list, w);
        w = next;
    }
}

/* unlink_members() takes the members nobody took off their queues; after
 * each descriptor's lock, no waker holds a pointer to one. A function of
 * its own: it runs after a switch, maybe on another kernel thread, and the
 * spinlocks count themselves in TLS (invariant 2: no TLS address computed
 * before the switch may be reused). */
static WEFT__NOINLINE void unlink_members(struct weft__fd_watch *ws, int queued)
{
    for (int i = 0; i < queued; i++) {
        struct weft__fd *f = ws[i].f;
        weft__spin_lock(&f->lock);
        if (ws[i].w.status == WEFT__WAITING)
            weft__waitq_remove(&f->any, &ws[i].w);
        weft__spin_unlock(&f->lock);
    }
}

static int wait_many(struct weft__fd_watch *ws, int n, uint64_t deadline, struct group *g);

int weft__fd_wait_many(struct weft__fd_watch *ws, int n, uint64_t deadline)
{
    /* The group is on our stack, or, for a stack-copy uthread (whose stack
     * is somebody else's while it waits), in the heap. */
    struct group local = { 0 }, *gp = &local;
    if (weft_self()->copy && !(gp = calloc(1, sizeof *gp)))
        return ENOMEM;
    int st = wait_many(ws, n, deadline, gp);
    if (gp != &local)
        free(gp);
    return st;
}

static int wait_many(struct weft__fd_watch *ws, int n, uint64_t deadline, struct group *gp)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    struct group *const g = gp;
    weft__waiter_init(&g->main);
    int queued = 0;
    bool moved = false;
    for (; queued < n; queued++) {
        struct weft__fd_watch *x = &ws[queued];
        struct weft__fd *f = x->f;
        weft__waiter_init(&x->w);
        x->w.data = (uintptr_t)g;
        weft__spin_lock(&f->lock);
        if (atomic_load_explicit(&f->gen, memory_order_relaxed) != x->gen ||
            ((x->dirs & 1) && atomic_load_explicit(&f->d[WEFT__RD].seq, memory_order_relaxed) != x->seq_rd) ||
            ((x->dirs & 2) && atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_relaxed) != x->seq_wr)) {
            weft__spin_unlock(&f->lock);
            moved = true; /* closed, or readiness came between the try and now */
            break;
        }
        if (x->dirs & 1)
            p->arm(f, WEFT__RD);
        if (x->dirs & 2)
            p->arm(f, WEFT__WR);
        weft__waitq_push(&f->any, &x->w);
        weft__spin_unlock(&f->lock);
    }
    int st = 0;
    if (!moved) {
        struct weft__vcore *wv = weft__io_wait_begin();
        weft__spin_lock(&g->lock);
        if (g->fired) {
            weft__spin_unlock(&g->lock);
        } else {
            weft__waitq_push(&g->q, &g->main);
            st = weft__wait(&g->lock, &g->q, &g->main, deadline, WEFT_BLOCK_IO);
        }
        weft__io_wait_end(wv);
    }
    unlink_members(ws, queued);
    return st == ETIMEDOUT || st == ENOMEM ? st : 0;
}

void weft__fd_event(int fd, uint32_t gen, unsigned ev, struct weft__waiter **list)
{
    struct weft__fd *f = weft__fd_lookup(fd);
    if (!f)
        return;
    weft__spin_lock(&f->lock);
    if (atomic_load_explicit(&f->gen, memory_order_relaxed) != gen) {
        weft__spin_unlock(&f->lock);
        return; /* closed since: a late event for a dead descriptor */
    }
    for (int d = 0; d < 2; d++) {
        if (!(ev & (d == WEFT__RD ? WEFT__READY_RD : WEFT__READY_WR) || ev & WEFT__READY_ERR))
            continue;
        if ((ev & WEFT__READY_ONESHOT) && (ev & (d == WEFT__RD ? WEFT__READY_RD : WEFT__READY_WR)))
            f->d[d].armed = false;
        atomic_fetch_add_explicit(&f->d[d].seq, 1, memory_order_release);
        struct weft__waiter *w = weft__waitq_pop(&f->d[d].q);
        if (w)
            append(list, w);
        if (ev & WEFT__READY_ERR) { /* an error wakes everyone: they will all see it */
            struct weft__waiter *all = weft__waitq_take_all(&f->d[d].q);
            if (all)
                append(list, all);
        }
    }
    take_any(f, 0, list);
    weft__spin_unlock(&f->lock);
}

/* ---- waiting ----------------------------------------------------------------------- */

int weft__fd_wait(struct weft__fd *f, uint32_t gen, int dirs, uint32_t seq_rd, uint32_t seq_wr,
                  uint64_t deadline)
{
    const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    struct weft__waiter local, *w = weft__waiter_mine(&local);
    weft__spin_lock(&f->lock);
    if (atomic_load_explicit(&f->gen, memory_order_relaxed) != gen) {
        weft__spin_unlock(&f->lock);
        return EBADF;
    }
    if (((dirs & 1) && atomic_load_explicit(&f->d[WEFT__RD].seq, memory_order_relaxed) != seq_rd) ||
        ((dirs & 2) && atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_relaxed) != seq_wr)) {
        weft__spin_unlock(&f->lock);
        return 0; /* readiness came between the try and now */
    }
    struct weft__waitq *q;
    if (dirs & WEFT__WAIT_POLL) {
        /* poll_fd waiters never take a direction's single wake-up (they do
         * not pass it on): every event wakes them all. */
        if (dirs & 1)
            p->arm(f, WEFT__RD);
        if (dirs & 2)
            p->arm(f, WEFT__WR);
        q = &f->any;
    } else {
        int d = dirs == 1 ? WEFT__RD : WEFT__WR;
        p->arm(f, d);
        q = &f->d[d].q;
    }
    weft__waitq_push(q, w);
    struct weft__vcore *wv = weft__io_wait_begin();
    int st = weft__wait(&f->lock, q, w, deadline, WEFT_BLOCK_IO);
    weft__io_wait_end(wv);
    return st;
}

void weft__fd_pass(struct weft__fd *f, int dir)
{
    /* Nobody waiting (the common case): no lock. A waiter queueing right now
     * is as if it queued just after this pass, which the lock allows too: it
     * checked the readiness count under the lock and will see the next event. */
    if (atomic_load_explicit(WEFT__AT(&f->d[dir].q.n), memory_order_relaxed) == 0)
        return;
    weft__spin_lock(&f->lock);
    struct weft__waiter *w = weft__waitq_pop(&f->d[dir].q);
    weft__spin_unlock(&f->lock);
    if (w)
        weft__waiter_wake(w);
}

/* ---- closing ----------------------------------------------------------------------- */

void weft__fd_drop(int fd)
{
    struct weft__fd *f = weft__fd_lookup(fd);
    if (!f)
        return;
    /* Even an UNKNOWN entry: a first use may be classifying it right now
     * (under the lock); the generation bump makes that use fail. */
    struct weft__waiter *list = NULL;
    weft__spin_lock(&f->lock);
    if (atomic_load_explicit(&f->kind, memory_order_relaxed) == WEFT__FD_POLLED)
        atomic_load_explicit(&weft__poller, memory_order_acquire)->del(f);
    atomic_fetch_add_explicit(&f->gen, 1, memory_order_relaxed);
    atomic_store_explicit(&f->kind, WEFT__FD_UNKNOWN, memory_order_relaxed);
    f->user_nonblock = false;
    f->weft_nonblock = false;
    take_any(f, EBADF, &list);
    struct weft__waitq *qs[2] = { &f->d[0].q, &f->d[1].q };
    for (int i = 0; i < 2; i++) {
        struct weft__waiter *all = weft__waitq_take_all(qs[i]);
        for (struct weft__waiter *w = all; w; w = w->next)
            w->status = EBADF;
        if (all)
            append(&list, all);
    }
    f->d[0].armed = f->d[1].armed = false;
    weft__spin_unlock(&f->lock);
    weft__waiter_wake_list(list);
}

int weft__fd_managed(int fd)
{
    struct weft__fd *f = weft__fd_lookup(fd);
    return f && atomic_load_explicit(&f->kind, memory_order_acquire) == WEFT__FD_POLLED &&
           !f->user_nonblock;
}

void weft_fd_forget(int fd)
{
    weft__fd_drop(fd);
}
