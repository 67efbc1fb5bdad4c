/*
 * io_errors — the error paths and edge semantics of <weft/io.h>.
 *
 * Proves:
 *  - weft_close() of a descriptor wakes a uthread parked in weft_read, one
 *    parked in weft_write on a full socket, and one in weft_poll_fd, each
 *    with -1/EBADF (also all three at once, and with the closer in main);
 *    the descriptor number, reused afterwards for a new pipe, works normally
 *    (no stale state).
 *  - a peer that resets the connection (SO_LINGER {1,0}, close) makes a
 *    parked reader and a later reader fail with ECONNRESET, a parked writer
 *    stop (partial count, or EPIPE/ECONNRESET), later writes EPIPE/ECONNRESET
 *    — never a hang.
 *  - weft_connect() to a port nobody listens on is ECONNREFUSED.
 *  - weft_io_set_deadline(): a read with no data fails with ETIMEDOUT after
 *    about the deadline, a past deadline fails at once but still returns
 *    data that is there, a write that fills the socket returns its partial
 *    count at the deadline, accept and poll_fd obey it too, a parked reader
 *    whose data comes before its deadline succeeds; the deadline belongs to
 *    one uthread (others and main see WEFT_FOREVER); top-bit values EINVAL.
 *  - weft_poll_fd(): 0 after the timeout (not before), 0 at once for
 *    timeout 0, exactly the requested ready bits, POLLIN when data arrives
 *    during the wait, POLLHUP/POLLIN on a closed peer, POLLNVAL or EBADF for
 *    a closed descriptor.
 *  - a descriptor already O_NONBLOCK before weft saw it keeps POSIX
 *    non-blocking results: EAGAIN from read/recv/accept, a partial write.
 *  - from main (not a uthread): reads block until a pthread or a uthread
 *    writes, also on a descriptor weft already switched to non-blocking, and
 *    a 1 MiB write completes while a uthread reads it.
 *  - pipes: a 1 MiB write from one uthread completes fully while another
 *    reads it in small chunks, byte-checked, then EOF; a read returns the
 *    bytes that are there without waiting for more.
 *  - weft_sendfile() of a 4 MiB temporary file to a socket with small
 *    buffers, read by another uthread, byte-checked, with an offset pointer
 *    and with the file position.
 */
#define _GNU_SOURCE
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "iocheck.h"

#define WAKE_TOL_NS SCALE(MS(200), MS(2000))
#define BAD_DEADLINE ((uint64_t)1 << 63)

static void make_socketpair(int sp[2], int flags)
{
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0, sp) == 0,
          "socketpair: %s", strerror(IOERR));
}

/* fill_socket() makes fd's send side full: nothing more goes in. */
static void fill_socket(int fd)
{
    static char junk[65536];
    size_t chunk = sizeof junk;
    while (chunk > 0) {
        ssize_t n = weft_send(fd, junk, chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            CHECK(IOERR == EAGAIN || IOERR == EWOULDBLOCK, "fill: %s", strerror(IOERR));
            chunk /= 2;
        }
    }
}

/* ---- waiters woken by weft_close ------------------------------------------------------------ */

enum wait_kind { W_READ, W_WRITE, W_POLL };

struct waiter {
    int fd;
    enum wait_kind kind;
    atomic_int started, done;
    ssize_t rc;
    int err;
    uint64_t ended;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    char *buf = calloc(1, 65536);
    CHECK(buf != NULL, "calloc");
    atomic_store(&w->started, 1);
    IOERR = 0;
    switch (w->kind) {
    case W_READ:
        w->rc = weft_read(w->fd, buf, 65536);
        break;
    case W_WRITE:
        w->rc = weft_write(w->fd, buf, 65536);
        break;
    case W_POLL:
        w->rc = weft_poll_fd(w->fd, POLLIN, -1);
        break;
    }
    w->err = IOERR;
    w->ended = weft_now_ns();
    free(buf);
    atomic_store(&w->done, 1);
    return NULL;
}

