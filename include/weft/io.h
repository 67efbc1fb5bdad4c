/*
 * io.h — blocking-style I/O that parks the calling uthread, not its vcore.
 *
 * Each call takes the arguments of the POSIX call of the same name and
 * returns what it returns: -1 with errno set on failure. Called from a
 * uthread, a call that would block parks the uthread on the file
 * descriptor's wait queue until the poller (epoll by default, io_uring with
 * WEFT_POLLER=uring) reports the descriptor ready; the vcore runs other
 * uthreads meanwhile. Called from an ordinary kernel thread, the call blocks
 * that thread (in poll(2)), with the same results.
 *
 * File descriptors
 *   weft makes a descriptor non-blocking the first time a weft call uses it,
 *   and remembers that it did: the weft calls still behave as blocking ones.
 *   Plain read(2) and friends on that descriptor (not through weft or the
 *   shim) then see EAGAIN. A descriptor that was already O_NONBLOCK when weft
 *   first saw it keeps non-blocking semantics: the calls return EAGAIN.
 *   Descriptors 0, 1 and 2 are never switched (they are usually shared with
 *   other processes); I/O on them calls the system directly and may block the
 *   vcore. Regular files cannot be polled: with epoll their reads and writes
 *   are plain system calls (the page cache makes most of them quick; use
 *   weft_pread()/weft_offload() for cold disks), with io_uring they go
 *   through the ring and park the uthread.
 *   Close descriptors that weft has seen with weft_close() (the shim does
 *   this for close()). A descriptor closed some other way (fclose(), a
 *   library's own close) must be announced with weft_fd_forget() before its
 *   number is reused, or weft would keep stale state for the new one.
 *
 * The poller
 *   starts at the first call that needs it and takes two descriptors (epoll:
 *   the instance and an eventfd; io_uring: the ring). If it cannot start (no
 *   descriptor or memory left), that call fails with its errno (EMFILE,
 *   ENFILE, ENOMEM) and the next call tries again: the failure is not kept.
 *
 * Semantics kept from POSIX
 *   Reads return as soon as some data is there (short reads are normal).
 *   Writes on a descriptor weft made non-blocking write everything before
 *   returning, as a blocking write does, unless an error or the I/O deadline
 *   stops them after some bytes: then they return the count written. EINTR
 *   never reaches the caller: weft retries. Calls never raise SIGPIPE
 *   differently from the POSIX call (use MSG_NOSIGNAL or ignore SIGPIPE).
 *
 * Timeouts: one I/O deadline per uthread (per kernel thread outside a
 * uthread), set with weft_io_set_deadline(). A call that would wait past it
 * fails with ETIMEDOUT (after a partial write: returns the partial count),
 * or with ENOMEM if no memory can be had for the deadline's timer.
 */
#ifndef WEFT_IO_H
#define WEFT_IO_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- deadlines ------------------------------------------------------------ */

/* weft_io_set_deadline() sets the caller's I/O deadline (absolute,
 * CLOCK_MONOTONIC ns; WEFT_FOREVER = none, the default). Returns 0, or EINVAL
 * for a value with the top bit set other than WEFT_FOREVER. */
int weft_io_set_deadline(uint64_t deadline);

/* weft_io_deadline() returns the caller's I/O deadline. */
uint64_t weft_io_deadline(void);

/* ---- reading and writing --------------------------------------------------- */

/* read(2), write(2), readv(2), writev(2). */
ssize_t weft_read(int fd, void *buf, size_t n);
ssize_t weft_write(int fd, const void *buf, size_t n);
ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt);
ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt);

/* recv(2), send(2), recvfrom(2), sendto(2), recvmsg(2), sendmsg(2).
 * MSG_DONTWAIT in flags makes that one call non-blocking. */
ssize_t weft_recv(int fd, void *buf, size_t n, int flags);
ssize_t weft_send(int fd, const void *buf, size_t n, int flags);
ssize_t weft_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
                      socklen_t *fromlen);
ssize_t weft_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
                    socklen_t tolen);
ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags);

