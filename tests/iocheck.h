/*
 * iocheck.h — helpers shared by the I/O tests (io_echo, io_errors,
 * io_netwake, offload): loopback sockets, descriptor limits, the poller
 * check for the -uring variants, and a position-keyed byte pattern.
 *
 * All network traffic stays on 127.0.0.1 with ephemeral ports.
 */
#ifndef WEFT_TESTS_IOCHECK_H
#define WEFT_TESTS_IOCHECK_H

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>

#include "check.h"

/* IOERR is errno as the calling uthread sees it now. A uthread may move to
 * another vcore inside any weft call, errno's address is per kernel thread,
 * and the compiler may keep the address it computed before the call (see
 * weft.h): so the tests read errno through a call it cannot fold. */
static int *(*volatile io_errno_loc)(void) = __errno_location;
#define IOERR (*io_errno_loc())

/* Late-wake tolerance for "not more than this after the deadline". */
#define LATE_TOL_NS SCALE(MS(200), MS(2000))

static inline const char *io_errname(int e)
{
    switch (e) {
    case EBADF: return "EBADF";
    case ECONNRESET: return "ECONNRESET";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EPIPE: return "EPIPE";
    case ENOENT: return "ENOENT";
    case EINPROGRESS: return "EINPROGRESS";
    case ENOTCONN: return "ENOTCONN";
    default: return check_errname(e);
    }
}

/* CHECK_IO(expr, want, want_errno): an I/O call returning -1/errno. */
#define CHECK_IO(expr, want, want_errno)                                      \
    do {                                                                      \
        long io_rc_ = (long)(expr);                                           \
        int io_e_ = IOERR;                                                    \
        long io_w_ = (long)(want);                                            \
        if (io_rc_ != io_w_ || (io_w_ == -1 && io_e_ != (want_errno)))        \
            check_fail(__FILE__, __LINE__, #expr,                             \
                       "returned %ld errno %d (%s), expected %ld errno %d (%s)", \
                       io_rc_, io_e_, io_errname(io_e_), io_w_, (want_errno), \
                       io_errname(want_errno));                               \
    } while (0)

/* io_uring_probe() says whether this kernel (or emulator) lets us set up a
 * ring at all. */
static inline int io_uring_probe(void)
{
#ifdef SYS_io_uring_setup
    unsigned char params[120];          /* struct io_uring_params, zeroed */
    memset(params, 0, sizeof params);
    long fd = syscall(SYS_io_uring_setup, 4, params);
    if (fd < 0)
        return 0;
    close((int)fd);
    return 1;
#else
    return 0;
#endif
}

/* io_test_start() is called first by every I/O test: SIGPIPE ignored (the
 * tests use MSG_NOSIGNAL where they can, but writes to pipes and plain
 * write() on a reset socket raise it), and a -uring variant skips with 77
 * when the kernel gives no io_uring. */
static inline void io_test_start(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *p = getenv("WEFT_POLLER");
#ifndef WEFT_TEST_HAVE_URING
    if (p && strcmp(p, "uring") == 0) {
        fprintf(stderr, "SKIP: WEFT_POLLER=uring but weft was built without liburing\n");
        exit(77);
    }
#endif
    if (p && strcmp(p, "uring") == 0 && !io_uring_probe()) {
        fprintf(stderr, "SKIP: WEFT_POLLER=uring but io_uring_setup fails here (%s)\n",
                strerror(IOERR));
        exit(77);
    }
}

/* io_check_poller() is called after the first I/O call: the poller the
 * environment asked for is the one in use. */
static inline void io_check_poller(void)
{
    const char *p = getenv("WEFT_POLLER");
    const char *name = weft_poller_name();
    CHECK(name != NULL, "weft_poller_name() is NULL");
    if (p && strcmp(p, "uring") == 0)
        CHECK(strcmp(name, "io_uring") == 0, "WEFT_POLLER=uring but the poller is %s", name);
    else
        CHECK(strcmp(name, "epoll") == 0, "default poller is %s, expected epoll", name);
}

/* raise_nofile() lifts RLIMIT_NOFILE's soft limit to the hard one and
 * returns the new soft limit. */
static inline long raise_nofile(void)
{
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit: %s", strerror(IOERR));
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit: %s", strerror(IOERR));
    }
    return rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
}

/* tcp_listener() returns a listening socket on 127.0.0.1:<ephemeral> and
 * stores the address in *addr. */
static inline int tcp_listener(struct sockaddr_in *addr, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(IOERR));
    int one = 1;
    CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(IOERR));
    CHECK(listen(fd, backlog) == 0, "listen: %s", strerror(IOERR));
    socklen_t len = sizeof a;
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0, "getsockname: %s", strerror(IOERR));
    CHECK(a.sin_port != 0, "no ephemeral port");
    *addr = a;
    return fd;
}

/* tcp_socket() returns a fresh (blocking) TCP socket. */
static inline int tcp_socket(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(IOERR));
    return fd;
}

/* tcp_pair() connects a client to a fresh listener through weft (works in
 * a uthread and outside) and returns both ends; the listener is closed. */
static inline void tcp_pair(int *client, int *server)
{
    struct sockaddr_in a;
    int l = tcp_listener(&a, 4);
    int c = tcp_socket();
    CHECK_IO(weft_connect(c, (struct sockaddr *)&a, sizeof a), 0, 0);
    int s = weft_accept(l, NULL, NULL);
    CHECK(s >= 0, "weft_accept: %s", strerror(IOERR));
    CHECK(weft_close(l) == 0, "weft_close(listener): %s", strerror(IOERR));
    *client = c;
    *server = s;
}

/* fd_is_nonblocking() reads O_NONBLOCK. */
static inline int fd_is_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0, "F_GETFL: %s", strerror(IOERR));
    return (fl & O_NONBLOCK) != 0;
}

/* pattern_byte() is the byte at position off of stream id: every echo and
 * copy test checks bytes against it. */
static inline uint8_t pattern_byte(uint32_t id, uint64_t off)
{
    uint64_t x = off * 0x9e3779b97f4a7c15ull + (uint64_t)id * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 32;
    return (uint8_t)x;
}

static inline void pattern_fill(uint32_t id, uint64_t off, uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern_byte(id, off + i);
}

/* pattern_find_bad() returns the index of the first byte of buf that is
 * not the pattern, or n. */
static inline size_t pattern_find_bad(uint32_t id, uint64_t off, const uint8_t *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern_byte(id, off + i))
            return i;
    return n;
}

/* sub_phase() names a step inside a table row, with where it runs. */
static inline void sub_phase(const char *step)
{
    static char buf[2][160];
    int in_u = weft_self() != NULL;
    snprintf(buf[in_u], sizeof buf[in_u], "%s (%s)", step, in_u ? "in a uthread" : "in main");
    check_phase(buf[in_u]);
}

/* io_table() is check_table() with the section's name in the phase. */
static inline void io_table(const char *name, void *(*rows)(void *))
{
    static char ph[2][160];
    snprintf(ph[0], sizeof ph[0], "%s: from main", name);
    snprintf(ph[1], sizeof ph[1], "%s: from a uthread", name);
    check_phase(ph[0]);
    rows(NULL);
    check_phase(ph[1]);
    CHECK(in_uthread(rows, NULL) == (void *)1, "%s", name);
}

/* ms_of() is for messages. */
static inline double ms_of(uint64_t ns)
{
    return (double)ns / 1e6;
}

#endif /* WEFT_TESTS_IOCHECK_H */
