/*
 * io_poll — weft_poll() and weft_epoll_wait(): waiting on several
 * descriptors parks the uthread, not its vcore.
 *
 *  1. a poll on 8 pipes returns exactly the one another uthread (on the
 *     same vcore at WEFT_VCORES=1) writes to, for each of the 8;
 *  2. timeouts: 0 ready after the timeout (not before, not much after);
 *     a timeout of 0 just looks; no descriptors at all sleeps;
 *  3. a closed descriptor in the set is POLLNVAL at once; one closed
 *     (weft_close) while the poll waits wakes it with POLLNVAL;
 *  4. POLLOUT on a full pipe arrives when a reader drains it;
 *  5. 50 uthreads poll the same pipes: one byte wakes every one of them;
 *  6. weft_epoll_wait on the application's own epoll instance (level- and
 *     edge-triggered registrations), its errors (EBADF, EINVAL), timeout;
 *  7. an event loop per uthread: 8 loops, each in weft_epoll_wait on its
 *     own instance, more than the vcores; every request is answered;
 *  8. a descriptor weft does not watch (a pipe on descriptor 0) makes the
 *     wait run on a helper: still parks, still sees the byte;
 *  9. a regular file is always ready; a kernel thread (main) polls as
 *     ppoll(2) does; the I/O deadline ends a wait with ETIMEDOUT;
 * 10. races: a poller on two pipes against two writers and a closer, many
 *     rounds, no wake-up lost (under ASan: no touch of a returned poll's
 *     stack).
 */
#include <sys/epoll.h>
#include <sys/stat.h>

#include "iocheck.h"

#define NP 8
static int pp[NP][2];
static atomic_int target;

static void *write_one(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(20)); /* the poller parks first */
    int k = atomic_load(&target);
    CHECK(weft_write(pp[k][1], "x", 1) == 1, "write %d", k);
    return NULL;
}

static void drain(int fd)
{
    char buf[4096];
    while (weft_poll_fd(fd, POLLIN, 0) > 0 && weft_read(fd, buf, sizeof buf) > 0)
        ;
}

static void *case_one_of_many(void *arg)
{
    (void)arg;
    check_phase("one of many");
    for (int i = 0; i < NP; i++)
        CHECK(pipe(pp[i]) == 0, "pipe");
    for (int k = 0; k < NP; k++) {
        atomic_store(&target, k);
        weft_t w = spawn(write_one, NULL);
        struct pollfd p[NP];
        for (int i = 0; i < NP; i++)
            p[i] = (struct pollfd){ .fd = pp[i][0], .events = POLLIN, .revents = -1 };
        int r = weft_poll(p, NP, (int64_t)MS(5000));
        CHECK(r == 1, "poll returned %d (%s), want 1", r, io_errname(IOERR));
        for (int i = 0; i < NP; i++)
            CHECK(p[i].revents == (i == k ? POLLIN : 0), "pipe %d revents %#x (target %d)", i,
                  p[i].revents, k);
        join(w);
        drain(pp[k][0]);
    }
    io_check_poller();
    return (void *)1;
}

static void *case_timeouts(void *arg)
{
    (void)arg;
    check_phase("timeouts");
    struct pollfd p[3];
    for (int i = 0; i < 3; i++)
        p[i] = (struct pollfd){ .fd = pp[i][0], .events = POLLIN };
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_poll(p, 3, (int64_t)MS(50)), 0);
    uint64_t dt = weft_now_ns() - t0;
    CHECK(dt >= MS(50) && dt < MS(50) + LATE_TOL_NS, "50 ms poll took %llu ns", (unsigned long long)dt);
    for (int i = 0; i < 3; i++)
        CHECK(p[i].revents == 0, "revents %#x after a timeout", p[i].revents);
    t0 = weft_now_ns();
    CHECK_RC(weft_poll(p, 3, 0), 0);
    CHECK(weft_now_ns() - t0 < LATE_TOL_NS, "a zero timeout waited");
    t0 = weft_now_ns();
    CHECK_RC(weft_poll(NULL, 0, (int64_t)MS(30)), 0);
    CHECK(weft_now_ns() - t0 >= MS(30), "poll(NULL, 0, 30 ms) returned early");
    /* negative descriptors are ignored, as poll(2) does */
    struct pollfd neg = { .fd = -1, .events = POLLIN, .revents = 7 };
    CHECK_RC(weft_poll(&neg, 1, (int64_t)MS(10)), 0);
    CHECK(neg.revents == 0, "revents of fd -1: %#x", neg.revents);
    return (void *)1;
}

static int closing_fd;
static void *close_later(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(20));
    CHECK(weft_close(closing_fd) == 0, "close");
    return NULL;
}

