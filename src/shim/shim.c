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
 * accept accept4 connect close poll ppoll select pselect epoll_wait
 * epoll_pwait epoll_pwait2 sleep usleep nanosleep, and (preload only) the
 * _FORTIFY_SOURCE variants __read_chk __recv_chk __recvfrom_chk __poll_chk
 * __ppoll_chk. In a uthread each goes to its weft_ counterpart (poll, ppoll,
 * select and pselect to weft_poll, the epoll waits to weft_epoll_wait).
 * Outside uthreads a call goes to weft only if weft already manages the
 * descriptor (it made it non-blocking, so the real call would see EAGAIN);
 * otherwise it is the real call. close() always drops weft's state for the
 * descriptor first.
 * ppoll, pselect, epoll_pwait and epoll_pwait2 with a signal mask that
 * unblocks a signal the kernel thread blocks make the real call (they wait
 * for that signal's EINTR, which a parked uthread never gets); a mask that
 * only blocks more, as libuv's SIGPROF mask, parks. select with nfds above
 * FD_SETSIZE makes the real call.
 * Not covered (still block the vcore when called in a uthread): open and file
 * I/O on regular files (page cache; see weft_pread/weft_offload), fread/
 * fwrite/fgets and the rest of stdio (glibc calls its internal read/write),
 * getaddrinfo and other resolver calls, wait/waitpid, flock/fcntl locks,
 * pthread_mutex/cond (use weft's, or libweft-pthread.so, which carries this shim), clock_nanosleep, sigwait, pipe2-less
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
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "../io/managed.h"

#ifdef WEFT_SHIM_PTHREAD
/* Inside libweft-pthread.so: the blocking calls are cancellation points and
 * the sleeps end early for a cancellation or a signal (src/pthread/). */
#include <weft/pthread.h>
int weft__pt_sleep_until(uint64_t deadline);
#define CANCEL_POINT() weft_pthread_testcancel()
#define SLEEP_UNTIL(d) weft__pt_sleep_until(d)
#else
#define CANCEL_POINT() do { } while (0)
#define SLEEP_UNTIL(d) (weft_sleep_until_ns(d), ETIMEDOUT)
#endif

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
DECLARE_REAL(int, ppoll, struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
DECLARE_REAL(int, select, int, fd_set *, fd_set *, fd_set *, struct timeval *);
DECLARE_REAL(int, pselect, int, fd_set *, fd_set *, fd_set *, const struct timespec *,
             const sigset_t *);
DECLARE_REAL(int, epoll_wait, int, struct epoll_event *, int, int);
DECLARE_REAL(int, epoll_pwait, int, struct epoll_event *, int, int, const sigset_t *);
#if __GLIBC_PREREQ(2, 35)
#define HAVE_EPOLL_PWAIT2 1
DECLARE_REAL(int, epoll_pwait2, int, struct epoll_event *, int, const struct timespec *,
             const sigset_t *);
#endif
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
    RESOLVE(ppoll); RESOLVE(select); RESOLVE(pselect); RESOLVE(epoll_wait); RESOLVE(epoll_pwait);
#ifdef HAVE_EPOLL_PWAIT2
    RESOLVE(epoll_pwait2);
#endif
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
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_read(fd, buf, n);
    ENSURE(read);
    return REAL(read)(fd, buf, n);
}

ssize_t SHIM(write)(int fd, const void *buf, size_t n)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_write(fd, buf, n);
    ENSURE(write);
    return REAL(write)(fd, buf, n);
}

ssize_t SHIM(readv)(int fd, const struct iovec *iov, int iovcnt)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_readv(fd, iov, iovcnt);
    ENSURE(readv);
    return REAL(readv)(fd, iov, iovcnt);
}

ssize_t SHIM(writev)(int fd, const struct iovec *iov, int iovcnt)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_writev(fd, iov, iovcnt);
    ENSURE(writev);
    return REAL(writev)(fd, iov, iovcnt);
}

ssize_t SHIM(recv)(int fd, void *buf, size_t n, int flags)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_recv(fd, buf, n, flags);
    ENSURE(recv);
    return REAL(recv)(fd, buf, n, flags);
}

ssize_t SHIM(send)(int fd, const void *buf, size_t n, int flags)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_send(fd, buf, n, flags);
    ENSURE(send);
    return REAL(send)(fd, buf, n, flags);
}

ssize_t SHIM(recvfrom)(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
                       socklen_t *fromlen)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_recvfrom(fd, buf, n, flags, from, fromlen);
    ENSURE(recvfrom);
    return REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
}

ssize_t SHIM(sendto)(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
                     socklen_t tolen)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_sendto(fd, buf, n, flags, to, tolen);
    ENSURE(sendto);
    return REAL(sendto)(fd, buf, n, flags, to, tolen);
}