static const char *kind_name(enum wait_kind k)
{
    return k == W_READ ? "read" : k == W_WRITE ? "write" : "poll_fd";
}

static void check_woken_ebadf(struct waiter *w, uint64_t closed_at)
{
    if (w->kind == W_WRITE && w->rc > 0) {
        /* Allowed by the contract (a partial count), though the socket was full. */
        CHECK(w->rc < 65536, "parked write returned %zd after close", w->rc);
    } else {
        CHECK(w->rc == -1 && w->err == EBADF, "parked %s woken by close: returned %zd errno %d "
              "(%s), expected -1/EBADF", kind_name(w->kind), w->rc, w->err, io_errname(w->err));
    }
    CHECK(w->ended - closed_at < WAKE_TOL_NS, "parked %s took %.1f ms to wake after the close",
          kind_name(w->kind), ms_of(w->ended - closed_at));
}

/* close_with_waiters() parks the kinds given in mask on one socket, closes
 * it (from the caller: main or a uthread), and checks every waiter. */
static void close_with_waiters(unsigned mask)
{
    int sp[2];
    make_socketpair(sp, 0);
    if (mask & (1u << W_WRITE))
        fill_socket(sp[0]);
    struct waiter ws[3];
    weft_t ts[3];
    int n = 0;
    for (int k = W_READ; k <= W_POLL; k++) {
        if (!(mask & (1u << k)))
            continue;
        memset(&ws[n], 0, sizeof ws[n]);
        ws[n].fd = sp[0];
        ws[n].kind = (enum wait_kind)k;
        ts[n] = spawn(waiter_main, &ws[n]);
        n++;
    }
    for (int i = 0; i < n; i++)
        WAIT_UNTIL(atomic_load(&ws[i].started), "waiter started");
    weft_sleep_ns(MS(30));                       /* let them park */
    for (int i = 0; i < n; i++)
        CHECK(!atomic_load(&ws[i].done), "%s returned %zd (errno %s) before the close",
              kind_name(ws[i].kind), ws[i].rc, io_errname(ws[i].err));
    int fdnum = sp[0];
    uint64_t t0 = weft_now_ns();
    CHECK(weft_close(sp[0]) == 0, "weft_close: %s", strerror(IOERR));
    for (int i = 0; i < n; i++) {
        join(ts[i]);
        check_woken_ebadf(&ws[i], t0);
    }

    /* The number, reused for a new pipe, carries no stale state. */
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(IOERR));
    if (p[0] != fdnum) {
        CHECK(dup2(p[0], fdnum) == fdnum, "dup2: %s", strerror(IOERR));
        close(p[0]);
        p[0] = fdnum;
    }
    struct waiter rd = { .fd = p[0], .kind = W_READ };
    weft_t r = spawn(waiter_main, &rd);
    WAIT_UNTIL(atomic_load(&rd.started), "reader on the reused number started");
    weft_sleep_ns(MS(10));
    CHECK(!atomic_load(&rd.done), "read on a reused, empty descriptor returned %zd (errno %s)",
          rd.rc, io_errname(rd.err));
    CHECK_IO(weft_write(p[1], "hello", 5), 5, 0);
    join(r);
    CHECK(rd.rc == 5, "read on the reused descriptor returned %zd (errno %s)", rd.rc,
          io_errname(rd.err));
    CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0, "close");
    CHECK(weft_close(sp[1]) == 0, "close");
}

static void *close_with_waiters_uthread(void *arg)
{
    close_with_waiters((unsigned)(uintptr_t)arg);
    return (void *)1;
}

static void check_close_wakes(void)
{
    check_phase("close wakes a parked reader (closer in main)");
    close_with_waiters(1u << W_READ);
    io_check_poller();
    check_phase("close wakes a parked writer (closer in main)");
    close_with_waiters(1u << W_WRITE);
    check_phase("close wakes a poll_fd waiter (closer in main)");
    close_with_waiters(1u << W_POLL);
    check_phase("close wakes reader + writer + poller (closer in a uthread)");
    in_uthread(close_with_waiters_uthread, (void *)(uintptr_t)7u);
    CHECK_IO(weft_close(-1), -1, EBADF);
}

