/*
 * fd.h — the descriptor table (fd.c): what weft knows of each file
 * descriptor, and the waits on descriptors that io.c and poll.c build on.
 * The backends that report readiness are behind poller.h.
 *
 * Readiness model. Every descriptor weft polls has two directions (read,
 * write), each with a wait queue and a readiness sequence number `seq`. A
 * uthread that wants to read snapshots seq, tries the non-blocking call and,
 * on EAGAIN, takes the descriptor's lock: if seq moved meanwhile, readiness
 * arrived between its try and now, so it tries again; otherwise it queues
 * itself and parks (weft__wait releases the lock only after the uthread is
 * saved). The poller reports an edge for a direction by bumping seq and
 * waking ONE waiter under the same lock; a woken waiter that then succeeds
 * passes the baton to the next waiter, one that gets EAGAIN queues again.
 * So readiness wakes exactly the waiters that can proceed, plus at most one
 * that finds nothing, and never loses one. weft_poll_fd() waiters sit on a
 * third queue that every event wakes.
 */
#ifndef WEFT_IO_FD_H
#define WEFT_IO_FD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../internal.h"
#include "managed.h"

enum { WEFT__RD = 0, WEFT__WR = 1 };

/* Readiness bits passed to weft__fd_event() (not the event types of
 * <weft/event.h>, WEFT_EV_*, which are messages to a vcore). */
#define WEFT__READY_RD  0x1u
#define WEFT__READY_WR  0x2u
#define WEFT__READY_ERR 0x4u /* error or hang-up: both directions */
#define WEFT__READY_ONESHOT 0x8u /* io_uring: the poll for these directions is spent */

enum weft__fd_kind {
    WEFT__FD_UNKNOWN = 0, /* not seen yet, or closed through weft */
    WEFT__FD_POLLED,      /* non-blocking, registered with the poller */
    WEFT__FD_DIRECT,      /* not pollable (0-2, a device epoll refuses): plain calls */
    WEFT__FD_FILE,        /* regular file: plain calls, or the ring's read/write */
};

struct weft__fd_dir {
    struct weft__waitq q;        /* waiters; guarded by the fd's lock (q.lock unused) */
    _Atomic uint32_t seq;        /* readiness edges seen; bumped under the fd's lock */
    bool armed;                  /* io_uring: a poll is in flight; guarded by the fd's lock */
};

struct weft__fd {
    uint32_t lock;               /* spinlock: everything below */
    int fd;                      /* fixed */
    _Atomic uint32_t gen;        /* bumped by close/forget; written under lock */
    _Atomic int kind;            /* enum weft__fd_kind; written under lock */
    bool user_nonblock;          /* O_NONBLOCK before weft saw it: no blocking emulation */
    bool weft_nonblock;          /* fork child: weft set O_NONBLOCK in the parent (the flag is
                                    the open file's, shared): not the user's; under lock */
    struct weft__fd_dir d[2];    /* WEFT__RD, WEFT__WR */
    struct weft__waitq any;      /* weft_poll_fd() waiters; guarded by lock */
};

/* weft__fd_get() returns fd's table entry, classified (made non-blocking and
 * registered on first use), and its generation; 0 or an errno (EBADF). */
int weft__fd_get(int fd, struct weft__fd **out, uint32_t *gen);

/* weft__fd_event() records events for (fd, gen) and appends the waiters to
 * wake to *list (wake them with weft__waiter_wake_list after). */
void weft__fd_event(int fd, uint32_t gen, unsigned events, struct weft__waiter **list);

/* weft__fd_wait() parks the calling uthread until an edge after seq_rd on
 * the read side (dirs bit 0) and/or seq_wr on the write side (bit 1) of f,
 * generation gen, or deadline. dirs 1 or 2 queue on that direction (one
 * wake-up per edge, passed on with weft__fd_pass); with WEFT__WAIT_POLL on
 * the poll_fd queue, which every event wakes. Returns 0 (try again),
 * ETIMEDOUT or EBADF (closed). */
#define WEFT__WAIT_POLL 0x4
int weft__fd_wait(struct weft__fd *f, uint32_t gen, int dirs, uint32_t seq_rd, uint32_t seq_wr,
                  uint64_t deadline);

/* One descriptor of a wait on several (weft__fd_wait_many): the caller
 * fills f, gen, dirs (bit 0 read, bit 1 write) and the sequence numbers it
 * read before its last try; w is the member waiter queued on f's poll
 * queue (its data points at the wait's group; poll_fd waiters have 0). */
struct weft__fd_watch {
    struct weft__fd *f;
    uint32_t gen;
    int dirs;
    uint32_t seq_rd, seq_wr;
    struct weft__waiter w;
};

/* weft__fd_wait_many() parks the calling uthread until an edge on any of
 * the n descriptors after its sequence numbers (or its close), or deadline.
 * Returns 0 (look again), ETIMEDOUT, or ENOMEM (no timer for the deadline). */
int weft__fd_wait_many(struct weft__fd_watch *ws, int n, uint64_t deadline);

/* weft__fd_pass() hands readiness on to the next waiter of dir after a call
 * that succeeded: the descriptor may hold more than the caller took. */
void weft__fd_pass(struct weft__fd *f, int dir);

/* weft__fd_lookup() is fd's entry or NULL (never creates one). */
struct weft__fd *weft__fd_lookup(int fd);

#endif
