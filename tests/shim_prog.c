/*
 * shim_prog — an "unmodified" weft program for the interposition shim
 * (libweft-preload.so): its uthreads call plain read, write, readv, recv,
 * send, accept, poll, close, sleep, usleep and nanosleep, never weft_read and
 * friends. Run as
 *
 *   LD_PRELOAD=libweft-preload.so shim_prog expect-overlap
 *   shim_prog expect-no-overlap
 *
 * on one vcore (it asks for one itself).
 *
 * Proves, with the shim: while uthread A sits in a blocking plain call
 * (usleep, nanosleep, sleep, read on an empty pipe, readv and recv on an
 * empty socket, accept with no client, poll on one fd with a timeout, a
 * 1 MiB write into a full pipe, poll, ppoll, select and pselect on two
 * descriptors, epoll_wait and epoll_pwait on an epoll instance with two),
 * uthread B on the same vcore keeps ticking
 * with plain usleep(10 ms): at least 10 ticks per 200 ms; the calls still
 * return what POSIX says (the bytes a pthread sent, 0 from a poll timeout,
 * a full write count); a plain read() parked in one uthread is satisfied by
 * a plain write() from another uthread on the same vcore, and poll() too;
 * close() of a descriptor with a parked plain read() in another uthread
 * makes that read fail with EBADF; 4 MiB cross a socketpair between two
 * uthreads on one vcore with plain send/recv; plain calls from main (not a
 * uthread) behave as usual.
 * Without the shim: the same blocking calls hold the only vcore, so B gets
 * no tick at all while A blocks (the program detects that it is not
 * interposed), and the results are the same.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "check.h"

static int expect_overlap;

/* errno through a call the compiler cannot fold (weft.h: a uthread may move
 * between kernel threads inside a call; harmless here on one vcore). */
static int *(*volatile errno_loc)(void) = __errno_location;
#define ERR (*errno_loc())

#define MIN_TICKS SCALE(10, 5)
#define BLOCK_NS MS(200)

static void nap_ns(uint64_t ns)   /* for pthreads: plain nanosleep, passed through */
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* ---- the overlap probe ------------------------------------------------------------------- */

struct probe {
    const char *name;
    void (*setup)(void);
    void (*block)(void);            /* uthread A: one blocking plain call */
    void *(*helper)(void *);        /* pthread that ends it after BLOCK_NS (or NULL) */
    void (*teardown)(void);
};

static atomic_int a_inside, a_done, ticks_during, ticks_total;

static void *probe_a(void *arg)
{
    const struct probe *p = arg;
    atomic_store(&a_inside, 1);
    p->block();
    atomic_store(&a_inside, 0);
    atomic_store(&a_done, 1);
    return NULL;
}

static void *probe_b(void *arg)
{
    (void)arg;
    /* Let A get into its call first (without the shim this hands A the vcore). */
    while (!atomic_load(&a_inside) && !atomic_load(&a_done))
        weft_yield();
    for (int i = 0; i < 500 && !atomic_load(&a_done); i++) {
        usleep(10000);
        atomic_fetch_add(&ticks_total, 1);
        if (atomic_load(&a_inside))
            atomic_fetch_add(&ticks_during, 1);
    }
    return NULL;
}

static void run_probe(const struct probe *p)
{
    check_phase(p->name);
    atomic_store(&a_inside, 0);
    atomic_store(&a_done, 0);
    atomic_store(&ticks_during, 0);
    atomic_store(&ticks_total, 0);
    if (p->setup)
        p->setup();
    pthread_t th;
    if (p->helper)
        th = start_pthread(p->helper, NULL);
    uint64_t t0 = weft_now_ns();
    weft_t a = spawn_ex(probe_a, (void *)p, 0, 0, "A");
    weft_t b = spawn_ex(probe_b, NULL, 0, 0, "B");
    join(a);
    join(b);
    uint64_t el = weft_now_ns() - t0;
    if (p->helper)
        join_pthread(th);
    if (p->teardown)
        p->teardown();
    int during = atomic_load(&ticks_during);
    fprintf(stderr, "shim_prog: %-28s %3d ticks during A's call (%.0f ms)\n", p->name, during,
            (double)el / 1e6);
    if (expect_overlap)
        CHECK(during >= MIN_TICKS, "%s: B ticked %d times while A blocked (expected >= %d): "
              "the plain call held the vcore, is the shim preloaded?", p->name, during,
              MIN_TICKS);
    else
        CHECK(during == 0, "%s: B ticked %d times while A blocked in a plain call without the "
              "shim: something interposes it", p->name, during);
    CHECK(el >= BLOCK_NS, "%s: A's call returned after %.1f ms", p->name, (double)el / 1e6);
}