/* ---- connection reset -------------------------------------------------------------------------- */

static void reset_socket(int fd)
{
    struct linger lg = { 1, 0 };
    CHECK(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0, "SO_LINGER: %s",
          strerror(IOERR));
    CHECK(weft_close(fd) == 0, "close: %s", strerror(IOERR));
}

static int is_reset_err(int e)
{
    return e == EPIPE || e == ECONNRESET;
}

struct big_writer {
    int fd;
    char *buf;
    size_t n;
    atomic_int started, done;
    ssize_t rc;
    int err;
    uint64_t ended;
};

static void *big_writer_main(void *arg)
{
    struct big_writer *w = arg;
    atomic_store(&w->started, 1);
    IOERR = 0;
    w->rc = weft_write(w->fd, w->buf, w->n);
    w->err = IOERR;
    w->ended = weft_now_ns();
    atomic_store(&w->done, 1);
    return NULL;
}

static void *reset_rows(void *arg)
{
    (void)arg;
    int c, s;

    /* A parked reader. */
    tcp_pair(&c, &s);
    struct waiter rd = { .fd = c, .kind = W_READ };
    weft_t r = spawn(waiter_main, &rd);
    WAIT_UNTIL(atomic_load(&rd.started), "reader started");
    weft_sleep_ns(MS(20));
    uint64_t t0 = weft_now_ns();
    reset_socket(s);
    join(r);
    CHECK(rd.rc == -1 && rd.err == ECONNRESET,
          "parked reader after a reset: %zd errno %d (%s), expected ECONNRESET", rd.rc, rd.err,
          io_errname(rd.err));
    CHECK(rd.ended - t0 < WAKE_TOL_NS, "reset took %.1f ms to wake the reader",
          ms_of(rd.ended - t0));
    IOERR = 0;
    ssize_t w = weft_send(c, "x", 1, MSG_NOSIGNAL);
    int e = IOERR;
    CHECK(w == -1 && is_reset_err(e), "send after a reset: %zd errno %s", w, io_errname(e));
    IOERR = 0;
    w = weft_write(c, "x", 1);        /* SIGPIPE is ignored */
    e = IOERR;
    CHECK(w == -1 && is_reset_err(e), "write after a reset: %zd errno %s", w, io_errname(e));
    CHECK(weft_close(c) == 0, "close");

    /* A reader that comes after the reset. */
    tcp_pair(&c, &s);
    CHECK_IO(weft_write(s, "abc", 3), 3, 0);
    char b[8];
    CHECK_IO(weft_read(c, b, sizeof b), 3, 0);
    reset_socket(s);
    weft_sleep_ns(MS(10));
    CHECK_IO(weft_read(c, b, sizeof b), -1, ECONNRESET);
    CHECK(weft_close(c) == 0, "close");

    /* A writer parked on a full connection. */
    tcp_pair(&c, &s);
    int small = 16384;
    setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    size_t big = 8u << 20;
    char *buf = calloc(1, big);
    CHECK(buf != NULL, "calloc");
    struct big_writer wr = { .fd = c, .buf = buf, .n = big };
    weft_t wt = spawn(big_writer_main, &wr);
    WAIT_UNTIL(atomic_load(&wr.started), "writer started");
    weft_sleep_ns(MS(50));
    CHECK(!atomic_load(&wr.done), "8 MiB write into an unread socket returned %zd", wr.rc);
    t0 = weft_now_ns();
    reset_socket(s);
    join(wt);
    CHECK((wr.rc > 0 && (size_t)wr.rc < big) || (wr.rc == -1 && is_reset_err(wr.err)),
          "parked writer after a reset: %zd errno %s", wr.rc, io_errname(wr.err));
    CHECK(wr.ended - t0 < WAKE_TOL_NS, "reset took %.1f ms to wake the writer",
          ms_of(wr.ended - t0));
    IOERR = 0;
    w = weft_send(c, buf, 1000, MSG_NOSIGNAL);
    e = IOERR;
    CHECK(w == -1 && is_reset_err(e), "send after a reset: %zd errno %s", w, io_errname(e));
    CHECK(weft_close(c) == 0, "close");
    free(buf);
    return (void *)1;
}

