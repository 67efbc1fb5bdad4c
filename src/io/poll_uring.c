/*
 * poll_uring.c — the io_uring poller (WEFT_POLLER=uring), via liburing.
 *
 * Readiness: a one-shot IORING_OP_POLL_ADD per descriptor direction, armed
 * when a waiter queues and none is in flight (poller.h). Its completion is
 * an edge for that direction. Closing removes in-flight polls; their late
 * completions carry the old generation and are dropped.
 * Regular files: weft_read/weft_write/weft_pread/weft_pwrite on a regular
 * file from a uthread submit IORING_OP_READ/WRITE and park until the
 * completion (file_rw), so disk reads do not hold the vcore.
 * Wake-up: a NOP submitted by any thread completes and ends a blocked wait.
 *
 * Locks: sq_lock serialises submissions (any vcore); cq_lock is held by the
 * one consumer of completions, for its whole wait when it blocks (the duty
 * vcore), so quick polls by other vcores find it taken and go on.
 * A wait with a timeout needs IORING_FEAT_EXT_ARG (Linux 5.11) so that it
 * never touches the submission queue; without it init fails and weft uses
 * epoll.
 *
 * user_data: WAKE_TAG and IGNORE_TAG are small constants; an odd value is a
 * poll (gen << 32 | fd << 2 | dir << 1 | 1); anything else points to a
 * struct ring_req (on the parked uthread's stack, or in the heap for a
 * stack-copy uthread).
 */
#define _GNU_SOURCE
#include <errno.h>

#include "poller.h"

#ifdef WEFT_HAVE_URING
#include <liburing.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define WAKE_TAG   2u
#define IGNORE_TAG 4u
#define RING_SIZE  1024

static struct io_uring ring;
static uint32_t sq_lock, cq_lock;
static _Atomic bool wake_pending; /* a wake-up NOP was sent and no blocking wait has seen it */

struct ring_req {
    struct weft__waiter w;
    uint32_t lock;               /* held by the submitter until it is parked */
    int res;                     /* the completion's result; written before the wake */
};

static int init_uring(void)
{
    struct io_uring_params p = { 0 };
    int r = io_uring_queue_init_params(RING_SIZE, &ring, &p);
    if (r < 0)
        return -r;
    if (!(p.features & IORING_FEAT_EXT_ARG)) {
        io_uring_queue_exit(&ring);
        return ENOSYS; /* timed waits would need the submission queue */
    }
    return 0;
}

/* get_sqe() returns a free entry; sq_lock held. */
static struct io_uring_sqe *get_sqe(void)
{
    struct io_uring_sqe *sqe;
    while (!(sqe = io_uring_get_sqe(&ring)))
        io_uring_submit(&ring); /* full: push what is there */
    return sqe;
}

static void submit_locked(void)
{
    int r;
    while ((r = io_uring_submit(&ring)) == -EINTR || r == -EAGAIN || r == -EBUSY)
        ;
}

static uint64_t poll_tag(struct weft__fd *f, int dir)
{
    return (uint64_t)atomic_load_explicit(&f->gen, memory_order_relaxed) << 32 |
           (uint64_t)(uint32_t)f->fd << 2 | (uint64_t)dir << 1 | 1u;
}

static int add_uring(struct weft__fd *f)
{
    (void)f;
    return 0; /* polls are armed per wait */
}

static void arm_uring(struct weft__fd *f, int dir)
{
    if (f->d[dir].armed)
        return;
    weft__spin_lock(&sq_lock);
    struct io_uring_sqe *sqe = get_sqe();
    io_uring_prep_poll_add(sqe, f->fd, dir == WEFT__RD ? POLLIN | POLLRDHUP : POLLOUT);
    io_uring_sqe_set_data64(sqe, poll_tag(f, dir));
    submit_locked();
    weft__spin_unlock(&sq_lock);
    f->d[dir].armed = true;
}

static void del_uring(struct weft__fd *f)
{
    weft__spin_lock(&sq_lock);
    for (int d = 0; d < 2; d++) {
        if (!f->d[d].armed)
            continue;
        struct io_uring_sqe *sqe = get_sqe();
        io_uring_prep_poll_remove(sqe, poll_tag(f, d));
        io_uring_sqe_set_data64(sqe, IGNORE_TAG);
    }
    submit_locked();
    weft__spin_unlock(&sq_lock);
}

