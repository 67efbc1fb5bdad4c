/*
 * io.c — the calls of <weft/io.h>: POSIX arguments and results, the uthread
 * parks instead of the vcore.
 *
 * Every call is one of three shapes over the same step, io_once(): try the
 * non-blocking system call; on EAGAIN park on the descriptor's direction
 * (the seq protocol of fd.h) and try again; EINTR is retried. Writes loop
 * io_once until everything is written (a blocking write's promise). A
 * kernel thread that is not a uthread waits in ppoll(2) instead of parking.
 *
 * The system calls go through syscall(2), never the libc functions of the
 * same name: the shim (src/shim) interposes those and would call us back.
 * close() is the exception: the shim's close only drops our state, and TSan
 * must see descriptors close.
 *
 * errno: a uthread may come back from a park on another vcore, whose kernel
 * thread has another errno, and glibc lets the compiler keep errno's address
 * across calls. So the system calls run in sys_op(), a separate function
 * that turns errno into a negative result at once, the loops pass -errno
 * values around, and weft__set_errno() (again separate) stores the final one on
 * the kernel thread the caller returns on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "poller.h"

/* ---- deadlines -------------------------------------------------------------- */

static __thread uint64_t kt_deadline = WEFT_FOREVER; /* outside uthreads */

int weft_io_set_deadline(uint64_t deadline)
{
    if (weft__deadline_check(deadline))
        return EINVAL;
    struct weft_uthread *t = weft_self();
    if (t)
        t->io_deadline = deadline == WEFT_FOREVER ? 0 : deadline ? deadline : 1; /* 0 = none */
    else
        kt_deadline = deadline;
    return 0;
}

uint64_t weft_io_deadline(void)
{
    struct weft_uthread *t = weft_self();
    if (!t)
        return kt_deadline;
    return t->io_deadline ? t->io_deadline : WEFT_FOREVER;
}

/* ---- the system calls ---------------------------------------------------------- */

enum op {
    OP_READ, OP_WRITE, OP_READV, OP_WRITEV, OP_RECV, OP_SEND, OP_RECVFROM, OP_SENDTO,
    OP_RECVMSG, OP_SENDMSG, OP_ACCEPT4, OP_SENDFILE, OP_PREAD, OP_PWRITE,
};

struct req {
    enum op op;
    void *buf;                   /* READ WRITE RECV SEND RECVFROM SENDTO PREAD PWRITE */
    size_t n;                    /* bytes, or SENDFILE's count */
    const struct iovec *iov;     /* READV WRITEV */
    int iovcnt;
    int flags;                   /* RECV* SEND* ACCEPT4 */
    struct sockaddr *addr;       /* RECVFROM ACCEPT4 (out), SENDTO (in) */
    socklen_t *addrlen;          /* RECVFROM ACCEPT4 */
    socklen_t tolen;             /* SENDTO */
    struct msghdr *msg;          /* RECVMSG SENDMSG */
    int in_fd;                   /* SENDFILE */
    off_t *offp;                 /* SENDFILE */
    off_t off;                   /* PREAD PWRITE */
};

static WEFT__NOINLINE ssize_t sys_op(int fd, const struct req *r)
{
    ssize_t n;
    switch (r->op) {
    case OP_READ:     n = syscall(SYS_read, fd, r->buf, r->n); break;
    case OP_WRITE:    n = syscall(SYS_write, fd, r->buf, r->n); break;
    case OP_READV:    n = syscall(SYS_readv, fd, r->iov, r->iovcnt); break;
    case OP_WRITEV:   n = syscall(SYS_writev, fd, r->iov, r->iovcnt); break;
    case OP_RECV:     n = syscall(SYS_recvfrom, fd, r->buf, r->n, r->flags, NULL, NULL); break;
    case OP_SEND:     n = syscall(SYS_sendto, fd, r->buf, r->n, r->flags, NULL, 0); break;
    case OP_RECVFROM: n = syscall(SYS_recvfrom, fd, r->buf, r->n, r->flags, r->addr, r->addrlen); break;
    case OP_SENDTO:   n = syscall(SYS_sendto, fd, r->buf, r->n, r->flags, r->addr, r->tolen); break;
    case OP_RECVMSG:  n = syscall(SYS_recvmsg, fd, r->msg, r->flags); break;
    case OP_SENDMSG:  n = syscall(SYS_sendmsg, fd, r->msg, r->flags); break;
    case OP_ACCEPT4:  n = syscall(SYS_accept4, fd, r->addr, r->addrlen, r->flags); break;
    case OP_SENDFILE: n = syscall(SYS_sendfile, fd, r->in_fd, r->offp, r->n); break;
    case OP_PREAD:    n = syscall(SYS_pread64, fd, r->buf, r->n, r->off); break;
    case OP_PWRITE:   n = syscall(SYS_pwrite64, fd, r->buf, r->n, r->off); break;
    default:          n = -1; errno = EINVAL; break;
    }
    return n < 0 ? -errno : n;
}