static void check_reset(void)
{
    check_phase("peer resets: from main");
    reset_rows(NULL);
    check_phase("peer resets: in a uthread");
    CHECK(in_uthread(reset_rows, NULL) == (void *)1, "reset rows");
}

/* ---- connection refused ------------------------------------------------------------------------ */

static void *refused_rows(void *arg)
{
    (void)arg;
    struct sockaddr_in a;
    int l = tcp_listener(&a, 1);
    CHECK(close(l) == 0, "close");            /* the port is now closed */
    int c = tcp_socket();
    CHECK_IO(weft_connect(c, (struct sockaddr *)&a, sizeof a), -1, ECONNREFUSED);
    CHECK(weft_close(c) == 0, "close");
    return (void *)1;
}

/* ---- I/O deadlines ----------------------------------------------------------------------------- */

static atomic_int other_saw_forever;

static void *other_deadline(void *arg)
{
    (void)arg;
    atomic_store(&other_saw_forever, weft_io_deadline() == WEFT_FOREVER);
    return NULL;
}

static void check_timed_out(const char *what, uint64_t dl, uint64_t now)
{
    CHECK(now >= dl, "%s: ETIMEDOUT %.2f ms before the deadline", what, ms_of(dl - now));
    CHECK(now - dl < LATE_TOL_NS, "%s: ETIMEDOUT %.1f ms after the deadline", what,
          ms_of(now - dl));
}

struct delayed {
    int fd;
    uint64_t delay;
    const char *data;
};

static void *delayed_write(void *arg)
{
    struct delayed *d = arg;
    weft_sleep_ns(d->delay);
    ssize_t n = weft_write(d->fd, d->data, strlen(d->data));
    CHECK(n == (ssize_t)strlen(d->data), "delayed write: %zd %s", n, strerror(IOERR));
    return NULL;
}