ssize_t SHIM(recvmsg)(int fd, struct msghdr *msg, int flags)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_recvmsg(fd, msg, flags);
    ENSURE(recvmsg);
    return REAL(recvmsg)(fd, msg, flags);
}

ssize_t SHIM(sendmsg)(int fd, const struct msghdr *msg, int flags)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_sendmsg(fd, msg, flags);
    ENSURE(sendmsg);
    return REAL(sendmsg)(fd, msg, flags);
}

int SHIM(accept)(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_accept(fd, addr, addrlen);
    ENSURE(accept);
    return REAL(accept)(fd, addr, addrlen);
}

int SHIM(accept4)(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
    CANCEL_POINT();
    if (TO_WEFT(fd))
        return weft_accept4(fd, addr, addrlen, flags);
    ENSURE(accept4);
    return REAL(accept4)(fd, addr, addrlen, flags);
}

int SHIM(connect)(int fd, const struct sockaddr *addr, socklen_t len)
{
    CANCEL_POINT();
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
    CANCEL_POINT();
    if (IN_UTHREAD()) {
        if (n == 0 && timeout_ms < 0) /* poll(NULL, 0, -1): forever; an unpark ends it */
            return weft_park() == 0 ? 0 : -1;
        return weft_poll(fds, n, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000);
    }
    ENSURE(poll);
    return REAL(poll)(fds, n, timeout_ms);
}

/* mask_unblocks(): waiting with mask would unblock a signal the calling
 * kernel thread blocks now (the caller waits for it: see the top). */
static bool mask_unblocks(const sigset_t *mask)
{
    if (!mask)
        return false;
    sigset_t cur;
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &cur, (size_t)(_NSIG / 8)) != 0)
        return true;
    for (int s = 1; s < _NSIG; s++)
        if (sigismember(&cur, s) == 1 && sigismember(mask, s) == 0)
            return true;
    return false;
}

/* ns_of(): a timespec timeout as ns (-1: none), or -2 if invalid. */
static int64_t ns_of(const struct timespec *ts)
{
    if (!ts)
        return -1;
    if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L)
        return -2;
    if (ts->tv_sec >= INT64_MAX / 1000000000 - 1)
        return -1; /* beyond 292 years: forever */
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int SHIM(ppoll)(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    CANCEL_POINT();
    if (IN_UTHREAD() && !mask_unblocks(mask)) {
        int64_t ns = ns_of(tmo);
        if (ns == -2) {
            errno = EINVAL;
            return -1;
        }
        return weft_poll(fds, n, ns);
    }
    ENSURE(ppoll);
    return REAL(ppoll)(fds, n, tmo, mask);
}

/* select_poll(): select(2) over weft_poll(); the sets are rewritten with
 * the ready descriptors. */
static int select_poll(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int64_t ns)
{
    struct pollfd stack_p[64], *p = stack_p;
    int np = 0;
    for (int fd = 0; fd < nfds; fd++)
        if ((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex)))
            np++;
    if (np > 64 && !(p = malloc((size_t)np * sizeof *p))) {
        errno = ENOMEM;
        return -1;
    }
    np = 0;
    for (int fd = 0; fd < nfds; fd++) {
        short ev = 0;
        if (rd && FD_ISSET(fd, rd))
            ev |= POLLIN;
        if (wr && FD_ISSET(fd, wr))
            ev |= POLLOUT;
        if (ex && FD_ISSET(fd, ex))
            ev |= POLLPRI;
        if (ev)
            p[np++] = (struct pollfd){ .fd = fd, .events = ev };
    }
    int r = weft_poll(p, (nfds_t)np, ns);
    if (r >= 0) {
        for (int i = 0; i < np; i++)
            if (p[i].revents & POLLNVAL) {
                errno = EBADF; /* select(2) fails as a whole, the sets untouched */
                r = -1;
                goto out;
            }
        if (rd)
            FD_ZERO(rd);
        if (wr)
            FD_ZERO(wr);
        if (ex)
            FD_ZERO(ex);
        r = 0;
        for (int i = 0; i < np; i++) {
            short re = p[i].revents, ev = p[i].events;
            /* as the kernel's select: hang-up and error count as readable,
             * error as writable */
            if ((ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
                FD_SET(p[i].fd, rd);
                r++;
            }
            if ((ev & POLLOUT) && (re & (POLLOUT | POLLERR))) {
                FD_SET(p[i].fd, wr);
                r++;
            }
            if ((ev & POLLPRI) && (re & POLLPRI)) {
                FD_SET(p[i].fd, ex);
                r++;
            }
        }
    }
out:
    if (p != stack_p)
        free(p);
    return r;
}

