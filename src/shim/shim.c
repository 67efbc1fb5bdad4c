/*
 * shim.c — the interposition shim: plain blocking calls in uthreads become
 * weft calls, so code written for threads parks instead of holding a vcore.
 *
 * One source, two builds:
 *   libweft-preload.so   (LD_PRELOAD) defines read, write, ... themselves and
 *                        finds the real ones with dlsym(RTLD_NEXT).
 *   libweft-wrap.a       (WEFT_SHIM_WRAP) defines __wrap_read, ... for a link
 *                        with -Wl,--wrap=read,... (pkg-config --variable=
 *                        wrap_ldflags weft); the real ones are __real_read, ...
 *
 * Covered: read write readv writev recv send recvfrom sendto recvmsg sendmsg
 * accept accept4 connect close poll sleep usleep nanosleep, and (preload
 * only) the _FORTIFY_SOURCE variants __read_chk __recv_chk __recvfrom_chk
 * __poll_chk. In a uthread each goes to its weft_ counterpart (poll only
 * with one descriptor, or none: a sleep). Outside uthreads a call goes to
 * weft only if weft already manages the descriptor (it made it non-blocking,
 * so the real call would see EAGAIN); otherwise it is the real call. close()
 * always drops weft's state for the descriptor first.
 * Not covered (still block the vcore when called in a uthread): select,
 * pselect, poll with several descriptors, epoll_wait, ppoll, open and file
 * I/O on regular files (page cache; see weft_pread/weft_offload), fread/
 * fwrite/fgets and the rest of stdio (glibc calls its internal read/write),
 * getaddrinfo and other resolver calls, wait/waitpid, flock/fcntl locks,
 * pthread_mutex/cond (use weft's), clock_nanosleep, sigwait, pipe2-less
 * blocking opens of FIFOs, and any system call made with syscall(2).
 *
 * errno: a call that parks may resume on another vcore, whose kernel thread
 * has its own errno. The shim sets errno on the thread it returns on, so
 * `if (read(...) < 0 && errno == EAGAIN)` is right; but code that takes
 * errno's address before the call and reads it after (the compiler may do
 * this for `errno = 0; read(...); if (errno)`, as glibc declares
 * __errno_location const) can read the old vcore's value. Run such code with
 * WEFT_VCORES=1 or in WEFT_PINNED uthreads.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "../io/poller.h" /* weft__fd_managed, weft__fd_drop */

#define IN_UTHREAD() (weft_self() != NULL)
#define TO_WEFT(fd) (IN_UTHREAD() || weft__fd_managed(fd))

#ifdef WEFT_SHIM_WRAP
#define SHIM(name) __wrap_##name
#define REAL(name) __real_##name
#define DECLARE_REAL(ret, name, ...) ret __real_##name(__VA_ARGS__)
#else
#define SHIM(name) name
#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, ...) static ret (*real_##name)(__VA_ARGS__)
#endif

DECLARE_REAL(ssize_t, read, int, void *, size_t);
DECLARE_REAL(ssize_t, write, int, const void *, size_t);
DECLARE_REAL(ssize_t, readv, int, const struct iovec *, int);
DECLARE_REAL(ssize_t, writev, int, const struct iovec *, int);
DECLARE_REAL(ssize_t, recv, int, void *, size_t, int);
DECLARE_REAL(ssize_t, send, int, const void *, size_t, int);
DECLARE_REAL(ssize_t, recvfrom, int, void *, size_t, int, struct sockaddr *, socklen_t *);
DECLARE_REAL(ssize_t, sendto, int, const void *, size_t, int, const struct sockaddr *, socklen_t);
DECLARE_REAL(ssize_t, recvmsg, int, struct msghdr *, int);
DECLARE_REAL(ssize_t, sendmsg, int, const struct msghdr *, int);
DECLARE_REAL(int, accept, int, struct sockaddr *, socklen_t *);
DECLARE_REAL(int, accept4, int, struct sockaddr *, socklen_t *, int);
DECLARE_REAL(int, connect, int, const struct sockaddr *, socklen_t);
DECLARE_REAL(int, close, int);
DECLARE_REAL(int, poll, struct pollfd *, nfds_t, int);
DECLARE_REAL(unsigned, sleep, unsigned);
DECLARE_REAL(int, usleep, useconds_t);
DECLARE_REAL(int, nanosleep, const struct timespec *, struct timespec *);