static void *deadline_rows(void *arg)
{
    (void)arg;
    int in_u = weft_self() != NULL;
    CHECK(weft_io_deadline() == WEFT_FOREVER, "default deadline is not WEFT_FOREVER");
    CHECK_RC(weft_io_set_deadline(BAD_DEADLINE), EINVAL);
    CHECK_RC(weft_io_set_deadline((uint64_t)-5), EINVAL);
    CHECK(weft_io_deadline() == WEFT_FOREVER, "a rejected deadline changed the deadline");

    int sp[2];
    make_socketpair(sp, 0);
    char b[64];

    /* Read with no data: ETIMEDOUT at the deadline. */
    sub_phase("deadline: read with no data");
    uint64_t dl = weft_now_ns() + MS(100);
    CHECK_RC(weft_io_set_deadline(dl), 0);
    CHECK(weft_io_deadline() == dl, "weft_io_deadline() is not what was set");
    if (in_u) {
        /* The deadline is this uthread's own. */
        in_uthread(other_deadline, NULL);
        CHECK(atomic_load(&other_saw_forever), "another uthread saw this uthread's deadline");
    }
    CHECK_IO(weft_read(sp[0], b, sizeof b), -1, ETIMEDOUT);
    check_timed_out("read", dl, weft_now_ns());

    /* Past deadline: at once, but data that is there is returned. */
    sub_phase("deadline: past deadline");
    uint64_t t0 = weft_now_ns();
    CHECK_IO(weft_read(sp[0], b, sizeof b), -1, ETIMEDOUT);
    CHECK_RC(weft_io_set_deadline(1), 0);
    CHECK_IO(weft_recv(sp[0], b, sizeof b, 0), -1, ETIMEDOUT);
    CHECK_IO(weft_poll_fd(sp[0], POLLIN, -1), -1, ETIMEDOUT);
    CHECK(weft_now_ns() - t0 < LATE_TOL_NS, "past deadline waited %.1f ms",
          ms_of(weft_now_ns() - t0));
    CHECK_RC(weft_io_set_deadline(WEFT_FOREVER), 0);
    CHECK_IO(weft_write(sp[1], "data", 4), 4, 0);
    CHECK_RC(weft_io_set_deadline(1), 0);
    CHECK(weft_poll_fd(sp[0], POLLIN, -1) == POLLIN, "poll_fd with data and a past deadline");
    CHECK_IO(weft_read(sp[0], b, sizeof b), 4, 0);

    /* A parked reader whose data comes before the deadline succeeds. */
    sub_phase("deadline: data before the deadline");
    CHECK_RC(weft_io_set_deadline(weft_now_ns() + SCALE(MS(2000), MS(10000))), 0);
    struct delayed d = { sp[1], MS(30), "late" };
    weft_t dw = spawn(delayed_write, &d);
    CHECK_IO(weft_read(sp[0], b, sizeof b), 4, 0);
    join(dw);

    /* A write that fills the socket returns its partial count at the deadline. */
    sub_phase("deadline: write into a full socket");
    size_t big = 8u << 20;
    char *buf = calloc(1, big);
    CHECK(buf != NULL, "calloc");
    dl = weft_now_ns() + MS(100);
    CHECK_RC(weft_io_set_deadline(dl), 0);
    ssize_t w = weft_write(sp[1], buf, big);
    int e = IOERR;
    uint64_t now = weft_now_ns();
    CHECK(w > 0 && (size_t)w < big, "write into a full socket with a deadline: %zd (errno %s), "
          "expected a partial count", w, io_errname(e));
    check_timed_out("write", dl, now);
    CHECK_IO(weft_write(sp[1], buf, big), -1, ETIMEDOUT);
    free(buf);

    /* accept obeys it too. */
    sub_phase("deadline: accept");
    struct sockaddr_in a;
    int l = tcp_listener(&a, 1);
    dl = weft_now_ns() + MS(50);
    CHECK_RC(weft_io_set_deadline(dl), 0);
    CHECK_IO(weft_accept(l, NULL, NULL), -1, ETIMEDOUT);
    check_timed_out("accept", dl, weft_now_ns());
    /* ... and poll_fd's own timeout still wins when it is earlier. */
    sub_phase("deadline: poll_fd timeout before the deadline");
    CHECK_RC(weft_io_set_deadline(weft_now_ns() + MS(5000)), 0);
    CHECK(weft_poll_fd(l, POLLIN, MS(20)) == 0, "poll_fd timeout before the deadline");

    CHECK_RC(weft_io_set_deadline(WEFT_FOREVER), 0);
    CHECK(weft_io_deadline() == WEFT_FOREVER, "deadline not cleared");
    CHECK(weft_close(l) == 0 && weft_close(sp[0]) == 0 && weft_close(sp[1]) == 0, "close");
    return (void *)1;
}

/* ---- weft_poll_fd ------------------------------------------------------------------------------- */