int SHIM(select)(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
    CANCEL_POINT();
    if (IN_UTHREAD() && nfds <= FD_SETSIZE) {
        if (nfds < 0 || (tv && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000))) {
            errno = EINVAL;
            return -1;
        }
        struct timespec ts, *tp = NULL;
        if (tv) {
            ts = (struct timespec){ tv->tv_sec, tv->tv_usec * 1000 };
            tp = &ts;
        }
        int64_t ns = ns_of(tp);
        uint64_t start = weft_now_ns();
        int r = select_poll(nfds, rd, wr, ex, ns);
        if (tv && ns >= 0) { /* Linux writes back the time left */
            uint64_t spent = weft_now_ns() - start;
            uint64_t left = spent < (uint64_t)ns ? (uint64_t)ns - spent : 0;
            tv->tv_sec = (time_t)(left / 1000000000u);
            tv->tv_usec = (suseconds_t)(left % 1000000000u / 1000u);
        }
        return r;
    }
    ENSURE(select);
    return REAL(select)(nfds, rd, wr, ex, tv);
}

int SHIM(pselect)(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *tmo,
                  const sigset_t *mask)
{
    CANCEL_POINT();
    if (IN_UTHREAD() && nfds <= FD_SETSIZE && !mask_unblocks(mask)) {
        int64_t ns = ns_of(tmo);
        if (nfds < 0 || ns == -2) {
            errno = EINVAL;
            return -1;
        }
        return select_poll(nfds, rd, wr, ex, ns);
    }
    ENSURE(pselect);
    return REAL(pselect)(nfds, rd, wr, ex, tmo, mask);
}

int SHIM(epoll_wait)(int epfd, struct epoll_event *ev, int max, int timeout_ms)
{
    CANCEL_POINT();
    if (IN_UTHREAD())
        return weft_epoll_wait(epfd, ev, max, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000);
    ENSURE(epoll_wait);
    return REAL(epoll_wait)(epfd, ev, max, timeout_ms);
}

int SHIM(epoll_pwait)(int epfd, struct epoll_event *ev, int max, int timeout_ms,
                      const sigset_t *mask)
{
    CANCEL_POINT();
    if (IN_UTHREAD() && !mask_unblocks(mask))
        return weft_epoll_wait(epfd, ev, max, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000);
    ENSURE(epoll_pwait);
    return REAL(epoll_pwait)(epfd, ev, max, timeout_ms, mask);
}

#ifdef HAVE_EPOLL_PWAIT2
int SHIM(epoll_pwait2)(int epfd, struct epoll_event *ev, int max, const struct timespec *tmo,
                       const sigset_t *mask)
{
    CANCEL_POINT();
    if (IN_UTHREAD() && !mask_unblocks(mask)) {
        int64_t ns = ns_of(tmo);
        if (ns == -2) {
            errno = EINVAL;
            return -1;
        }
        return weft_epoll_wait(epfd, ev, max, ns);
    }
    ENSURE(epoll_pwait2);
    return REAL(epoll_pwait2)(epfd, ev, max, tmo, mask);
}
#endif

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
        uint64_t now = weft_now_ns(), d = ns >= (UINT64_MAX >> 1) - now ? UINT64_MAX >> 1 : now + ns;
        if (SLEEP_UNTIL(d) != ETIMEDOUT) { /* a pthread_kill's handler ran (pthread layer) */
            uint64_t left = d - weft_now_ns();
            if (rem)
                *rem = (struct timespec){ (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
            errno = EINTR;
            return -1;
        }
        if (rem)
            rem->tv_sec = rem->tv_nsec = 0;
        return 0;
    }
    ENSURE(nanosleep);
    return REAL(nanosleep)(req, rem);
}

int SHIM(usleep)(useconds_t us)
{
    if (IN_UTHREAD()) {
        if (SLEEP_UNTIL(weft_now_ns() + (uint64_t)us * 1000u) != ETIMEDOUT) {
            errno = EINTR;
            return -1;
        }
        return 0;
    }
    ENSURE(usleep);
    return REAL(usleep)(us);
}

unsigned SHIM(sleep)(unsigned s)
{
    if (IN_UTHREAD()) {
        uint64_t d = weft_now_ns() + (uint64_t)s * 1000000000u;
        if (SLEEP_UNTIL(d) != ETIMEDOUT) {
            uint64_t now = weft_now_ns();
            return now >= d ? 0 : (unsigned)((d - now + 999999999u) / 1000000000u);
        }
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

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask,
                size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask,
                size_t fdslen)
{
    if (fdslen / sizeof *fds < n)
        chk_fail();
    return ppoll(fds, n, tmo, mask);
}
#endif