static int wait_uring(uint64_t deadline)
{
    if (deadline == 0) {
        if (!weft__spin_trylock(&cq_lock))
            return 0; /* the duty vcore is in there */
    } else {
        /* Blocking, we keep cq_lock: a quick poll by another vcore must not
         * reap the NOP that is meant to wake us (the kernel would then not
         * end our wait: it counts what is in the ring, not what was posted).
         * A NOP sent before we took the lock may have been reaped already:
         * wake_pending tells, and then we do not block. */
        weft__spin_lock(&cq_lock);
        if (atomic_exchange_explicit(&wake_pending, false, memory_order_seq_cst))
            goto reap;
        struct io_uring_cqe *cqe;
        struct __kernel_timespec ts, *tp = NULL;
        if (deadline != UINT64_MAX) {
            uint64_t now = weft__now_ns();
            uint64_t d = deadline > now ? deadline - now : 0;
            ts.tv_sec = (long long)(d / 1000000000u);
            ts.tv_nsec = (long long)(d % 1000000000u);
            tp = &ts;
        }
        weft__san_blocking_begin();
        io_uring_wait_cqe_timeout(&ring, &cqe, tp); /* -ETIME, -EINTR: look anyway */
        weft__san_blocking_end();
    }
reap:;
    struct weft__waiter *list = NULL;
    struct io_uring_cqe *cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
        seen++;
        uint64_t tag = io_uring_cqe_get_data64(cqe);
        if (tag == WAKE_TAG || tag == IGNORE_TAG)
            continue;
        if (tag & 1) {
            int dir = (int)(tag >> 1 & 1);
            unsigned ev = (dir == WEFT__RD ? WEFT__READY_RD : WEFT__READY_WR) | WEFT__READY_ONESHOT;
            if (cqe->res > 0 && (cqe->res & (POLLERR | POLLHUP)))
                ev |= WEFT__READY_ERR;
            weft__fd_event((int)(uint32_t)(tag >> 2 & 0x3fffffffu), (uint32_t)(tag >> 32), ev, &list);
            continue;
        }
        struct ring_req *rq = (struct ring_req *)(uintptr_t)tag;
        weft__san_acquire(rq); /* partner: file_rw_uring, through the ring */
        weft__spin_lock(&rq->lock); /* the submitter is parked once we hold it */
        rq->res = cqe->res;
        rq->w.status = 0;
        weft__spin_unlock(&rq->lock);
        rq->w.next = list;
        list = &rq->w;
    }
    io_uring_cq_advance(&ring, seen);
    weft__spin_unlock(&cq_lock);
    int woken = 0;
    for (struct weft__waiter *w = list; w; w = w->next)
        woken++;
    weft__waiter_wake_list(list);
    return woken;
}

static void forget_uring(void)
{
    /* Unmaps our copy of the rings and closes our descriptor; the parent's
     * ring (the same kernel object) is untouched. No ring fd is registered,
     * so nothing else is undone. */
    io_uring_queue_exit(&ring);
    sq_lock = cq_lock = 0;
    atomic_store_explicit(&wake_pending, false, memory_order_relaxed);
}

static void wakeup_uring(void)
{
    atomic_store_explicit(&wake_pending, true, memory_order_seq_cst);
    weft__spin_lock(&sq_lock);
    struct io_uring_sqe *sqe = get_sqe();
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, WAKE_TAG);
    submit_locked();
    weft__spin_unlock(&sq_lock);
}

/* ring_rw() submits one read or write through the ring and waits for it;
 * rq stays where the completion finds it until then. */
static ssize_t ring_rw(struct ring_req *rq, bool write, int fd, void *buf, size_t n, off_t off)
{
    weft__waiter_init(&rq->w);
    weft__spin_lock(&rq->lock);
    weft__spin_lock(&sq_lock);
    struct io_uring_sqe *sqe = get_sqe();
    if (write)
        io_uring_prep_write(sqe, fd, buf, (unsigned)n, (uint64_t)off);
    else
        io_uring_prep_read(sqe, fd, buf, (unsigned)n, (uint64_t)off);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)rq);
    weft__san_release(rq);
    submit_locked();
    weft__spin_unlock(&sq_lock);
    struct weft__vcore *wv = weft__io_wait_begin();
    weft__wait(&rq->lock, NULL, &rq->w, WEFT_FOREVER, WEFT_BLOCK_IO); /* the kernel writes buf */
    weft__io_wait_end(wv);
    return rq->res;
}

/* ring_rw_copy() is ring_rw() for a stack-copy uthread, whose stack is
 * somebody else's while the kernel works: the request, and a buffer on its
 * stack, go through the heap. */
static WEFT__NOINLINE ssize_t ring_rw_copy(bool write, int fd, void *buf, size_t n, off_t off)
{
    struct ring_req *rq = calloc(1, sizeof *rq);
    if (!rq)
        return -ENOMEM;
    void *bounce = NULL;
    if (n && weft__sc_on_run_stack(buf, n)) {
        if (!(bounce = malloc(n))) {
            free(rq);
            return -ENOMEM;
        }
        if (write)
            memcpy(bounce, buf, n);
    }
    ssize_t r = ring_rw(rq, write, fd, bounce ? bounce : buf, n, off);
    if (bounce && !write && r > 0)
        memcpy(buf, bounce, (size_t)r);
    free(bounce);
    free(rq);
    return r;
}

static ssize_t file_rw_uring(bool write, int fd, void *buf, size_t n, off_t off)
{
    if (n > 0x7ffff000u)
        n = 0x7ffff000u; /* what read(2) and write(2) transfer at most */
    if (weft_self()->copy)
        return ring_rw_copy(write, fd, buf, n, off);
    struct ring_req rq = { .res = 0 };
    return ring_rw(&rq, write, fd, buf, n, off);
}

const struct weft__poller_ops weft__poll_uring = {
    .name = "io_uring",
    .init = init_uring,
    .add = add_uring,
    .arm = arm_uring,
    .del = del_uring,
    .wait = wait_uring,
    .forget = forget_uring,
    .wakeup = wakeup_uring,
    .file_rw = file_rw_uring,
};

#else /* !WEFT_HAVE_URING */

static int init_none(void)
{
    return ENOSYS; /* "io_uring refused (Function not implemented)": not built in */
}

const struct weft__poller_ops weft__poll_uring = { .name = "io_uring", .init = init_none };

#endif