static void *poll_rows(void *arg)
{
    (void)arg;
    int sp[2];
    make_socketpair(sp, 0);
    uint64_t t0 = weft_now_ns();
    CHECK_IO(weft_poll_fd(sp[0], POLLIN, 0), 0, 0);
    CHECK(weft_now_ns() - t0 < LATE_TOL_NS, "timeout 0 waited");
    t0 = weft_now_ns();
    CHECK_IO(weft_poll_fd(sp[0], POLLIN, (int64_t)MS(50)), 0, 0);
    uint64_t el = weft_now_ns() - t0;
    CHECK(el >= MS(50), "poll_fd timed out after %.2f ms, before 50", ms_of(el));
    CHECK(el < MS(50) + LATE_TOL_NS, "poll_fd timed out after %.1f ms", ms_of(el));

    CHECK(weft_poll_fd(sp[0], POLLOUT, -1) == POLLOUT, "writable socket: not POLLOUT");
    CHECK_IO(weft_write(sp[1], "z", 1), 1, 0);
    CHECK(weft_poll_fd(sp[0], POLLIN, 0) == POLLIN, "readable socket: not exactly POLLIN");
    CHECK(weft_poll_fd(sp[0], POLLIN | POLLOUT, -1) == (POLLIN | POLLOUT),
          "readable+writable socket");
    char c;
    CHECK_IO(weft_read(sp[0], &c, 1), 1, 0);

    /* Ready during the wait. */
    struct delayed d = { sp[1], MS(30), "q" };
    weft_t dw = spawn(delayed_write, &d);
    t0 = weft_now_ns();
    int r = weft_poll_fd(sp[0], POLLIN, (int64_t)SCALE(MS(5000), MS(20000)));
    el = weft_now_ns() - t0;
    CHECK(r == POLLIN, "poll_fd woken by data returned %d (errno %s)", r, io_errname(IOERR));
    CHECK(el < SCALE(MS(5000), MS(20000)), "poll_fd returned only at its timeout");
    join(dw);
    CHECK_IO(weft_read(sp[0], &c, 1), 1, 0);

    /* Closed peer. */
    CHECK(weft_close(sp[1]) == 0, "close");
    r = weft_poll_fd(sp[0], POLLIN, -1);
    CHECK(r > 0 && (r & (POLLIN | POLLHUP)), "poll_fd on a closed peer returned %d", r);

    /* A closed descriptor. */
    int dead = sp[0];
    CHECK(weft_close(sp[0]) == 0, "close");
    IOERR = 0;
    r = weft_poll_fd(dead, POLLIN, (int64_t)MS(10));
    CHECK(r == POLLNVAL || (r == -1 && IOERR == EBADF),
          "poll_fd on a closed descriptor returned %d errno %s", r, io_errname(IOERR));
    return (void *)1;
}

/* ---- descriptors that were O_NONBLOCK already --------------------------------------------------- */

static void *nonblock_rows(void *arg)
{
    (void)arg;
    int sp[2];
    make_socketpair(sp, SOCK_NONBLOCK);
    char b[16];
    uint64_t t0 = weft_now_ns();
    CHECK_IO(weft_read(sp[0], b, sizeof b), -1, EAGAIN);
    CHECK_IO(weft_recv(sp[0], b, sizeof b, 0), -1, EAGAIN);
    CHECK(weft_now_ns() - t0 < LATE_TOL_NS, "EAGAIN took %.1f ms", ms_of(weft_now_ns() - t0));
    size_t big = 8u << 20;
    char *buf = calloc(1, big);
    CHECK(buf != NULL, "calloc");
    ssize_t w = weft_write(sp[1], buf, big);
    CHECK(w > 0 && (size_t)w < big, "write of 8 MiB to a non-blocking socket returned %zd "
          "(errno %s), expected a partial count", w, io_errname(IOERR));
    CHECK_IO(weft_write(sp[1], buf, big), -1, EAGAIN);
    free(buf);
    CHECK(fd_is_nonblocking(sp[0]) && fd_is_nonblocking(sp[1]), "O_NONBLOCK was cleared");
    CHECK(weft_close(sp[0]) == 0 && weft_close(sp[1]) == 0, "close");

    struct sockaddr_in a;
    int l = tcp_listener(&a, 1);
    CHECK(fcntl(l, F_SETFL, fcntl(l, F_GETFL) | O_NONBLOCK) == 0, "F_SETFL");
    CHECK_IO(weft_accept(l, NULL, NULL), -1, EAGAIN);
    CHECK(weft_close(l) == 0, "close");
    return (void *)1;
}

/* ---- I/O from main ---------------------------------------------------------------------------- */

static void *pthread_delayed_write(void *arg)
{
    struct delayed *d = arg;
    struct timespec ts = { 0, (long)d->delay };
    nanosleep(&ts, NULL);
    ssize_t n = write(d->fd, d->data, strlen(d->data));
    CHECK(n == (ssize_t)strlen(d->data), "pthread write: %s", strerror(IOERR));
    return NULL;
}

#define MAIN_BIG (1u << 20)

