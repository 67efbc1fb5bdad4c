/*
 * httpd_io.h — the few calls in which httpd's two builds differ.
 *
 *   httpd          (default)         one uthread per connection; I/O through
 *                                    <weft/io.h>, timeouts through the
 *                                    per-uthread I/O deadline
 *   httpd-pthread  (-DHTTPD_PTHREAD) one detached kernel thread per
 *                                    connection; plain blocking system calls,
 *                                    poll(2) for read deadlines and
 *                                    SO_SNDTIMEO for stalled writes
 *
 * Everything else (parser, request handling, files) is the same code.
 *
 *   hio_start(vcores, sched, copy)  start the runtime (0 = all vcores; sched: a
 *                                 scheduler name, NULL = the default; copy:
 *                                 connections are stack-copy uthreads); errno value
 *   hio_class(cls)                run the calling connection at priority class
 *                                 cls (0 most urgent .. HTTPD_CLASSES-1; -1 the
 *                                 default priority): weft_setprio, which only
 *                                 the prio scheduler honours
 *   hio_run(fn, arg)              run fn(arg) as the acceptor, return when it does
 *   hio_spawn(fn, arg)            start fn(arg) as a detached connection thread
 *   hio_conn_setup(fd, send_ns)   per-connection setup for the send timeout:
 *                                 the pthread build's sends give up after a
 *                                 tenth of it (10 ms to 1 s), so httpd sees
 *                                 stalls with that lateness
 *   hio_now_ns()                  CLOCK_MONOTONIC in ns
 *   hio_sleep_ns(ns)              sleep without holding a core
 *   hio_accept(lfd)               accept4(..., SOCK_CLOEXEC) until the deadline
 *   hio_read(fd, b, n, deadline)  one read; -1/ETIMEDOUT past the absolute deadline
 *   hio_send(fd, b, n, flags, dl) send until the absolute deadline dl: the count
 *                                 sent, or -1/ETIMEDOUT if none; a deadline in
 *                                 the past tries once without blocking (the
 *                                 pthread build: a blocking send gives up after
 *                                 the slice set by hio_conn_setup instead)
 *   hio_sendfile(out, in, off, n, dl)  sendfile(2), the same rule (pthread
 *                                 build: always the slice)
 *   hio_close(fd)                 close a connection socket
 *   hio_yield()                   let other connections run (weft: cooperative)
 *
 * Reads, sends and sendfile may return short counts; the caller loops. EINTR
 * never comes back.
 */
#ifndef HTTPD_IO_H
#define HTTPD_IO_H

#include <errno.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HTTPD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HTTPD_SANITIZED 1
#endif
#endif

/* Connection stack: the server keeps its buffers on the heap, so a small
 * stack is plenty; sanitizers need more room for their redzones. */
#ifdef HTTPD_SANITIZED
#define HTTPD_STACK (256u * 1024)
#else
#define HTTPD_STACK (64u * 1024)
#endif

#ifdef HTTPD_PTHREAD

#include <limits.h>
#include <poll.h>
#include <pthread.h>

#define HTTPD_FLAVOUR "pthread"

static inline uint64_t hio_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int hio_start(int vcores, const char *sched, bool stack_copy)
{
    (void)vcores; /* -v, -s and -c are accepted and ignored */
    (void)sched;
    (void)stack_copy;
    return 0;
}

static inline void hio_class(int cls)
{
    (void)cls; /* the kernel knows no classes */
}

static inline int hio_run(void *(*fn)(void *), void *arg)
{
    fn(arg);
    return 0;
}

static inline int hio_spawn(void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_t t;
    int rc = pthread_attr_init(&a);
    if (rc != 0)
        return rc;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, HTTPD_STACK);
    rc = pthread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc;
}

/* A blocking send/sendfile that moves no byte for a tenth of send_ns (10 ms
 * to 1 s) returns what it sent so far, or -1/EAGAIN (turned into ETIMEDOUT
 * below); httpd then judges the client's progress. */