#ifndef WEFT_SHIM_WRAP
/* resolve() finds the next definition of every call we wrap. Run as a
 * constructor, and again on first use in case a constructor of another
 * library called us before ours ran. */
#define RESOLVE(name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name)
__attribute__((constructor)) static void resolve(void)
{
    RESOLVE(read); RESOLVE(write); RESOLVE(readv); RESOLVE(writev);
    RESOLVE(recv); RESOLVE(send); RESOLVE(recvfrom); RESOLVE(sendto);
    RESOLVE(recvmsg); RESOLVE(sendmsg); RESOLVE(accept); RESOLVE(accept4);
    RESOLVE(connect); RESOLVE(close); RESOLVE(poll); RESOLVE(sleep);
    RESOLVE(usleep); RESOLVE(nanosleep);
    if (!real_read || !real_close || !real_nanosleep) {
        static const char msg[] = "weft-preload: cannot find the real libc calls\n";
        syscall(SYS_write, 2, msg, sizeof msg - 1);
        abort();
    }
}
#define ENSURE(name) do { if (__builtin_expect(!real_##name, 0)) resolve(); } while (0)
#else
#define ENSURE(name) do { } while (0)
#endif

ssize_t SHIM(read)(int fd, void *buf, size_t n)
{
    if (TO_WEFT(fd))
        return weft_read(fd, buf, n);
    ENSURE(read);
    return REAL(read)(fd, buf, n);
}

ssize_t SHIM(write)(int fd, const void *buf, size_t n)
{
    if (TO_WEFT(fd))
        return weft_write(fd, buf, n);
    ENSURE(write);
    return REAL(write)(fd, buf, n);
}

ssize_t SHIM(readv)(int fd, const struct iovec *iov, int iovcnt)
{
    if (TO_WEFT(fd))
        return weft_readv(fd, iov, iovcnt);
    ENSURE(readv);
    return REAL(readv)(fd, iov, iovcnt);
}

ssize_t SHIM(writev)(int fd, const struct iovec *iov, int iovcnt)
{
    if (TO_WEFT(fd))
        return weft_writev(fd, iov, iovcnt);
    ENSURE(writev);
    return REAL(writev)(fd, iov, iovcnt);
}

ssize_t SHIM(recv)(int fd, void *buf, size_t n, int flags)
{
    if (TO_WEFT(fd))
        return weft_recv(fd, buf, n, flags);
    ENSURE(recv);
    return REAL(recv)(fd, buf, n, flags);
}

ssize_t SHIM(send)(int fd, const void *buf, size_t n, int flags)
{
    if (TO_WEFT(fd))
        return weft_send(fd, buf, n, flags);
    ENSURE(send);
    return REAL(send)(fd, buf, n, flags);
}

ssize_t SHIM(recvfrom)(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
                       socklen_t *fromlen)
{
    if (TO_WEFT(fd))
        return weft_recvfrom(fd, buf, n, flags, from, fromlen);
    ENSURE(recvfrom);
    return REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
}

ssize_t SHIM(sendto)(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
                     socklen_t tolen)
{
    if (TO_WEFT(fd))
        return weft_sendto(fd, buf, n, flags, to, tolen);
    ENSURE(sendto);
    return REAL(sendto)(fd, buf, n, flags, to, tolen);
}

ssize_t SHIM(recvmsg)(int fd, struct msghdr *msg, int flags)
{
    if (TO_WEFT(fd))
        return weft_recvmsg(fd, msg, flags);
    ENSURE(recvmsg);
    return REAL(recvmsg)(fd, msg, flags);
}

