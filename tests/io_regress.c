/*
 * io_regress — regressions from the review of the timer and I/O layer, one
 * case per finding:
 *  1. a weft_poll_fd(POLLIN) waiter and a reader (or a second poll_fd) on the
 *     same descriptor both wake on one edge (poll_fd used to eat the single
 *     wake-up of the read direction and never pass it on);
 *  2. weft_alarm_stop() never returns while the alarm's callback still runs,
 *     also for a periodic alarm that re-arms itself and is run by another
 *     vcore's duty (stop returned early, so the alarm could be freed under
 *     its running callback);
 *  3. MSG_WAITALL collects every byte, as a blocking recv does;
 *  4. weft_connect to a Unix listener whose backlog is full waits (until the
 *     I/O deadline) instead of failing with EAGAIN;
 *  5. weft_poll_fd(-1, ...) sleeps its timeout and returns 0, as poll(2).
 */
#include "iocheck.h"

/* ---- 1. poll_fd and a reader share an edge ------------------------------------------------ */

static int pfd[2];
static atomic_int woke_poll, woke_read, with_reader;

static void *poller(void *arg)
{
    (void)arg;
    int r = weft_poll_fd(pfd[0], POLLIN, (int64_t)MS(with_reader ? 500 : 3000));
    /* Beside a reader, the reader may take the byte before this poller
     * looks again (then it waits out its timeout); alone, it must see it. */
    CHECK(with_reader ? r >= 0 : r > 0 && (r & POLLIN), "weft_poll_fd returned %d", r);
    atomic_fetch_add(&woke_poll, r > 0);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    CHECK(weft_io_set_deadline(weft_now_ns() + MS(3000)) == 0, "deadline");
    char c;
    ssize_t n = weft_read(pfd[0], &c, 1);
    CHECK(n == 1, "read returned %zd (%s) with a byte in the pipe", n, io_errname(IOERR));
    atomic_fetch_add(&woke_read, 1);
    return NULL;
}

static void check_poll_and_read(int second_is_reader)
{
    check_phase(second_is_reader ? "poll_fd then read" : "two poll_fd waiters");
    CHECK(pipe(pfd) == 0, "pipe");
    atomic_store(&woke_poll, 0);
    atomic_store(&woke_read, 0);
    atomic_store(&with_reader, second_is_reader);
    weft_t a = spawn(poller, NULL);
    weft_sleep_ns(MS(20)); /* the poller queues first */
    weft_t b = spawn(second_is_reader ? reader : poller, NULL);
    weft_sleep_ns(MS(20));
    CHECK(write(pfd[1], "x", 1) == 1, "write");
    join(a);
    join(b);
    if (second_is_reader)
        CHECK(atomic_load(&woke_read) == 1, "the reader did not get the byte");
    else
        CHECK(atomic_load(&woke_poll) == 2, "only %d of 2 poll_fd waiters woke",
              atomic_load(&woke_poll));
    CHECK(weft_close(pfd[0]) == 0 && close(pfd[1]) == 0, "close");
}

/* ---- 2. stop waits for a running callback --------------------------------------------------- */

struct periodic {
    struct weft_alarm al;
    atomic_int in_cb;
    atomic_long fires;
};

static void periodic_cb(struct weft_alarm *al)
{
    struct periodic *p = (struct periodic *)al;
    atomic_store(&p->in_cb, 1);
    for (volatile int i = 0; i < 200; i++) /* long enough to be caught running */
        ;
    atomic_fetch_add(&p->fires, 1);
    weft_alarm_set_rel(al, 0);
    weft_alarm_start(al); /* periodic: runs again when this callback returns */
    atomic_store(&p->in_cb, 0);
}