static inline int hio_conn_setup(int fd, uint64_t send_ns)
{
    uint64_t slice = send_ns / 10;
    slice = slice < 10000000u ? 10000000u : slice > 1000000000u ? 1000000000u : slice;
    struct timeval tv = { .tv_sec = (time_t)(slice / 1000000000u),
                          .tv_usec = (suseconds_t)(slice % 1000000000u / 1000u) };
    return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static inline void hio_sleep_ns(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline int hio_accept(int lfd)
{
    int fd;
    do
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return fd;
}

/* poll(2) until the deadline, then read: one extra system call per wait,
 * and no per-read setsockopt as SO_RCVTIMEO would need for an absolute
 * deadline. */
static inline ssize_t hio_read(int fd, void *buf, size_t n, uint64_t deadline)
{
    for (;;) {
        uint64_t now = hio_now_ns();
        if (now >= deadline) {
            errno = ETIMEDOUT;
            return -1;
        }
        uint64_t ms = (deadline - now + 999999u) / 1000000u;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r <= 0)
            continue;
        ssize_t k = read(fd, buf, n);
        if (k < 0 && errno == EINTR)
            continue;
        return k;
    }
}

static inline ssize_t hio_send(int fd, const void *buf, size_t n, int flags, uint64_t deadline)
{
    if (deadline <= hio_now_ns())
        flags |= MSG_DONTWAIT; /* else SO_SNDTIMEO, set by hio_conn_setup() */
    ssize_t k;
    do
        k = send(fd, buf, n, flags | MSG_NOSIGNAL);
    while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        errno = ETIMEDOUT;
    return k;
}

static inline ssize_t hio_sendfile(int out, int in, off_t *off, size_t n, uint64_t deadline)
{
    (void)deadline; /* SO_SNDTIMEO's slice */
    ssize_t k;
    do
        k = sendfile(out, in, off, n);
    while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        errno = ETIMEDOUT;
    return k;
}

static inline int hio_close(int fd)
{
    return close(fd);
}

static inline void hio_yield(void)
{
    /* the kernel preempts; nothing to do */
}

#else /* weft */

#include <weft/weft.h>

#define HTTPD_FLAVOUR "weft"

static inline uint64_t hio_now_ns(void)
{
    return weft_now_ns();
}

static bool hio_stack_copy; /* -c: connections are stack-copy uthreads */

static inline int hio_start(int vcores, const char *sched, bool stack_copy)
{
    struct weft_config cfg = { .vcores = vcores, .sched = sched };
    hio_stack_copy = stack_copy;
    return weft_init(&cfg);
}

/* Priority class c runs at 28 - 8c: 28, 20, ..., -28; the default is 0. */
static inline void hio_class(int cls)
{
    weft_setprio(weft_self(), cls < 0 ? 0 : 28 - 8 * cls);
}

static inline int hio_run(void *(*fn)(void *), void *arg)
{
    weft_attr_t a = { .name = "accept" };
    weft_t t;
    int rc = weft_spawn(&t, &a, fn, arg);
    if (rc != 0)
        return rc;
    return weft_join(t, NULL);
}

static inline int hio_spawn(void *(*fn)(void *), void *arg)
{
    weft_attr_t a = { .stack_size = HTTPD_STACK, .flags = WEFT_DETACHED, .name = "conn" };
    if (hio_stack_copy) /* everything others touch is in struct conn, on the heap */
        a.flags |= WEFT_STACK_COPY;
    return weft_spawn(NULL, &a, fn, arg);
}

static inline int hio_conn_setup(int fd, uint64_t send_ns)
{
    (void)fd; /* the deadline is set before each send */
    (void)send_ns;
    return 0;
}

static inline void hio_sleep_ns(uint64_t ns)
{
    weft_sleep_ns(ns);
}

static inline int hio_accept(int lfd)
{
    weft_io_set_deadline(WEFT_FOREVER);
    return weft_accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

static inline ssize_t hio_read(int fd, void *buf, size_t n, uint64_t deadline)
{
    weft_io_set_deadline(deadline);
    return weft_read(fd, buf, n);
}

/* weft's writes return the partial count when the deadline stops them after
 * some bytes, and try once without blocking when it has passed. */
static inline ssize_t hio_send(int fd, const void *buf, size_t n, int flags, uint64_t deadline)
{
    weft_io_set_deadline(deadline);
    return weft_send(fd, buf, n, flags | MSG_NOSIGNAL);
}

static inline ssize_t hio_sendfile(int out, int in, off_t *off, size_t n, uint64_t deadline)
{
    weft_io_set_deadline(deadline);
    return weft_sendfile(out, in, off, n);
}

static inline int hio_close(int fd)
{
    return weft_close(fd);
}

static inline void hio_yield(void)
{
    weft_yield();
}

#endif /* HTTPD_PTHREAD */

#endif /* HTTPD_IO_H */
