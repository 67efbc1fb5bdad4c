/*
 * poll.c — waiting on several descriptors at once: weft_poll() (poll(2)
 * and, through the shim, ppoll, select and pselect) and weft_epoll_wait()
 * (an application's own epoll instance: epoll_wait, epoll_pwait).
 *
 * Both follow the seq protocol of fd.h over several descriptors: read
 * each watched descriptor's readiness counts, ask the kernel once without
 * blocking (ppoll or epoll_pwait with a zero timeout), and if nothing is
 * ready park on all of them at once (weft__fd_wait_many) until one moves.
 * An application's epoll descriptor is itself pollable: weft registers it
 * with its own poller like a socket and waits for it to become readable.
 *
 * What weft cannot watch (descriptors 0-2, which it never registers, a
 * device its poller refuses, a number beyond its table) makes the whole
 * wait run on an offload helper (weft_offload): the uthread still parks, a
 * helper kernel thread blocks for it. Regular files are always ready for
 * reading and writing, so they need no watching. A kernel thread that is
 * not a uthread makes the plain system call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "poller.h"

/* Watches kept on the caller's stack (an ordinary uthread's); more are
 * allocated. */
#define STACK_WATCHES 8

static struct timespec ts_of(uint64_t ns)
{
    return (struct timespec){ (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
}

/* sys_ppoll(): ppoll(2) without the libc name (the shim interposes it);
 * -errno on failure. deadline WEFT_FOREVER = no timeout, 0 = just look. */
static WEFT__NOINLINE long sys_ppoll(struct pollfd *fds, nfds_t n, uint64_t deadline)
{
    struct timespec ts, *tp = NULL;
    if (deadline != WEFT_FOREVER) {
        uint64_t now = deadline ? weft__now_ns() : 0;
        ts = ts_of(deadline > now ? deadline - now : 0);
        tp = &ts;
    }
    weft__san_blocking_begin();
    long r = syscall(SYS_ppoll, fds, n, tp, NULL, (size_t)(_NSIG / 8));
    r = r < 0 ? -errno : r;
    weft__san_blocking_end();
    return r;
}

/* sys_epoll(): epoll_pwait(2) with a ms timeout (-1 none); -errno on failure. */
static WEFT__NOINLINE long sys_epoll(int epfd, struct epoll_event *ev, int max, int ms)
{
    weft__san_blocking_begin();
    long r = syscall(SYS_epoll_pwait, epfd, ev, max, ms, NULL, (size_t)(_NSIG / 8));
    r = r < 0 ? -errno : r;
    weft__san_blocking_end();
    return r;
}

/* ms_until(): a millisecond timeout for deadline, rounded up (never early). */
static int ms_until(uint64_t deadline)
{
    if (deadline == WEFT_FOREVER)
        return -1;
    uint64_t now = weft__now_ns();
    uint64_t ms = deadline > now ? (deadline - now + 999999u) / 1000000u : 0;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* ---- the offload fallback ---------------------------------------------------------- */

struct blocking_wait {
    struct pollfd *fds;          /* ppoll, or NULL for epoll */
    nfds_t n;
    int epfd, max;               /* epoll */
    struct epoll_event *ev;
    uint64_t deadline;
    long result;                 /* count, or -errno */
};

static void *blocking_wait_run(void *arg)
{
    struct blocking_wait *b = arg;
    do {
        b->result = b->fds ? sys_ppoll(b->fds, b->n, b->deadline)
                           : sys_epoll(b->epfd, b->ev, b->max, ms_until(b->deadline));
    } while (b->result == -EINTR);
    return NULL;
}

/* offloaded_copy() is offloaded() for a stack-copy uthread, whose stack is
 * somebody else's while the helper works: the wait and its arrays (the
 * caller's may be on that stack) go through the heap. */
static WEFT__NOINLINE long offloaded_copy(struct blocking_wait *b)
{
    size_t len = b->fds ? b->n * sizeof *b->fds : (size_t)(b->max > 0 ? b->max : 0) * sizeof *b->ev;
    struct blocking_wait *h = malloc(sizeof *h);
    void *arr = len ? malloc(len) : NULL;
    if (!h || (len && !arr)) {
        free(h);
        free(arr);
        return -ENOMEM;
    }
    *h = *b;
    if (b->fds) {
        memcpy(arr, b->fds, len);
        h->fds = arr;
    } else {
        h->ev = arr;
    }
    int e = weft_offload(blocking_wait_run, h, NULL);
    long r = e ? -e : h->result;
    if (!e && b->fds)
        memcpy(b->fds, arr, len);
    else if (!e && r > 0)
        memcpy(b->ev, arr, (size_t)r * sizeof *b->ev);
    free(arr);
    free(h);
    return r;
}

/* offloaded(): the wait on a helper thread; the count or -errno. */
static long offloaded(struct blocking_wait *b)
{
    if (weft_self()->copy)
        return offloaded_copy(b);
    int e = weft_offload(blocking_wait_run, b, NULL);
    return e ? -e : b->result;
}

/* finish(): a count or -errno as the POSIX result. */
static int finish(long r)
{
    if (r >= 0)
        return (int)r;
    weft__set_errno((int)-r);
    return -1;
}

/* ---- poll ----------------------------------------------------------------------- */

static int dirs_of(short events)
{
    int dirs = 0;
    if (events & (POLLIN | POLLPRI | POLLRDHUP | POLLRDNORM | POLLRDBAND))
        dirs |= 1;
    if (events & (POLLOUT | POLLWRNORM | POLLWRBAND))
        dirs |= 2;
    return dirs ? dirs : 3; /* only errors and hang-ups asked for: any event */
}

/* poll_uthread(): weft_poll() in a uthread; a count or -errno. */
static long poll_uthread(struct pollfd *fds, nfds_t n, int64_t timeout_ns, uint64_t deadline,
                         bool io_bound)
{
    /* The watches hold the waiters queued on each descriptor: on our stack
     * unless there are many, or it is a stack-copy uthread's (somebody
     * else's while we wait). */
    struct weft__fd_watch stack_ws[STACK_WATCHES], *ws = stack_ws;
    if ((n > STACK_WATCHES || weft_self()->copy) && !(ws = malloc((n ? n : 1) * sizeof *ws)))
        return -ENOMEM;
    long r;
    for (;;) {
        /* Which descriptors to watch; classified (and registered) on first
         * use. Done on every round: one may have been closed meanwhile. */
        int nw = 0;
        bool unwatchable = false;
        for (nfds_t i = 0; i < n; i++) {
            if (fds[i].fd < 0)
                continue; /* poll(2) ignores it */
            struct weft__fd *f;
            uint32_t gen;
            int e = weft__fd_get(fds[i].fd, &f, &gen);
            if (e == EBADF)
                continue; /* the kernel reports POLLNVAL */
            int kind = e || !f ? WEFT__FD_DIRECT : atomic_load_explicit(&f->kind, memory_order_relaxed);
            if (kind == WEFT__FD_FILE)
                continue; /* always ready, or never: nothing to wait for */
            if (kind != WEFT__FD_POLLED) {
                unwatchable = true;
                continue;
            }
            struct weft__fd_watch *x = &ws[nw++];
            x->f = f;
            x->gen = gen;
            x->dirs = dirs_of(fds[i].events);
            x->seq_rd = atomic_load_explicit(&f->d[WEFT__RD].seq, memory_order_acquire);
            x->seq_wr = atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_acquire);
        }
        r = sys_ppoll(fds, n, 0);
        if (r != 0 && r != -EINTR)
            break;
        if (timeout_ns == 0)
            break;
        if (deadline != WEFT_FOREVER && weft__now_ns() >= deadline) {
            r = io_bound ? -ETIMEDOUT : 0;
            break;
        }
        if (unwatchable) {
            struct blocking_wait b = { .fds = fds, .n = n, .deadline = deadline };
            r = offloaded(&b);
            if (r == 0 && io_bound)
                r = -ETIMEDOUT;
            break;
        }
        int e;
        if (nw == 0) { /* nothing that can change: only the timeout */
            e = weft_sleep_until_ns(deadline == WEFT_FOREVER ? UINT64_MAX >> 1 : deadline);
            e = e ? e : ETIMEDOUT;
        } else {
            e = weft__fd_wait_many(ws, nw, deadline);
        }
        if (e == ETIMEDOUT && deadline != WEFT_FOREVER) {
            r = sys_ppoll(fds, n, 0); /* the last look poll(2) makes too */
            if (r == 0 && io_bound)
                r = -ETIMEDOUT;
            break;
        }
        if (e && e != ETIMEDOUT) {
            r = -e; /* ENOMEM: no timer for the deadline */
            break;
        }
    }
    if (ws != stack_ws)
        free(ws);
    return r;
}

int weft_poll(struct pollfd *fds, nfds_t n, int64_t timeout_ns)
{
    uint64_t now = weft__now_ns();
    uint64_t deadline = timeout_ns < 0 ? WEFT_FOREVER : now + (uint64_t)timeout_ns;
    uint64_t io_deadline = weft_io_deadline();
    bool io_bound = io_deadline < deadline;
    if (io_bound)
        deadline = io_deadline;
    if (n > (nfds_t)INT32_MAX)
        return finish(-EINVAL);
    if (!weft_self()) {
        long r;
        while ((r = sys_ppoll(fds, n, deadline)) == -EINTR)
            ;
        return finish(r == 0 && io_bound && timeout_ns != 0 ? -ETIMEDOUT : r);
    }
    return finish(poll_uthread(fds, n, timeout_ns, deadline, io_bound));
}

/* ---- epoll ---------------------------------------------------------------------- */

int weft_epoll_wait(int epfd, struct epoll_event *ev, int max, int64_t timeout_ns)
{
    uint64_t now = weft__now_ns();
    uint64_t deadline = timeout_ns < 0 ? WEFT_FOREVER : now + (uint64_t)timeout_ns;
    uint64_t io_deadline = weft_io_deadline();
    bool io_bound = io_deadline < deadline;
    if (io_bound)
        deadline = io_deadline;
    long r;
    if (!weft_self()) {
        while ((r = sys_epoll(epfd, ev, max, ms_until(deadline))) == -EINTR)
            ;
        return finish(r == 0 && io_bound && timeout_ns != 0 ? -ETIMEDOUT : r);
    }
    for (;;) {
        struct weft__fd *f = NULL;
        uint32_t gen = 0;
        int e = weft__fd_get(epfd, &f, &gen);
        bool watchable = !e && f && atomic_load_explicit(&f->kind, memory_order_relaxed) == WEFT__FD_POLLED;
        uint32_t seq = watchable ? atomic_load_explicit(&f->d[WEFT__RD].seq, memory_order_acquire) : 0;
        r = sys_epoll(epfd, ev, max, 0); /* also says EBADF, EINVAL, EFAULT */
        if (r != 0 && r != -EINTR)
            break;
        if (timeout_ns == 0)
            break;
        if (deadline != WEFT_FOREVER && weft__now_ns() >= deadline) {
            r = io_bound ? -ETIMEDOUT : 0;
            break;
        }
        if (!watchable) { /* e.g. nested too deep for weft's own epoll */
            struct blocking_wait b = { .epfd = epfd, .ev = ev, .max = max, .deadline = deadline };
            r = offloaded(&b);
            if (r == 0 && io_bound)
                r = -ETIMEDOUT;
            break;
        }
        e = weft__fd_wait(f, gen, 1 | WEFT__WAIT_POLL, seq, 0, deadline);
        if (e == ETIMEDOUT) {
            r = sys_epoll(epfd, ev, max, 0);
            if (r == 0 && io_bound)
                r = -ETIMEDOUT;
            break;
        }
        if (e == ENOMEM) {
            r = -ENOMEM; /* no timer for the deadline */
            break;
        }
        /* 0: readiness moved; EBADF: closed (the next look says so) */
    }
    return finish(r);
}