WEFT__NOINLINE void weft__set_errno(int e)
{
    errno = e;
}

/* ret() turns a -errno result into the POSIX -1 + errno. */
static ssize_t ret(ssize_t n)
{
    if (n >= 0)
        return n;
    weft__set_errno((int)-n);
    return -1;
}

static bool is_write(enum op op)
{
    return op == OP_WRITE || op == OP_WRITEV || op == OP_SEND || op == OP_SENDTO ||
           op == OP_SENDMSG || op == OP_SENDFILE || op == OP_PWRITE;
}

/* kt_wait() is a kernel thread's wait for events on fd: 0 (look again) or
 * ETIMEDOUT. */
static int kt_wait(int fd, short events, uint64_t deadline)
{
    struct pollfd p = { .fd = fd, .events = events };
    struct timespec ts, *tp = NULL;
    if (deadline != WEFT_FOREVER) {
        uint64_t now = weft__now_ns();
        if (now >= deadline)
            return ETIMEDOUT;
        ts.tv_sec = (time_t)((deadline - now) / 1000000000u);
        ts.tv_nsec = (long)((deadline - now) % 1000000000u);
        tp = &ts;
    }
    int saved = errno;
    int n = ppoll(&p, 1, tp, NULL);
    errno = saved;
    return n == 0 ? ETIMEDOUT : 0;
}

/* wait_dir() waits for an edge on fd's direction after seq; 0 or errno. */
static int wait_dir(struct weft__fd *f, uint32_t gen, int dir, uint32_t seq, uint64_t deadline)
{
    if (!weft_self())
        return kt_wait(f->fd, dir == WEFT__RD ? POLLIN : POLLOUT, deadline);
    if (deadline != WEFT_FOREVER && weft__now_ns() >= deadline)
        return ETIMEDOUT;
    return weft__fd_wait(f, gen, dir == WEFT__RD ? 1 : 2, seq, seq, deadline);
}

/* io_once() makes one call that may block: returns its result or -errno. */
static ssize_t io_once(int fd, const struct req *r)
{
    struct weft__fd *f;
    uint32_t gen;
    int e = weft__fd_get(fd, &f, &gen);
    if (e)
        return -e;
    int kind = f ? atomic_load_explicit(&f->kind, memory_order_relaxed) : WEFT__FD_DIRECT;
    if (kind != WEFT__FD_POLLED || f->user_nonblock ||
        ((r->op >= OP_RECV && r->op <= OP_SENDMSG) && (r->flags & MSG_DONTWAIT))) {
        const struct weft__poller_ops *p = atomic_load_explicit(&weft__poller, memory_order_acquire);
        if (kind == WEFT__FD_FILE && p->file_rw && weft_self() &&
            (r->op == OP_READ || r->op == OP_WRITE || r->op == OP_PREAD || r->op == OP_PWRITE)) {
            bool pos = r->op == OP_PREAD || r->op == OP_PWRITE;
            ssize_t n;
            while ((n = p->file_rw(is_write(r->op), fd, r->buf, r->n, pos ? r->off : (off_t)-1)) == -EINTR)
                ;
            return n;
        }
        ssize_t n;
        while ((n = sys_op(fd, r)) == -EINTR)
            ;
        return n;
    }
    int dir = is_write(r->op) ? WEFT__WR : WEFT__RD;
    uint64_t deadline = weft_io_deadline();
    for (;;) {
        uint32_t seq = atomic_load_explicit(&f->d[dir].seq, memory_order_acquire);
        ssize_t n = sys_op(fd, r);
        if (n == -EINTR)
            continue;
        if (n != -EAGAIN) {
            /* Success or a real error (accept's EMFILE, ...): either way we
             * are done with this readiness, and others may use it. */
            weft__fd_pass(f, dir);
            return n;
        }
        e = wait_dir(f, gen, dir, seq, deadline);
        if (e)
            return -e;
    }
}