static void *case_closed(void *arg)
{
    (void)arg;
    check_phase("closed descriptors");
    int q[2];
    CHECK(pipe(q) == 0, "pipe");
    CHECK(weft_close(q[1]) == 0, "close");
    struct pollfd p[2] = { { .fd = pp[0][0], .events = POLLIN }, { .fd = q[1], .events = POLLIN } };
    CHECK_RC(weft_poll(p, 2, (int64_t)MS(3000)), 1);
    CHECK(p[1].revents == POLLNVAL && p[0].revents == 0, "revents %#x %#x", p[0].revents, p[1].revents);
    /* a descriptor closed while the poll waits */
    CHECK(pipe(q) == 0, "pipe");
    closing_fd = q[0];
    weft_t c = spawn(close_later, NULL);
    struct pollfd p2[2] = { { .fd = pp[1][0], .events = POLLIN }, { .fd = q[0], .events = POLLIN } };
    uint64_t t0 = weft_now_ns();
    int r = weft_poll(p2, 2, (int64_t)MS(5000));
    CHECK(r == 1 && p2[1].revents == POLLNVAL, "poll returned %d revents %#x", r, p2[1].revents);
    CHECK(weft_now_ns() - t0 < MS(4000), "the close did not wake the poll");
    join(c);
    weft_close(q[1]);
    return (void *)1;
}

static int fullw[2];
static void *drain_later(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(20));
    char buf[65536];
    CHECK(weft_read(fullw[0], buf, sizeof buf) > 0, "read");
    return NULL;
}

static void *case_pollout(void *arg)
{
    (void)arg;
    check_phase("POLLOUT");
    CHECK(pipe(fullw) == 0, "pipe");
    CHECK(fcntl(fullw[1], F_SETFL, O_NONBLOCK) == 0, "nonblock");
    char buf[4096] = { 0 };
    while (write(fullw[1], buf, sizeof buf) > 0)
        ;
    struct pollfd p[2] = { { .fd = pp[2][0], .events = POLLIN }, { .fd = fullw[1], .events = POLLOUT } };
    CHECK_RC(weft_poll(p, 2, 0), 0);
    weft_t d = spawn(drain_later, NULL);
    CHECK_RC(weft_poll(p, 2, (int64_t)MS(5000)), 1);
    CHECK(p[1].revents == POLLOUT && p[0].revents == 0, "revents %#x %#x", p[0].revents, p[1].revents);
    join(d);
    weft_close(fullw[0]);
    weft_close(fullw[1]);
    return (void *)1;
}

#define NPOLLERS 50
static atomic_int pollers_in, pollers_woke;
static void *many_poller(void *arg)
{
    (void)arg;
    struct pollfd p[3] = { { .fd = pp[3][0], .events = POLLIN },
                           { .fd = pp[4][0], .events = POLLIN },
                           { .fd = pp[5][0], .events = POLLIN } };
    atomic_fetch_add(&pollers_in, 1);
    int r = weft_poll(p, 3, (int64_t)MS(10000));
    CHECK(r == 1 && p[1].revents == POLLIN, "poll returned %d, revents %#x", r, p[1].revents);
    atomic_fetch_add(&pollers_woke, 1);
    return NULL;
}

static void *case_many_pollers(void *arg)
{
    (void)arg;
    check_phase("many pollers");
    weft_t t[NPOLLERS];
    for (int i = 0; i < NPOLLERS; i++)
        t[i] = spawn(many_poller, NULL);
    WAIT_UNTIL(atomic_load(&pollers_in) == NPOLLERS, "pollers started");
    weft_sleep_ns(MS(20));
    CHECK(atomic_load(&pollers_woke) == 0, "a poller woke with nothing ready");
    CHECK(weft_write(pp[4][1], "y", 1) == 1, "write");
    for (int i = 0; i < NPOLLERS; i++)
        join(t[i]);
    CHECK(atomic_load(&pollers_woke) == NPOLLERS, "woke %d of %d", atomic_load(&pollers_woke), NPOLLERS);
    drain(pp[4][0]);
    return (void *)1;
}

/* ---- epoll ---------------------------------------------------------------------------- */

static int sp[3][2];
static void *send_later(void *arg)
{
    weft_sleep_ns(MS(20));
    CHECK(weft_write(sp[(intptr_t)arg][1], "z", 1) == 1, "write");
    return NULL;
}