/* The probes. */
static int pfd[2], sfd[2], lfd;
static struct sockaddr_in laddr;

static void block_usleep(void) { CHECK(usleep(200000) == 0, "usleep: %s", strerror(ERR)); }

static void block_nanosleep(void)
{
    struct timespec ts = { 0, 200000000 };
    CHECK(nanosleep(&ts, NULL) == 0, "nanosleep: %s", strerror(ERR));
}

static void block_sleep(void) { CHECK(sleep(1) == 0, "sleep returned early"); }

static void setup_pipe(void) { CHECK(pipe2(pfd, O_CLOEXEC) == 0, "pipe: %s", strerror(ERR)); }
static void teardown_pipe(void) { close(pfd[0]); close(pfd[1]); }
static void setup_sockpair(void)
{
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sfd) == 0, "socketpair: %s",
          strerror(ERR));
}
static void teardown_sockpair(void) { close(sfd[0]); close(sfd[1]); }

static void wait_a_then_nap(void)
{
    while (!atomic_load(&a_inside))
        nap_ns(MS(1));
    nap_ns(BLOCK_NS);
}

static void *helper_write_pipe(void *arg)
{
    (void)arg;
    wait_a_then_nap();
    CHECK(write(pfd[1], "P", 1) == 1, "helper write: %s", strerror(ERR));
    return NULL;
}

static void block_read_pipe(void)
{
    char c = 0;
    ssize_t n = read(pfd[0], &c, 1);
    CHECK(n == 1 && c == 'P', "read on the pipe returned %zd (%s)", n, strerror(ERR));
}

static void *helper_send_sock(void *arg)
{
    (void)arg;
    wait_a_then_nap();
    CHECK(send(sfd[1], "sock", 4, MSG_NOSIGNAL) == 4, "helper send: %s", strerror(ERR));
    return NULL;
}

static void block_recv(void)
{
    char b[8];
    ssize_t n = recv(sfd[0], b, sizeof b, 0);
    CHECK(n == 4 && memcmp(b, "sock", 4) == 0, "recv returned %zd (%s)", n, strerror(ERR));
}

static void block_readv(void)
{
    char x[2], y[8];
    struct iovec iov[2] = { { x, 2 }, { y, 8 } };
    ssize_t n = readv(sfd[0], iov, 2);
    CHECK(n == 4 && memcmp(x, "so", 2) == 0 && memcmp(y, "ck", 2) == 0,
          "readv returned %zd (%s)", n, strerror(ERR));
}

static void block_poll_timeout(void)
{
    struct pollfd p = { .fd = pfd[0], .events = POLLIN };
    int r = poll(&p, 1, 200);
    CHECK(r == 0, "poll on an empty pipe with a 200 ms timeout returned %d (%s)", r,
          strerror(ERR));
}

/* Several descriptors: the pipe gets a byte from the helper after
 * BLOCK_NS; the socket pair stays quiet. */
static void setup_pipe_and_sock(void) { setup_pipe(); setup_sockpair(); }
static void teardown_pipe_and_sock(void) { teardown_pipe(); teardown_sockpair(); }

static void block_poll_two(void)
{
    struct pollfd p[2] = { { .fd = sfd[0], .events = POLLIN }, { .fd = pfd[0], .events = POLLIN } };
    int r = poll(p, 2, 5000);
    CHECK(r == 1 && p[1].revents == POLLIN && p[0].revents == 0,
          "poll on two fds returned %d (%s), revents %#x %#x", r, strerror(ERR), p[0].revents,
          p[1].revents);
    block_read_pipe();
}

static void block_ppoll_two(void)
{
    struct pollfd p[2] = { { .fd = sfd[0], .events = POLLIN }, { .fd = pfd[0], .events = POLLIN } };
    struct timespec ts = { 5, 0 };
    int r = ppoll(p, 2, &ts, NULL);
    CHECK(r == 1 && p[1].revents == POLLIN, "ppoll returned %d (%s)", r, strerror(ERR));
    block_read_pipe();
}

static void block_select(void)
{
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(pfd[0], &rd);
    FD_SET(sfd[0], &rd);
    struct timeval tv = { 5, 0 };
    int r = select((pfd[0] > sfd[0] ? pfd[0] : sfd[0]) + 1, &rd, NULL, NULL, &tv);
    CHECK(r == 1 && FD_ISSET(pfd[0], &rd) && !FD_ISSET(sfd[0], &rd), "select returned %d (%s)", r,
          strerror(ERR));
    CHECK(tv.tv_sec < 5 && tv.tv_sec >= 3, "select left %ld s of 5", (long)tv.tv_sec);
    block_read_pipe();
}