/* xfer_all() repeats io_once until r->n bytes are moved: the promise of a
 * blocking write, and of a read with MSG_WAITALL. After a partial transfer
 * an error, EAGAIN or the deadline returns the count so far; so does the end
 * of the input (a read or sendfile returning 0). */
static ssize_t xfer_all(int fd, struct req *r)
{
    size_t total = 0, want = r->n;
    char *base = r->buf;
    do {
        r->buf = base ? base + total : NULL; /* sendfile has no buffer */
        r->n = want - total;
        ssize_t n = io_once(fd, r);
        if (n < 0)
            return total ? (ssize_t)total : n;
        if (n == 0)
            break; /* end of the input (a write of more than 0 bytes never gives 0) */
        total += (size_t)n;
    } while (total < want);
    return (ssize_t)total;
}

/* iov_xfer_all() is xfer_all for writev/sendmsg/recvmsg: it advances a
 * copy of the vector (the caller's is const), and passes ancillary data
 * once. */
static ssize_t iov_xfer_all(int fd, struct req *r, const struct iovec *iov, int iovcnt)
{
    size_t want = 0;
    for (int i = 0; i < iovcnt; i++)
        want += iov[i].iov_len;
    ssize_t n = io_once(fd, r);
    if (n <= 0 || (size_t)n >= want)
        return n;
    if (iovcnt < 0 || iovcnt > 1024)
        return n;
    struct iovec local[iovcnt > 0 ? iovcnt : 1];
    memcpy(local, iov, sizeof local[0] * (size_t)iovcnt);
    size_t total = (size_t)n;
    struct msghdr m = { 0 };
    struct msghdr *user_msg = r->msg;
    if (r->op == OP_SENDMSG || r->op == OP_RECVMSG) {
        m = *r->msg;
        m.msg_control = NULL; /* passed with the first part */
        m.msg_controllen = 0;
        r->msg = &m;
    }
    int first = 0;
    while (total < want) {
        size_t skip = total;
        for (first = 0; first < iovcnt && skip >= iov[first].iov_len; first++)
            skip -= iov[first].iov_len;
        local[first].iov_base = (char *)iov[first].iov_base + skip;
        local[first].iov_len = iov[first].iov_len - skip;
        if (r->op == OP_SENDMSG || r->op == OP_RECVMSG) {
            m.msg_iov = &local[first];
            m.msg_iovlen = (size_t)(iovcnt - first);
        } else {
            r->iov = &local[first];
            r->iovcnt = iovcnt - first;
        }
        n = io_once(fd, r);
        if (n <= 0)
            break; /* an error, or the end of the input */
        total += (size_t)n;
    }
    if (r->op == OP_RECVMSG) /* the flags of the last part belong to the caller too */
        user_msg->msg_flags |= m.msg_flags;
    return (ssize_t)total;
}

/* ---- the calls ------------------------------------------------------------------ */

ssize_t weft_read(int fd, void *buf, size_t n)
{
    struct req r = { .op = OP_READ, .buf = buf, .n = n };
    return ret(io_once(fd, &r));
}

ssize_t weft_write(int fd, const void *buf, size_t n)
{
    struct req r = { .op = OP_WRITE, .buf = (void *)buf, .n = n };
    return ret(xfer_all(fd, &r));
}