static void *chunk_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    uint8_t *buf = malloc(4096);
    CHECK(buf != NULL, "malloc");
    uint32_t seed = 99;
    uint64_t got = 0;
    long reads = 0;
    for (;;) {
        size_t want = 1 + check_rand(&seed) % 4096;
        ssize_t n = weft_read(fd, buf, want);
        CHECK(n >= 0, "chunk reader: %s", strerror(IOERR));
        CHECK((size_t)n <= want, "read more than asked");
        if (n == 0)
            break;
        size_t bad = pattern_find_bad(7, got, buf, (size_t)n);
        CHECK(bad == (size_t)n, "byte %llu wrong", (unsigned long long)(got + bad));
        got += (uint64_t)n;
        reads++;
    }
    free(buf);
    CHECK(got == MAIN_BIG, "chunk reader got %llu of %u bytes", (unsigned long long)got,
          MAIN_BIG);
    CHECK(reads >= (long)(MAIN_BIG / 4096), "only %ld reads for %u bytes in chunks <= 4096",
          reads, MAIN_BIG);
    return NULL;
}

static void big_write_with_reader(int wfd, int rfd)
{
    uint8_t *buf = malloc(MAIN_BIG);
    CHECK(buf != NULL, "malloc");
    pattern_fill(7, 0, buf, MAIN_BIG);
    weft_t r = spawn(chunk_reader, (void *)(intptr_t)rfd);
    CHECK_IO(weft_write(wfd, buf, MAIN_BIG), MAIN_BIG, 0);
    CHECK(weft_close(wfd) == 0, "close");
    join(r);
    free(buf);
}

static void *touch_fd(void *arg)
{
    int fd = (int)(intptr_t)arg;
    CHECK_IO(weft_poll_fd(fd, POLLIN, 0), 0, 0);    /* weft sees it from a uthread */
    char b;
    CHECK_IO(weft_recv(fd, &b, 1, MSG_DONTWAIT), -1, EAGAIN);
    return NULL;
}

static void check_main_io(void)
{
    check_phase("main: read blocks until a pthread writes");
    int sp[2];
    make_socketpair(sp, 0);
    struct delayed d = { sp[1], MS(50), "from-pthread" };
    uint64_t t0 = weft_now_ns();
    pthread_t th = start_pthread(pthread_delayed_write, &d);
    char b[64];
    CHECK_IO(weft_read(sp[0], b, sizeof b), 12, 0);
    CHECK(weft_now_ns() - t0 >= MS(45), "main's read returned after %.1f ms, before the write",
          ms_of(weft_now_ns() - t0));
    CHECK(memcmp(b, "from-pthread", 12) == 0, "data");
    join_pthread(th);

    check_phase("main: read blocks until a uthread writes, on a descriptor weft switched");
    in_uthread(touch_fd, (void *)(intptr_t)sp[0]);
    struct delayed d2 = { sp[1], MS(50), "from-uthread" };
    t0 = weft_now_ns();
    weft_t u = spawn(delayed_write, &d2);
    CHECK_IO(weft_read(sp[0], b, sizeof b), 12, 0);
    CHECK(weft_now_ns() - t0 >= MS(45), "main's read returned after %.1f ms, before the write",
          ms_of(weft_now_ns() - t0));
    CHECK(memcmp(b, "from-uthread", 12) == 0, "data");
    join(u);

    check_phase("main: a 1 MiB write completes while a uthread reads");
    big_write_with_reader(sp[1], sp[0]);
    CHECK_IO(weft_close(sp[0]), 0, 0);
}

/* ---- pipes ----------------------------------------------------------------------------------- */

static void *pipe_writer(void *arg)
{
    big_write_with_reader(((int *)arg)[1], ((int *)arg)[0]);
    return NULL;
}