ssize_t SHIM(sendmsg)(int fd, const struct msghdr *msg, int flags)
{
    if (TO_WEFT(fd))
        return weft_sendmsg(fd, msg, flags);
    ENSURE(sendmsg);
    return REAL(sendmsg)(fd, msg, flags);
}

int SHIM(accept)(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    if (TO_WEFT(fd))
        return weft_accept(fd, addr, addrlen);
    ENSURE(accept);
    return REAL(accept)(fd, addr, addrlen);
}

int SHIM(accept4)(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
    if (TO_WEFT(fd))
        return weft_accept4(fd, addr, addrlen, flags);
    ENSURE(accept4);
    return REAL(accept4)(fd, addr, addrlen, flags);
}

int SHIM(connect)(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (TO_WEFT(fd))
        return weft_connect(fd, addr, len);
    ENSURE(connect);
    return REAL(connect)(fd, addr, len);
}

int SHIM(close)(int fd)
{
    weft__fd_drop(fd); /* from any thread: weft's state must not outlive fd */
    ENSURE(close);
    return REAL(close)(fd);
}

int SHIM(poll)(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    if (IN_UTHREAD() && n <= 1) {
        int64_t ns = timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000;
        if (n == 0) { /* poll(NULL, 0, ms): a sleep */
            if (timeout_ms < 0)
                return weft_park() == 0 ? 0 : -1; /* forever; an unpark ends it */
            weft_sleep_ns((uint64_t)ns);
            return 0;
        }
        int r = weft_poll_fd(fds[0].fd, fds[0].events, ns);
        if (r < 0)
            return -1;
        fds[0].revents = (short)r;
        return r > 0;
    }
    ENSURE(poll);
    return REAL(poll)(fds, n, timeout_ms);
}

/* nanosleep's contract, checked as the kernel does. */
static int bad_timespec(const struct timespec *ts)
{
    return !ts || ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L;
}

int SHIM(nanosleep)(const struct timespec *req, struct timespec *rem)
{
    if (IN_UTHREAD()) {
        if (bad_timespec(req)) {
            errno = EINVAL;
            return -1;
        }
        /* Beyond 292 years weft_sleep_ns says EINVAL: clamp (sleeps "forever"). */
        uint64_t max_s = (UINT64_MAX >> 1) / 1000000000u - 1;
        uint64_t ns = (uint64_t)req->tv_sec >= max_s ? UINT64_MAX >> 1
                      : (uint64_t)req->tv_sec * 1000000000u + (uint64_t)req->tv_nsec;
        weft_sleep_ns(ns);
        if (rem)
            rem->tv_sec = rem->tv_nsec = 0; /* weft sleeps are never interrupted */
        return 0;
    }
    ENSURE(nanosleep);
    return REAL(nanosleep)(req, rem);
}

int SHIM(usleep)(useconds_t us)
{
    if (IN_UTHREAD()) {
        weft_sleep_ns((uint64_t)us * 1000u);
        return 0;
    }
    ENSURE(usleep);
    return REAL(usleep)(us);
}

unsigned SHIM(sleep)(unsigned s)
{
    if (IN_UTHREAD()) {
        weft_sleep_ns((uint64_t)s * 1000000000u);
        return 0;
    }
    ENSURE(sleep);
    return REAL(sleep)(s);
}

#ifndef WEFT_SHIM_WRAP
/* _FORTIFY_SOURCE turns some calls into checked variants; catch them too. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                       struct sockaddr *from, socklen_t *fromlen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);

static _Noreturn void chk_fail(void)
{
    static const char msg[] = "*** buffer overflow detected ***: terminated\n";
    syscall(SYS_write, 2, msg, sizeof msg - 1);
    abort();
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    if (n > buflen)
        chk_fail();
    return read(fd, buf, n);
}

ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
    if (n > buflen)
        chk_fail();
    return recv(fd, buf, n, flags);
}

ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                       struct sockaddr *from, socklen_t *fromlen)
{
    if (n > buflen)
        chk_fail();
    return recvfrom(fd, buf, n, flags, from, fromlen);
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
    if (fdslen / sizeof *fds < n)
        chk_fail();
    return poll(fds, n, timeout);
}
#endif