ssize_t weft_readv(int fd, const struct iovec *iov, int iovcnt)
{
    struct req r = { .op = OP_READV, .iov = iov, .iovcnt = iovcnt };
    return ret(io_once(fd, &r));
}

ssize_t weft_writev(int fd, const struct iovec *iov, int iovcnt)
{
    struct req r = { .op = OP_WRITEV, .iov = iov, .iovcnt = iovcnt };
    return ret(iov_xfer_all(fd, &r, iov, iovcnt));
}

/* waitall(): MSG_WAITALL on a call that may block: collect all n bytes. */
static bool waitall(int flags)
{
    return (flags & (MSG_WAITALL | MSG_DONTWAIT)) == MSG_WAITALL;
}

ssize_t weft_recv(int fd, void *buf, size_t n, int flags)
{
    struct req r = { .op = OP_RECV, .buf = buf, .n = n, .flags = flags };
    return ret(waitall(flags) ? xfer_all(fd, &r) : io_once(fd, &r));
}

ssize_t weft_send(int fd, const void *buf, size_t n, int flags)
{
    struct req r = { .op = OP_SEND, .buf = (void *)buf, .n = n, .flags = flags };
    return ret(xfer_all(fd, &r));
}

ssize_t weft_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
                      socklen_t *fromlen)
{
    struct req r = { .op = OP_RECVFROM, .buf = buf, .n = n, .flags = flags, .addr = from,
                     .addrlen = fromlen };
    return ret(waitall(flags) ? xfer_all(fd, &r) : io_once(fd, &r));
}

ssize_t weft_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
                    socklen_t tolen)
{
    struct req r = { .op = OP_SENDTO, .buf = (void *)buf, .n = n, .flags = flags,
                     .addr = (struct sockaddr *)to, .tolen = tolen };
    return ret(xfer_all(fd, &r));
}

ssize_t weft_recvmsg(int fd, struct msghdr *msg, int flags)
{
    struct req r = { .op = OP_RECVMSG, .msg = msg, .flags = flags };
    if (waitall(flags) && msg)
        return ret(iov_xfer_all(fd, &r, msg->msg_iov, (int)msg->msg_iovlen));
    return ret(io_once(fd, &r));
}

ssize_t weft_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    struct req r = { .op = OP_SENDMSG, .msg = (struct msghdr *)msg, .flags = flags };
    if (!msg)
        return ret(-EFAULT);
    return ret(iov_xfer_all(fd, &r, msg->msg_iov, (int)msg->msg_iovlen));
}

ssize_t weft_sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    struct req r = { .op = OP_SENDFILE, .in_fd = in_fd, .offp = offset, .n = count };
    /* xfer_all advances buf, which sendfile ignores; the kernel advances
     * *offset (or the file position) itself. */
    return ret(xfer_all(out_fd, &r));
}

int weft_accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
    struct req r = { .op = OP_ACCEPT4, .addr = addr, .addrlen = addrlen, .flags = flags };
    return (int)ret(io_once(fd, &r));
}

int weft_accept(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
    return weft_accept4(fd, addr, addrlen, 0);
}

static WEFT__NOINLINE int sys_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    return syscall(SYS_connect, fd, addr, len) < 0 ? -errno : 0;
}

/* connect_result() is 0 (connected), -errno (failed) or 1 (still going). */
static WEFT__NOINLINE int connect_result(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    if (ppoll(&p, 1, &(struct timespec){ 0, 0 }, NULL) == 0)
        return 1;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return -errno;
    return -err;
}