/* sendfile(2): out_fd may be a socket weft waits on; in_fd is read directly. */
ssize_t weft_sendfile(int out_fd, int in_fd, off_t *offset, size_t count);

/* ---- connections ------------------------------------------------------------ */

/* accept(2), accept4(2). The new descriptor is blocking in the POSIX sense
 * unless SOCK_NONBLOCK is given; weft switches it on first use as above. */
int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen);
int weft_accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/* connect(2): waits for the connection (EINPROGRESS is handled inside) and
 * returns its outcome from SO_ERROR: ECONNREFUSED, ETIMEDOUT, ... */
int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);

/* weft_poll_fd() waits until fd is ready for events (POLLIN, POLLOUT, ...)
 * or timeout_ns passes (relative; negative = no timeout, 0 = just check).
 * Returns the ready events (> 0; POLLERR, POLLHUP and POLLNVAL are always
 * reported), 0 on timeout, -1 with errno on error. The I/O deadline applies
 * too: past it, -1 with ETIMEDOUT. */
int weft_poll_fd(int fd, short events, int64_t timeout_ns);

/* weft_poll() is poll(2) with a timeout in ns (relative; negative = none,
 * 0 = just check): in a uthread it parks until one of the descriptors is
 * ready, the timeout passes or the I/O deadline passes (then -1 with
 * ETIMEDOUT). Returns the number of entries with revents set, 0 on timeout,
 * -1 with errno (EFAULT, EINVAL, ENOMEM). Descriptors weft cannot watch
 * (0-2, devices its poller refuses) make the wait run on an offload helper;
 * the uthread still parks. Outside a uthread it is ppoll(2). Descriptors
 * are registered with weft's poller (and made non-blocking) on first use. */
int weft_poll(struct pollfd *fds, nfds_t n, int64_t timeout_ns);

/* weft_epoll_wait() is epoll_wait(2) on the application's own epoll
 * instance epfd, with a timeout in ns as weft_poll(): in a uthread it parks
 * until epfd has events (weft watches epfd itself for readability). Returns
 * the events stored, 0 on timeout, -1 with errno (EBADF, EINVAL, EFAULT,
 * ETIMEDOUT past the I/O deadline, ENOMEM). */
int weft_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int64_t timeout_ns);

/* weft_close() wakes every uthread waiting on fd (their calls fail with
 * EBADF), drops weft's state for fd, and close(2)s it. Returns as close(2). */
int weft_close(int fd);

/* weft_fd_forget() drops weft's state for fd without closing it and wakes
 * its waiters with EBADF: call it before closing fd by other means. */
void weft_fd_forget(int fd);

/* ---- calls that cannot be made non-blocking: the offload pool ----------------- */

/* weft_offload() runs fn(arg) on a helper kernel thread and parks the caller
 * until it returns; *result (if result is not NULL) gets fn's return value
 * and the caller's errno gets errno as fn left it. The pool grows on demand
 * up to WEFT_OFFLOAD_THREADS helpers (default 64) and a helper exits after
 * 2 s idle; a call that finds every helper busy at the bound waits for one.
 * Outside a uthread fn runs on the calling thread. Returns 0, or EAGAIN if
 * no helper exists and none could be started (fn did not run). From a
 * stack-copy uthread arg must not point into its stack (weft.h): that aborts
 * with a message. */
int weft_offload(void *(*fn)(void *), void *arg, void **result);

/* open(2), pread(2), pwrite(2), fsync(2) for regular files, without holding
 * the vcore: offloaded, or through the ring with the io_uring poller
 * (pread/pwrite). */
int weft_open(const char *path, int flags, ...);
ssize_t weft_pread(int fd, void *buf, size_t n, off_t offset);
ssize_t weft_pwrite(int fd, const void *buf, size_t n, off_t offset);
int weft_fsync(int fd);

/* weft_poller_name() is the poller in use: "epoll" or "io_uring" (after the
 * first I/O call; "none" before). */
const char *weft_poller_name(void);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_IO_H */