static void block_select_timeout(void)
{
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(sfd[0], &rd);
    FD_SET(pfd[0], &rd);
    struct timeval tv = { 0, 200000 };
    int r = select((pfd[0] > sfd[0] ? pfd[0] : sfd[0]) + 1, &rd, NULL, NULL, &tv);
    CHECK(r == 0 && !FD_ISSET(sfd[0], &rd) && !FD_ISSET(pfd[0], &rd) && tv.tv_sec == 0 &&
          tv.tv_usec == 0, "select with a 200 ms timeout returned %d (%s)", r, strerror(ERR));
}

static void block_pselect(void)
{
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(pfd[0], &rd);
    FD_SET(sfd[0], &rd);
    struct timespec ts = { 5, 0 };
    sigset_t more; /* blocks one more signal, unblocks nothing: parks */
    sigemptyset(&more);
    sigaddset(&more, SIGPROF);
    int r = pselect((pfd[0] > sfd[0] ? pfd[0] : sfd[0]) + 1, &rd, NULL, NULL, &ts, &more);
    CHECK(r == 1 && FD_ISSET(pfd[0], &rd), "pselect returned %d (%s)", r, strerror(ERR));
    block_read_pipe();
}

static int epfd;
static void setup_epoll(void)
{
    setup_pipe_and_sock();
    epfd = epoll_create1(EPOLL_CLOEXEC);
    CHECK(epfd >= 0, "epoll_create1");
    struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 1 };
    CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, pfd[0], &ev) == 0, "epoll_ctl");
    ev.data.u32 = 2;
    CHECK(epoll_ctl(epfd, EPOLL_CTL_ADD, sfd[0], &ev) == 0, "epoll_ctl");
}
static void teardown_epoll(void) { close(epfd); teardown_pipe_and_sock(); }

static void block_epoll_wait(void)
{
    struct epoll_event out[4];
    int r = epoll_wait(epfd, out, 4, 5000);
    CHECK(r == 1 && out[0].data.u32 == 1, "epoll_wait returned %d (%s)", r, strerror(ERR));
    block_read_pipe();
}

static void block_epoll_pwait(void)
{
    sigset_t prof; /* libuv's UV_LOOP_BLOCK_SIGPROF mask */
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    struct epoll_event out[4];
    int r = epoll_pwait(epfd, out, 4, 5000, &prof);
    CHECK(r == 1 && out[0].data.u32 == 1, "epoll_pwait returned %d (%s)", r, strerror(ERR));
    block_read_pipe();
}

static void setup_listener(void)
{
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(lfd >= 0, "socket");
    memset(&laddr, 0, sizeof laddr);
    laddr.sin_family = AF_INET;
    laddr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(lfd, (struct sockaddr *)&laddr, sizeof laddr) == 0, "bind: %s", strerror(ERR));
    CHECK(listen(lfd, 4) == 0, "listen");
    socklen_t len = sizeof laddr;
    CHECK(getsockname(lfd, (struct sockaddr *)&laddr, &len) == 0, "getsockname");
}
static void teardown_listener(void) { close(lfd); }

static void *helper_connect(void *arg)
{
    (void)arg;
    wait_a_then_nap();
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(c >= 0, "socket");
    CHECK(connect(c, (struct sockaddr *)&laddr, sizeof laddr) == 0, "connect: %s",
          strerror(ERR));
    CHECK(send(c, "ping", 4, MSG_NOSIGNAL) == 4, "send");
    char b[4];
    size_t got = 0;
    while (got < 4) {
        ssize_t n = recv(c, b + got, 4 - got, 0);
        CHECK(n > 0, "helper recv: %zd %s", n, strerror(ERR));
        got += (size_t)n;
    }
    CHECK(memcmp(b, "ping", 4) == 0, "echo");
    close(c);
    return NULL;
}

static void block_accept(void)
{
    int s = accept(lfd, NULL, NULL);
    CHECK(s >= 0, "accept: %s", strerror(ERR));
    char b[4];
    size_t got = 0;
    while (got < 4) {
        ssize_t n = recv(s, b + got, 4 - got, 0);
        CHECK(n > 0, "recv: %zd %s", n, strerror(ERR));
        got += (size_t)n;
    }
    CHECK(send(s, b, 4, MSG_NOSIGNAL) == 4, "send: %s", strerror(ERR));
    CHECK(close(s) == 0, "close: %s", strerror(ERR));
}

#define BIG (1u << 20)