int weft_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
    struct weft__fd *f;
    uint32_t gen;
    int e = weft__fd_get(fd, &f, &gen);
    if (e)
        return (int)ret(-e);
    if (!f || atomic_load_explicit(&f->kind, memory_order_relaxed) != WEFT__FD_POLLED ||
        f->user_nonblock)
        return (int)ret(sys_connect(fd, addr, addrlen));
    uint64_t deadline = weft_io_deadline();
    uint32_t seq = atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_acquire);
    int r = sys_connect(fd, addr, addrlen);
    /* A Unix socket whose listener's backlog is full says EAGAIN where a
     * blocking connect would wait, and nothing signals room: retry, with a
     * growing nap, until the deadline. */
    for (uint64_t nap = 50000; r == -EAGAIN; nap = nap < 10000000 ? nap * 2 : nap) {
        uint64_t now = weft__now_ns();
        if (deadline != WEFT_FOREVER && now >= deadline)
            return (int)ret(-ETIMEDOUT);
        weft_sleep_ns(deadline != WEFT_FOREVER && deadline - now < nap ? deadline - now : nap);
        seq = atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_acquire);
        r = sys_connect(fd, addr, addrlen);
    }
    if (r != -EINPROGRESS && r != -EINTR)
        return (int)ret(r);
    for (;;) {
        e = wait_dir(f, gen, WEFT__WR, seq, deadline);
        if (e)
            return (int)ret(-e);
        seq = atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_acquire);
        r = connect_result(fd);
        if (r <= 0)
            return (int)ret(r);
    }
}