static void *pipe_rows(void *arg)
{
    (void)arg;
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe: %s", strerror(IOERR));
    /* A read returns what is there. */
    CHECK_IO(weft_write(p[1], "0123456789", 10), 10, 0);
    char b[4096];
    CHECK_IO(weft_read(p[0], b, sizeof b), 10, 0);
    /* 1 MiB through a 64 KiB pipe, writer and reader both uthreads. */
    in_uthread(pipe_writer, p);
    CHECK(weft_close(p[0]) == 0, "close");
    return (void *)1;
}

/* ---- sendfile ------------------------------------------------------------------------------------ */

#define SF_SIZE (4u << 20)

static void *sf_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    uint8_t *buf = malloc(65536);
    CHECK(buf != NULL, "malloc");
    uint64_t got = 0;
    for (;;) {
        ssize_t n = weft_read(fd, buf, 65536);
        CHECK(n >= 0, "sendfile reader: %s", strerror(IOERR));
        if (n == 0)
            break;
        size_t bad = pattern_find_bad(11, got, buf, (size_t)n);
        CHECK(bad == (size_t)n, "sendfile byte %llu wrong", (unsigned long long)(got + bad));
        got += (uint64_t)n;
    }
    free(buf);
    CHECK(got == SF_SIZE, "sendfile reader got %llu of %u", (unsigned long long)got, SF_SIZE);
    return NULL;
}

static void sendfile_once(int file, int use_offset)
{
    int c, s;
    tcp_pair(&c, &s);
    int small = 32768;
    CHECK(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small) == 0, "SO_SNDBUF");
    CHECK(setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small) == 0, "SO_RCVBUF");
    weft_t r = spawn(sf_reader, (void *)(intptr_t)s);
    off_t off = 0;
    uint64_t sent = 0;
    CHECK(lseek(file, 0, SEEK_SET) == 0, "lseek");
    int calls = 0;
    while (sent < SF_SIZE) {
        ssize_t n = weft_sendfile(c, file, use_offset ? &off : NULL, SF_SIZE - sent);
        CHECK(n > 0, "weft_sendfile after %llu bytes: %zd %s", (unsigned long long)sent, n,
              strerror(IOERR));
        sent += (uint64_t)n;
        calls++;
        CHECK(calls < 100000, "sendfile makes no progress");
    }
    if (use_offset) {
        CHECK(off == (off_t)SF_SIZE, "offset %lld after sendfile", (long long)off);
        CHECK(lseek(file, 0, SEEK_CUR) == 0, "sendfile with an offset moved the file position");
    } else {
        CHECK(lseek(file, 0, SEEK_CUR) == (off_t)SF_SIZE, "file position not at the end");
    }
    CHECK(shutdown(c, SHUT_WR) == 0, "shutdown");
    join(r);
    CHECK(weft_close(c) == 0 && weft_close(s) == 0, "close");
}

static void *sendfile_rows(void *arg)
{
    (void)arg;
    char path[] = "/tmp/weft-sendfile-XXXXXX";
    int f = mkstemp(path);
    CHECK(f >= 0, "mkstemp: %s", strerror(IOERR));
    CHECK(unlink(path) == 0, "unlink");
    uint8_t *buf = malloc(SF_SIZE);
    CHECK(buf != NULL, "malloc");
    pattern_fill(11, 0, buf, SF_SIZE);
    size_t done = 0;
    while (done < SF_SIZE) {
        ssize_t n = write(f, buf + done, SF_SIZE - done);
        CHECK(n > 0, "write temp file: %s", strerror(IOERR));
        done += (size_t)n;
    }
    free(buf);
    sendfile_once(f, 1);
    sendfile_once(f, 0);
    CHECK(close(f) == 0, "close");
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    io_test_start();
    check_close_wakes();
    check_reset();
    io_table("connect refused", refused_rows);
    io_table("I/O deadlines", deadline_rows);
    io_table("poll_fd", poll_rows);
    io_table("already O_NONBLOCK", nonblock_rows);
    check_main_io();
    io_table("pipes", pipe_rows);
    io_table("sendfile", sendfile_rows);
    fprintf(stderr, "io_errors: ok (%d vcores, %s)\n", weft_num_vcores(), weft_poller_name());
    weft_shutdown();
    return 0;
}
