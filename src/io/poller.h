/*
 * poller.h — the private I/O layer's backend interface: the one small set of
 * operations both pollers implement (poll_epoll.c, poll_uring.c), the
 * backend in use, and the layer's process-wide state. The descriptor table
 * and the readiness model are in fd.h.
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

#include "fd.h"

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
    /* wakeup() is async-signal-safe (no lock): a signal handler may call it. */
    bool wakeup_signal_safe;
    /* Regular-file read or write through the backend (may be NULL): returns
     * the result or -errno; off -1 = the file position. Uthreads only. */
    ssize_t (*file_rw)(bool write, int fd, void *buf, size_t n, off_t off);
};

extern const struct weft__poller_ops weft__poll_epoll;
extern const struct weft__poller_ops weft__poll_uring; /* its init fails if not built in */

/* The backend in use, NULL until the first descriptor is seen. */
extern const struct weft__poller_ops *_Atomic weft__poller;

/* I/O waiters are counted with weft__io_wait_begin/_end (internal.h). */

/* weft__io_start() picks and starts the poller (once). 0 or errno. */
int weft__io_start(void);

/* weft__offload_forked(): the offload pool back to "no helpers" (fork child). */
void weft__offload_forked(void);

/* weft__set_errno() stores e in the errno of the kernel thread the caller
 * runs on now: a separate function, so that the compiler cannot reuse an
 * errno address computed before a switch (see io.c). */
void weft__set_errno(int e);

#endif