int weft_poll_fd(int fd, short events, int64_t timeout_ns)
{
    uint64_t now = weft__now_ns();
    uint64_t io_deadline = weft_io_deadline();
    uint64_t deadline = timeout_ns < 0 ? WEFT_FOREVER : now + (uint64_t)timeout_ns;
    bool io_bound = io_deadline < deadline;
    if (io_bound)
        deadline = io_deadline;
    if (fd < 0) { /* poll(2) ignores such an entry: only the timeout remains */
        if (deadline != WEFT_FOREVER && deadline <= now)
            return 0;
        if (weft_self())
            weft_sleep_until_ns(deadline == WEFT_FOREVER ? UINT64_MAX >> 1 : deadline);
        else
            ppoll(NULL, 0, deadline == WEFT_FOREVER ? NULL
                : &(struct timespec){ (time_t)((deadline - now) / 1000000000u),
                                      (long)((deadline - now) % 1000000000u) }, NULL);
        return io_bound && timeout_ns != 0 ? (int)ret(-ETIMEDOUT) : 0;
    }
    struct weft__fd *f;
    uint32_t gen;
    int e = weft__fd_get(fd, &f, &gen);
    struct pollfd p = { .fd = fd, .events = events };
    if (e == EBADF)
        return POLLNVAL; /* as poll(2) reports a closed descriptor */
    if (e)
        return (int)ret(-e);
    if (!f || atomic_load_explicit(&f->kind, memory_order_relaxed) != WEFT__FD_POLLED || !weft_self()) {
        for (;;) {
            uint64_t left = deadline > now ? deadline - now : 0;
            struct timespec ts = { (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
            int n = ppoll(&p, 1, deadline == WEFT_FOREVER ? NULL : &ts, NULL);
            if (n > 0)
                return p.revents;
            if (n == 0)
                return io_bound && timeout_ns != 0 ? (int)ret(-ETIMEDOUT) : 0;
            if (errno != EINTR)
                return -1;
            now = weft__now_ns();
        }
    }
    int dirs = 0;
    if (events & (POLLIN | POLLPRI | POLLRDHUP))
        dirs |= 1;
    if (events & POLLOUT)
        dirs |= 2;
    if (!dirs)
        dirs = 3; /* only errors and hang-ups asked for: any event */
    for (;;) {
        uint32_t s_rd = atomic_load_explicit(&f->d[WEFT__RD].seq, memory_order_acquire);
        uint32_t s_wr = atomic_load_explicit(&f->d[WEFT__WR].seq, memory_order_acquire);
        p.revents = 0;
        int n = ppoll(&p, 1, &(struct timespec){ 0, 0 }, NULL);
        if (n > 0)
            return p.revents;
        if (timeout_ns == 0)
            return 0;
        if (deadline != WEFT_FOREVER && weft__now_ns() >= deadline)
            return io_bound ? (int)ret(-ETIMEDOUT) : 0;
        e = weft__fd_wait(f, gen, dirs | WEFT__WAIT_POLL, s_rd, s_wr, deadline);
        if (e == ETIMEDOUT)
            return io_bound ? (int)ret(-ETIMEDOUT) : 0;
        if (e)
            return (int)ret(-e);
    }
}

int weft_close(int fd)
{
    weft__fd_drop(fd);
    int saved = errno;
    int r = close(fd); /* libc's (TSan sees it); the shim's close() never calls back into us */
    if (r < 0 && errno == EINTR) { /* Linux has closed it anyway */
        errno = saved;
        return 0;
    }
    return r;
}

/* ---- regular files ----------------------------------------------------------------- */

struct file_call {
    enum { F_OPEN, F_FSYNC, F_RW } what;
    const char *path;
    int flags;
    mode_t mode;
    int fd;
    struct req r;
    ssize_t result;              /* -errno on failure */
};

static void *file_call_run(void *arg)
{
    struct file_call *c = arg;
    switch (c->what) {
    case F_OPEN:
        c->result = open(c->path, c->flags, c->mode);
        break;
    case F_FSYNC:
        c->result = fsync(c->fd);
        break;
    case F_RW:
        c->result = sys_op(c->fd, &c->r);
        return NULL;
    }
    if (c->result < 0)
        c->result = -errno;
    return NULL;
}

/* file_offload_copy() is file_offload() for a stack-copy uthread, whose
 * stack is somebody else's while the helper works: the call, the path and
 * a buffer on its stack go through the heap. */
static WEFT__NOINLINE ssize_t file_offload_copy(struct file_call *c)
{
    struct file_call *h = malloc(sizeof *h);
    if (!h)
        return -ENOMEM;
    *h = *c;
    char *path = NULL;
    void *bounce = NULL;
    bool write = c->what == F_RW && is_write(c->r.op);
    if (c->what == F_OPEN && !(h->path = path = strdup(c->path))) {
        free(h);
        return -ENOMEM;
    }
    if (c->what == F_RW && c->r.n && weft__sc_on_run_stack(c->r.buf, c->r.n)) {
        if (!(h->r.buf = bounce = malloc(c->r.n))) {
            free(h);
            return -ENOMEM;
        }
        if (write)
            memcpy(bounce, c->r.buf, c->r.n);
    }
    int e = weft_offload(file_call_run, h, NULL);
    ssize_t r = e ? -e : h->result;
    if (bounce && !write && r > 0)
        memcpy(c->r.buf, bounce, (size_t)r);
    free(bounce);
    free(path);
    free(h);
    return r;
}

static ssize_t file_offload(struct file_call *c)
{
    struct weft_uthread *ut = weft_self();
    if (ut && ut->copy)
        return file_offload_copy(c);
    int e = weft_offload(file_call_run, c, NULL);
    if (e)
        return -e;
    return c->result;
}

int weft_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    struct file_call c = { .what = F_OPEN, .path = path, .flags = flags, .mode = mode };
    return (int)ret(file_offload(&c));
}

static ssize_t file_rw(bool write, int fd, void *buf, size_t n, off_t off)
{
    struct weft__fd *f;
    uint32_t gen;
    const struct weft__poller_ops *p = NULL;
    if (weft_self() && weft__fd_get(fd, &f, &gen) == 0 && f &&
        atomic_load_explicit(&f->kind, memory_order_relaxed) == WEFT__FD_FILE)
        p = atomic_load_explicit(&weft__poller, memory_order_acquire);
    if (p && p->file_rw)
        return p->file_rw(write, fd, buf, n, off);
    struct file_call c = { .what = F_RW, .fd = fd,
                           .r = { .op = write ? OP_PWRITE : OP_PREAD, .buf = buf, .n = n, .off = off } };
    return file_offload(&c);
}

ssize_t weft_pread(int fd, void *buf, size_t n, off_t offset)
{
    if (offset < 0)
        return ret(-EINVAL);
    return ret(file_rw(false, fd, buf, n, offset));
}

ssize_t weft_pwrite(int fd, const void *buf, size_t n, off_t offset)
{
    if (offset < 0)
        return ret(-EINVAL);
    return ret(file_rw(true, fd, (void *)buf, n, offset));
}

int weft_fsync(int fd)
{
    struct file_call c = { .what = F_FSYNC, .fd = fd };
    return (int)ret(file_offload(&c));
}