static void *case_epoll(void *arg)
{
    (void)arg;
    check_phase("epoll");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");
    for (int i = 0; i < 3; i++) {
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp[i]) == 0, "socketpair");
        struct epoll_event ev = { .events = EPOLLIN | (i == 2 ? EPOLLET : 0), .data.u32 = 100 + i };
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, sp[i][0], &ev) == 0, "epoll_ctl");
    }
    struct epoll_event out[8];
    CHECK_RC(weft_epoll_wait(ep, out, 8, 0), 0);
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_epoll_wait(ep, out, 8, (int64_t)MS(40)), 0);
    CHECK(weft_now_ns() - t0 >= MS(40), "epoll timeout early");
    for (intptr_t k = 0; k < 3; k++) {
        weft_t s = spawn(send_later, (void *)k);
        int r = weft_epoll_wait(ep, out, 8, (int64_t)MS(5000));
        CHECK(r == 1 && out[0].data.u32 == 100 + k && (out[0].events & EPOLLIN),
              "epoll_wait returned %d (data %u), want socket %d", r, out[0].data.u32, (int)k);
        join(s);
        char c;
        CHECK(weft_read(sp[k][0], &c, 1) == 1, "read");
    }
    CHECK_IO(weft_epoll_wait(ep, out, 0, 0), -1, EINVAL);
    CHECK_IO(weft_epoll_wait(pp[0][0], out, 8, 0), -1, EINVAL); /* not an epoll instance */
    int dead = epoll_create1(0);
    weft_close(dead);
    CHECK_IO(weft_epoll_wait(dead, out, 8, (int64_t)MS(100)), -1, EBADF);
    for (int i = 0; i < 3; i++) {
        weft_close(sp[i][0]);
        weft_close(sp[i][1]);
    }
    weft_close(ep);
    return (void *)1;
}

/* An event loop per uthread: each owns an epoll instance with its end of a
 * socketpair and answers each byte with the byte + 1 until it reads 0. */
#define NLOOPS 8
#define NREQ 50
static int lp[NLOOPS][2];
static void *event_loop(void *arg)
{
    intptr_t i = (intptr_t)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0, "epoll_create1");
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = lp[i][0] };
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lp[i][0], &ev) == 0, "epoll_ctl");
    int served = 0;
    for (;;) {
        struct epoll_event out[4];
        int r = weft_epoll_wait(ep, out, 4, (int64_t)MS(20000));
        CHECK(r == 1 && out[0].data.fd == lp[i][0], "loop %d: epoll_wait %d", (int)i, r);
        unsigned char c;
        ssize_t n = weft_read(lp[i][0], &c, 1);
        CHECK(n >= 0, "loop read");
        if (n == 0 || c == 0)
            break;
        c++;
        CHECK(weft_write(lp[i][0], &c, 1) == 1, "loop write");
        served++;
    }
    weft_close(ep);
    return (void *)(intptr_t)served;
}

static void *case_loops(void *arg)
{
    (void)arg;
    check_phase("event loops");
    weft_t t[NLOOPS];
    for (intptr_t i = 0; i < NLOOPS; i++) {
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, lp[i]) == 0, "socketpair");
        t[i] = spawn(event_loop, (void *)i);
    }
    uint32_t seed = 7;
    for (int q = 0; q < NREQ * NLOOPS; q++) {
        int i = (int)(check_rand(&seed) % NLOOPS);
        unsigned char c = (unsigned char)(1 + q % 200), back;
        CHECK(weft_write(lp[i][1], &c, 1) == 1, "request");
        CHECK(weft_read(lp[i][1], &back, 1) == 1 && back == c + 1, "reply %u to %u", back, c);
    }
    for (int i = 0; i < NLOOPS; i++) {
        unsigned char z = 0;
        CHECK(weft_write(lp[i][1], &z, 1) == 1, "stop");
        join(t[i]);
        weft_close(lp[i][0]);
        weft_close(lp[i][1]);
    }
    return (void *)1;
}

/* ---- descriptors weft does not watch, files, kernel threads, deadlines ------------------ */

static int in_pipe[2];
static void *feed_stdin(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(30));
    CHECK(write(in_pipe[1], "s", 1) == 1, "write");
    return NULL;
}