static void *helper_drain_pipe(void *arg)
{
    (void)arg;
    wait_a_then_nap();
    char *b = malloc(65536);
    CHECK(b != NULL, "malloc");
    size_t got = 0;
    while (got < BIG) {
        ssize_t n = read(pfd[0], b, 65536);
        CHECK(n > 0, "helper read: %zd %s", n, strerror(ERR));
        for (ssize_t i = 0; i < n; i++)
            CHECK(b[i] == (char)((got + (size_t)i) * 7), "byte %zu", got + (size_t)i);
        got += (size_t)n;
    }
    free(b);
    return NULL;
}

static void block_big_write(void)
{
    char *b = malloc(BIG);
    CHECK(b != NULL, "malloc");
    for (size_t i = 0; i < BIG; i++)
        b[i] = (char)(i * 7);
    ssize_t n = write(pfd[1], b, BIG);
    CHECK(n == (ssize_t)BIG, "write of 1 MiB to a pipe returned %zd (%s)", n, strerror(ERR));
    free(b);
}

static const struct probe probes[] = {
    { "usleep(200 ms)", NULL, block_usleep, NULL, NULL },
    { "nanosleep(200 ms)", NULL, block_nanosleep, NULL, NULL },
    { "sleep(1)", NULL, block_sleep, NULL, NULL },
    { "read(empty pipe)", setup_pipe, block_read_pipe, helper_write_pipe, teardown_pipe },
    { "recv(empty socket)", setup_sockpair, block_recv, helper_send_sock, teardown_sockpair },
    { "readv(empty socket)", setup_sockpair, block_readv, helper_send_sock, teardown_sockpair },
    { "poll(1 fd, 200 ms)", setup_pipe, block_poll_timeout, NULL, teardown_pipe },
    { "poll(2 fds)", setup_pipe_and_sock, block_poll_two, helper_write_pipe, teardown_pipe_and_sock },
    { "ppoll(2 fds)", setup_pipe_and_sock, block_ppoll_two, helper_write_pipe, teardown_pipe_and_sock },
    { "select(2 fds)", setup_pipe_and_sock, block_select, helper_write_pipe, teardown_pipe_and_sock },
    { "select(200 ms)", setup_pipe_and_sock, block_select_timeout, NULL, teardown_pipe_and_sock },
    { "pselect(2 fds, +SIGPROF)", setup_pipe_and_sock, block_pselect, helper_write_pipe,
      teardown_pipe_and_sock },
    { "epoll_wait(2 fds)", setup_epoll, block_epoll_wait, helper_write_pipe, teardown_epoll },
    { "epoll_pwait(+SIGPROF)", setup_epoll, block_epoll_pwait, helper_write_pipe, teardown_epoll },
    { "accept(no client yet)", setup_listener, block_accept, helper_connect, teardown_listener },
    { "write(1 MiB, full pipe)", setup_pipe, block_big_write, helper_drain_pipe, teardown_pipe },
};

/* ---- uthread to uthread on one vcore: only with the shim ------------------------------------ */

static atomic_int r_inside;
static ssize_t r_rc;
static int r_err;
static char r_byte;

static void *plain_reader(void *arg)
{
    (void)arg;
    atomic_store(&r_inside, 1);
    ERR = 0;
    r_rc = read(pfd[0], &r_byte, 1);
    r_err = ERR;
    return NULL;
}

static void *plain_poller(void *arg)
{
    (void)arg;
    struct pollfd p = { .fd = pfd[0], .events = POLLIN };
    atomic_store(&r_inside, 1);
    ERR = 0;
    r_rc = poll(&p, 1, -1);
    r_err = ERR;
    r_byte = (char)p.revents;
    return NULL;
}

static void *writer_after_nap(void *arg)
{
    (void)arg;
    while (!atomic_load(&r_inside))
        weft_yield();
    usleep(20000);
    CHECK(write(pfd[1], "U", 1) == 1, "write: %s", strerror(ERR));
    return NULL;
}

static void *closer_after_nap(void *arg)
{
    (void)arg;
    while (!atomic_load(&r_inside))
        weft_yield();
    usleep(20000);
    CHECK(close(pfd[0]) == 0, "close: %s", strerror(ERR));
    return NULL;
}

static void *stream_sender(void *arg)
{
    (void)arg;
    char *b = malloc(65536);
    CHECK(b != NULL, "malloc");
    size_t sent = 0;
    while (sent < 4 * BIG) {
        size_t n = 65536;
        for (size_t i = 0; i < n; i++)
            b[i] = (char)((sent + i) * 13);
        ssize_t w = send(sfd[0], b, n, MSG_NOSIGNAL);
        CHECK(w == (ssize_t)n, "send returned %zd (%s)", w, strerror(ERR));
        sent += n;
    }
    free(b);
    CHECK(shutdown(sfd[0], SHUT_WR) == 0, "shutdown");
    return NULL;
}

