/*
 * poller.h — the private I/O layer: the file-descriptor table (fd.c) and the
 * one small interface both pollers implement (poll_epoll.c, poll_uring.c).
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
 *
 * epoll registers each descriptor once, edge-triggered, for both directions.
 * io_uring arms a one-shot poll per direction when a waiter queues and none
 * is armed. Events carry the descriptor's generation: weft_close() bumps it,
 * so a late event for a closed (or reused) number is ignored.
 */
#ifndef WEFT_IO_POLLER_H
#define WEFT_IO_POLLER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../internal.h"

enum { WEFT__RD = 0, WEFT__WR = 1 };

/* Event bits passed to weft__fd_event(). */
#define WEFT__EV_RD  0x1u
#define WEFT__EV_WR  0x2u
#define WEFT__EV_ERR 0x4u /* error or hang-up: both directions */
#define WEFT__EV_ONESHOT 0x8u /* io_uring: the poll for these directions is spent */

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

struct weft__poller_ops {
    const char *name;
    /* Sets the backend up; 0 or an errno (the caller falls back to epoll). */
    int (*init)(void);
    /* First use of a descriptor: 0, or EPERM if it cannot be polled. */
    int (*add)(struct weft__fd *f);
    /* A waiter is about to queue on direction dir (f->lock held). */
    void (*arm)(struct weft__fd *f, int dir);
    /* f is being closed or forgotten (f->lock held). */
    void (*del)(struct weft__fd *f);
    /* Waits for events until deadline (0 = do not block), dispatches them
     * through weft__fd_event() and wakes their waiters. Returns how many
     * waiters it woke. One caller at a time blocks; others return 0. */
    int (*wait)(uint64_t deadline);
    /* In a fork child: let go of the backend without touching what the
     * parent still uses (close our descriptors, unmap our copy). */
    void (*forget)(void);
    /* Makes a blocked wait() return soon. Any thread. */
    void (*wakeup)(void);
    /* Regular-file read or write through the backend (may be NULL): returns
     * the result or -errno; off -1 = the file position. Uthreads only. */
    ssize_t (*file_rw)(bool write, int fd, void *buf, size_t n, off_t off);
};

extern const struct weft__poller_ops weft__poll_epoll;
extern const struct weft__poller_ops weft__poll_uring; /* its init fails if not built in */

/* The backend in use, NULL until the first descriptor is seen. */
extern const struct weft__poller_ops *_Atomic weft__poller;

/* Uthreads parked on descriptors or ring operations right now: while there
 * are any, idle and busy vcores keep an eye on the poller (vcore.c). */
extern _Atomic int weft__io_nwaiting;

/* weft__io_start() picks and starts the poller (once). 0 or errno. */
int weft__io_start(void);

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

/* weft__offload_forked(): the offload pool back to "no helpers" (fork child). */
void weft__offload_forked(void);

/* weft__fd_drop() forgets fd (generation bump, poller removal) and wakes
 * every waiter on it with EBADF. */
WEFT__EXPORT void weft__fd_drop(int fd);

/* weft__fd_managed() is 1 if weft made fd non-blocking and polls it (the
 * shim then routes plain calls on it through weft from any thread). */
WEFT__EXPORT int weft__fd_managed(int fd);

/* weft__set_errno() stores e in the errno of the kernel thread the caller
 * runs on now: a separate function, so that the compiler cannot reuse an
 * errno address computed before a switch (see io.c). */
void weft__set_errno(int e);

/* weft__fd_lookup() is fd's entry or NULL (never creates one). */
struct weft__fd *weft__fd_lookup(int fd);

#endif