static void *case_unwatched(void *arg)
{
    (void)arg;
    check_phase("descriptor 0 (offloaded)");
    CHECK(pipe(in_pipe) == 0, "pipe");
    int saved = dup(0);
    CHECK(saved >= 0 && dup2(in_pipe[0], 0) == 0, "dup2");
    weft_t f = spawn(feed_stdin, NULL);
    struct pollfd p[2] = { { .fd = 0, .events = POLLIN }, { .fd = pp[6][0], .events = POLLIN } };
    int r = weft_poll(p, 2, (int64_t)MS(5000));
    CHECK(r == 1 && p[0].revents == POLLIN, "poll returned %d revents %#x", r, p[0].revents);
    join(f);
    char c;
    CHECK(read(0, &c, 1) == 1 && c == 's', "read stdin");
    CHECK(dup2(saved, 0) == 0, "restore stdin");
    close(saved);
    close(in_pipe[0]);
    close(in_pipe[1]);

    check_phase("regular file");
    char path[] = "/tmp/weft-io-poll-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    unlink(path);
    struct pollfd pf[2] = { { .fd = pp[6][0], .events = POLLIN }, { .fd = fd, .events = POLLIN | POLLOUT } };
    CHECK_RC(weft_poll(pf, 2, (int64_t)MS(5000)), 1);
    CHECK(pf[1].revents == (POLLIN | POLLOUT), "file revents %#x", pf[1].revents);
    weft_close(fd);

    check_phase("I/O deadline");
    CHECK(weft_io_set_deadline(weft_now_ns() + MS(30)) == 0, "deadline");
    struct pollfd pd = { .fd = pp[6][0], .events = POLLIN };
    CHECK_IO(weft_poll(&pd, 1, -1), -1, ETIMEDOUT);
    CHECK(weft_io_set_deadline(WEFT_FOREVER) == 0, "deadline");
    return (void *)1;
}

/* ---- races ---------------------------------------------------------------------------------- */

#define ROUNDS SCALE(2000, 300)
static int ra[2], rb[2];
static atomic_int round_no, consumed;

static void *race_writer(void *arg)
{
    int *p = arg;
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        WAIT_UNTIL(atomic_load(&consumed) >= i, "poller consumed");
        if (check_rand(&seed) % 2)
            weft_yield();
        CHECK(weft_write(p[1], "r", 1) == 1, "race write");
        WAIT_UNTIL(atomic_load(&consumed) > i, "poller consumed");
    }
    return NULL;
}

static void *case_races(void *arg)
{
    (void)arg;
    check_phase("races");
    CHECK(pipe(ra) == 0 && pipe(rb) == 0, "pipe");
    weft_t wa = spawn(race_writer, ra), wb = spawn(race_writer, rb);
    for (int i = 0; i < ROUNDS; i++) {
        int got = 0;
        while (got < 2) { /* both writers write once per round */
            struct pollfd p[2] = { { .fd = ra[0], .events = POLLIN }, { .fd = rb[0], .events = POLLIN } };
            int r = weft_poll(p, 2, (int64_t)MS(10000));
            CHECK(r >= 1, "round %d: poll %d", i, r);
            char c;
            for (int k = 0; k < 2; k++)
                if (p[k].revents & POLLIN)
                    got += weft_read(k ? rb[0] : ra[0], &c, 1) == 1;
        }
        atomic_store(&consumed, i + 1);
    }
    join(wa);
    join(wb);
    for (int k = 0; k < 2; k++) {
        weft_close(ra[k]);
        weft_close(rb[k]);
    }
    return (void *)1;
}

int main(void)
{
    io_test_start();
    check_watchdog(WATCHDOG_SECS);
    CHECK(in_uthread(case_one_of_many, NULL) == (void *)1, "one of many");
    CHECK(in_uthread(case_timeouts, NULL) == (void *)1, "timeouts");
    CHECK(in_uthread(case_closed, NULL) == (void *)1, "closed");
    CHECK(in_uthread(case_pollout, NULL) == (void *)1, "pollout");
    CHECK(in_uthread(case_many_pollers, NULL) == (void *)1, "many pollers");
    CHECK(in_uthread(case_epoll, NULL) == (void *)1, "epoll");
    CHECK(in_uthread(case_loops, NULL) == (void *)1, "loops");
    CHECK(in_uthread(case_unwatched, NULL) == (void *)1, "unwatched");
    CHECK(in_uthread(case_races, NULL) == (void *)1, "races");

    check_phase("from main");
    struct pollfd p[2] = { { .fd = pp[7][0], .events = POLLIN }, { .fd = pp[7][1], .events = POLLOUT } };
    CHECK_RC(weft_poll(p, 2, (int64_t)MS(1000)), 1);
    CHECK(p[1].revents == POLLOUT && p[0].revents == 0, "main revents %#x %#x", p[0].revents, p[1].revents);
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_poll(p, 1, (int64_t)MS(20)), 0);
    CHECK(weft_now_ns() - t0 >= MS(20), "main's poll returned early");
    int ep = epoll_create1(0);
    struct epoll_event out;
    CHECK_RC(weft_epoll_wait(ep, &out, 1, (int64_t)MS(10)), 0);
    close(ep);
    weft_shutdown();
    printf("io_poll: ok\n");
    return 0;
}