static void *stream_receiver(void *arg)
{
    (void)arg;
    char *b = malloc(10000);
    CHECK(b != NULL, "malloc");
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(sfd[1], b, 10000, 0);
        CHECK(n >= 0, "recv: %s", strerror(ERR));
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            CHECK(b[i] == (char)((got + (size_t)i) * 13), "byte %zu", got + (size_t)i);
        got += (size_t)n;
    }
    free(b);
    CHECK(got == 4 * BIG, "received %zu of %u", got, 4 * BIG);
    return NULL;
}

static void check_uthread_pairs(void)
{
    check_phase("plain read woken by a plain write from another uthread");
    setup_pipe();
    atomic_store(&r_inside, 0);
    weft_t r = spawn(plain_reader, NULL);
    weft_t w = spawn(writer_after_nap, NULL);
    join(r);
    join(w);
    CHECK(r_rc == 1 && r_byte == 'U', "read returned %zd (%s)", r_rc, strerror(r_err));
    teardown_pipe();

    check_phase("plain poll woken by a plain write from another uthread");
    setup_pipe();
    atomic_store(&r_inside, 0);
    r = spawn(plain_poller, NULL);
    w = spawn(writer_after_nap, NULL);
    join(r);
    join(w);
    CHECK(r_rc == 1 && (r_byte & POLLIN), "poll returned %zd revents %#x (%s)", r_rc,
          (unsigned)(unsigned char)r_byte, strerror(r_err));
    teardown_pipe();

    check_phase("close() wakes a parked plain read() with EBADF");
    setup_pipe();
    atomic_store(&r_inside, 0);
    r = spawn(plain_reader, NULL);
    w = spawn(closer_after_nap, NULL);
    join(r);
    join(w);
    CHECK(r_rc == -1 && r_err == EBADF, "parked read after close(): %zd errno %d (%s)", r_rc,
          r_err, strerror(r_err));
    close(pfd[1]);

    check_phase("4 MiB over a socketpair, plain send/recv, one vcore");
    setup_sockpair();
    weft_t s = spawn(stream_sender, NULL);
    weft_t rc = spawn(stream_receiver, NULL);
    join(s);
    join(rc);
    teardown_sockpair();
}

/* ---- plain calls from main ------------------------------------------------------------------ */

static void check_main_plain(void)
{
    check_phase("plain calls from main");
    setup_pipe();
    CHECK(write(pfd[1], "m", 1) == 1, "write");
    char c;
    CHECK(read(pfd[0], &c, 1) == 1 && c == 'm', "read");
    struct pollfd p = { .fd = pfd[0], .events = POLLIN };
    uint64_t t0 = weft_now_ns();
    CHECK(poll(&p, 1, 30) == 0, "poll timeout");
    CHECK(weft_now_ns() - t0 >= MS(29), "poll returned early");
    t0 = weft_now_ns();
    CHECK(usleep(20000) == 0, "usleep");
    CHECK(weft_now_ns() - t0 >= MS(20), "usleep returned early");
    CHECK(close(pfd[0]) == 0 && close(pfd[1]) == 0, "close");
    CHECK(close(pfd[0]) == -1 && ERR == EBADF, "second close");
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "expect-overlap") != 0 &&
                      strcmp(argv[1], "expect-no-overlap") != 0)) {
        fprintf(stderr, "usage: %s expect-overlap|expect-no-overlap\n", argv[0]);
        return 2;
    }
    expect_overlap = strcmp(argv[1], "expect-overlap") == 0;
    check_watchdog(WATCHDOG_SECS);
    signal(SIGPIPE, SIG_IGN);
    const char *pre = getenv("LD_PRELOAD");
    fprintf(stderr, "shim_prog: %s, LD_PRELOAD=%s\n", argv[1], pre ? pre : "(unset)");
    check_phase("init");
    struct weft_config cfg = { .vcores = 1 };
    CHECK_RC(weft_init(&cfg), 0);
    CHECK(weft_num_vcores() == 1, "%d vcores", weft_num_vcores());
    check_main_plain();
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        run_probe(&probes[i]);
    if (expect_overlap)
        check_uthread_pairs();
    check_main_plain();
    fprintf(stderr, "shim_prog: ok (%s)\n", argv[1]);
    weft_shutdown();
    return 0;
}