static void *stopper(void *arg)
{
    (void)arg;
    int rounds = SCALE(2000, 200), early = 0;
    long fires = 0;
    for (int i = 0; i < rounds; i++) {
        struct periodic *p = calloc(1, sizeof *p);
        CHECK(p != NULL, "calloc");
        weft_alarm_init(&p->al, periodic_cb);
        CHECK(weft_alarm_set_rel(&p->al, 0) == 0 && weft_alarm_start(&p->al) == 0, "start");
        for (int k = 0; k < 20; k++)
            weft_yield();
        weft_alarm_stop(&p->al);
        if (atomic_load(&p->in_cb))
            early++;
        long f = atomic_load(&p->fires);
        for (int k = 0; k < 50; k++) /* nothing may run after stop returned */
            weft_yield();
        CHECK(atomic_load(&p->fires) == f, "the alarm fired %ld times after stop returned",
              atomic_load(&p->fires) - f);
        fires += f;
        free(p);
    }
    CHECK(early == 0, "weft_alarm_stop returned %d times while the callback still ran", early);
    CHECK(fires > 0, "the periodic alarms never fired");
    return NULL;
}

/* ---- 3 to 5 ---------------------------------------------------------------------------------- */

static void *late_sender(void *arg)
{
    weft_sleep_ns(MS(20));
    CHECK(weft_send(*(int *)arg, "def", 3, MSG_NOSIGNAL) == 3, "send");
    return NULL;
}

static void *posix_rows(void *arg)
{
    (void)arg;
    sub_phase("MSG_WAITALL");
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    CHECK(write(sv[1], "abc", 3) == 3, "write");
    char buf[8] = { 0 };
    /* the rest arrives after the receiver has parked with half of it */
    weft_t late = spawn(late_sender, &sv[1]);
    CHECK_IO(weft_recv(sv[0], buf, 6, MSG_WAITALL), 6, 0);
    join(late);
    CHECK(memcmp(buf, "abcdef", 6) == 0, "got \"%.6s\"", buf);
    CHECK(close(sv[1]) == 0, "close");
    CHECK_IO(weft_recv(sv[0], buf, 6, MSG_WAITALL), 0, 0); /* EOF */
    CHECK(weft_close(sv[0]) == 0, "close");

    sub_phase("AF_UNIX connect, backlog full");
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = { .sun_family = AF_UNIX };
    snprintf(un.sun_path + 1, sizeof un.sun_path - 1, "weft-io-regress-%d", (int)getpid());
    socklen_t ulen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                 strlen(un.sun_path + 1));
    CHECK(bind(l, (struct sockaddr *)&un, ulen) == 0 && listen(l, 0) == 0, "listen");
    int c[4];
    int connected = 0, timed_out = 0;
    for (int i = 0; i < 4; i++) {
        c[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        CHECK(weft_io_set_deadline(weft_now_ns() + MS(100)) == 0, "deadline");
        uint64_t t0 = weft_now_ns();
        int r = weft_connect(c[i], (struct sockaddr *)&un, ulen);
        int e = IOERR;
        if (r == 0) {
            connected++;
        } else {
            CHECK(e == ETIMEDOUT, "connect #%d: %s, not a wait until the deadline", i,
                  io_errname(e));
            CHECK(weft_now_ns() - t0 >= MS(90), "connect #%d gave up after %.1f ms", i,
                  ms_of(weft_now_ns() - t0));
            timed_out++;
        }
    }
    CHECK(weft_io_set_deadline(WEFT_FOREVER) == 0, "deadline");
    CHECK(connected >= 1 && timed_out >= 1, "%d connected, %d timed out", connected, timed_out);
    for (int i = 0; i < 4; i++)
        weft_close(c[i]);
    weft_close(l);

    sub_phase("poll_fd(-1)");
    uint64_t t0 = weft_now_ns();
    CHECK_IO(weft_poll_fd(-1, POLLIN, (int64_t)MS(50)), 0, 0);
    CHECK(weft_now_ns() - t0 >= MS(50), "poll_fd(-1) returned after %.1f ms",
          ms_of(weft_now_ns() - t0));
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    io_test_start();
    check_poll_and_read(0);
    check_poll_and_read(1);
    check_phase("alarm stop vs running callback");
    in_uthread(stopper, NULL);
    check_phase("POSIX rows");
    CHECK(in_uthread(posix_rows, NULL) == (void *)1, "posix rows");
    fprintf(stderr, "io_regress: ok (%d vcores, %s)\n", weft_num_vcores(), weft_poller_name());
    return 0;
}
