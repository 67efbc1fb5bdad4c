/*
 * io_netwake — the netpoller wakes parked uthreads, with every vcore idle
 * (one of them asleep in the poller) and with every vcore busy.
 *
 * Proves: a uthread parked in weft_read on an empty pipe, while main waits
 * in weft_join and nothing else runs, is woken by a plain write(2) from a
 * pthread 50 ms later — not before the write, and promptly after it — and
 * likewise by weft_write from another uthread (on another vcore when there
 * are several); 64 readers parked on 64 pipes all wake when a pthread
 * writes to every pipe; a reader is woken while yielding uthreads keep every
 * vcore busy (the poller is also checked by busy vcores); two uthreads
 * ping-pong a counter over two pipes 10000 times (same vcore, and pinned to
 * two vcores), and a uthread ping-pongs with a pthread, every value checked.
 */
#include "iocheck.h"

#define ROUNDS SCALE(20, 5)
#define DELAY_NS MS(50)
#define WAKE_TOL SCALE(MS(100), MS(1000))

static void make_pipe(int p[2])
{
    CHECK(pipe(p) == 0, "pipe: %s", strerror(IOERR));
}

struct reader {
    int fd;
    atomic_int started;
    atomic_int done;
    uint64_t woke;
    ssize_t rc;
    char byte;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    atomic_store(&r->started, 1);
    r->rc = weft_read(r->fd, &r->byte, 1);
    r->woke = weft_now_ns();
    atomic_store(&r->done, 1);
    CHECK(r->rc == 1, "read returned %zd: %s", r->rc, strerror(IOERR));
    return NULL;
}

/* A writer that sleeps, notes the time, then writes one byte. */
struct writer {
    int fd;
    uint64_t delay;
    uint64_t wrote_at;
    int use_weft;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    if (w->use_weft) {
        weft_sleep_ns(w->delay);
    } else {
        struct timespec ts = { 0, (long)w->delay };
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    w->wrote_at = weft_now_ns();
    ssize_t n = w->use_weft ? weft_write(w->fd, "w", 1) : write(w->fd, "w", 1);
    CHECK(n == 1, "write: %s", strerror(IOERR));
    return NULL;
}

static void check_one_wake(struct reader *r, struct writer *w, const char *who)
{
    CHECK(r->woke >= w->wrote_at, "%s: the reader returned %.2f ms before the write", who,
          ms_of(w->wrote_at - r->woke));
    CHECK(r->woke - w->wrote_at < WAKE_TOL, "%s: the reader woke %.1f ms after the write", who,
          ms_of(r->woke - w->wrote_at));
    CHECK(r->byte == 'w', "%s: read the wrong byte", who);
}

static uint64_t worst_wake;

static void note_wake(struct reader *r, struct writer *w)
{
    if (r->woke - w->wrote_at > worst_wake)
        worst_wake = r->woke - w->wrote_at;
}

/* A pthread writes; main waits in weft_join: no vcore has anything to do. */
static void check_pthread_wakes(void)
{
    check_phase("a pthread's write wakes a reader (vcores idle)");
    for (int i = 0; i < ROUNDS; i++) {
        int p[2];
        make_pipe(p);
        struct reader r = { .fd = p[0] };
        struct writer w = { .fd = p[1], .delay = DELAY_NS, .use_weft = 0 };
        weft_t t = spawn(reader_main, &r);
        WAIT_UNTIL(atomic_load(&r.started), "reader started");
        pthread_t th = start_pthread(writer_main, &w);
        join(t);
        join_pthread(th);
        check_one_wake(&r, &w, "pthread writer");
        note_wake(&r, &w);
        CHECK(weft_close(p[0]) == 0 && close(p[1]) == 0, "close");
    }
}

/* A uthread writes (on another vcore if there is one). */
static void check_uthread_wakes(void)
{
    check_phase("a uthread's write wakes a reader");
    int nv = weft_num_vcores();
    for (int i = 0; i < ROUNDS; i++) {
        int p[2];
        make_pipe(p);
        struct reader r = { .fd = p[0] };
        struct writer w = { .fd = p[1], .delay = DELAY_NS, .use_weft = 1 };
        unsigned fl = nv >= 2 && i % 2 ? WEFT_PINNED : 0;
        weft_t t = spawn_ex(reader_main, &r, fl, 0, "reader");
        WAIT_UNTIL(atomic_load(&r.started), "reader started");
        weft_t u = spawn_ex(writer_main, &w, fl, fl ? 1 : 0, "writer");
        join(t);
        join(u);
        check_one_wake(&r, &w, "uthread writer");
        note_wake(&r, &w);
        CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0, "close");
    }
}

/* Many parked readers, one pthread burst. */
#define NREADERS 64

static void check_many_readers(void)
{
    check_phase("64 parked readers, one pthread burst");
    static struct reader rs[NREADERS];
    weft_t ts[NREADERS];
    int wfd[NREADERS];
    for (int i = 0; i < NREADERS; i++) {
        int p[2];
        make_pipe(p);
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].fd = p[0];
        wfd[i] = p[1];
        ts[i] = spawn(reader_main, &rs[i]);
    }
    for (int i = 0; i < NREADERS; i++)
        WAIT_UNTIL(atomic_load(&rs[i].started), "reader started");
    weft_sleep_ns(MS(20));
    for (int i = 0; i < NREADERS; i++)
        CHECK(!atomic_load(&rs[i].done), "reader %d returned before any write", i);
    uint64_t t0 = weft_now_ns();
    for (int i = 0; i < NREADERS; i++)
        CHECK(write(wfd[i], "w", 1) == 1, "write: %s", strerror(IOERR));
    for (int i = 0; i < NREADERS; i++) {
        join(ts[i]);
        CHECK(rs[i].woke - t0 < WAKE_TOL, "reader %d woke %.1f ms after the burst", i,
              ms_of(rs[i].woke - t0));
        CHECK(weft_close(rs[i].fd) == 0 && close(wfd[i]) == 0, "close");
    }
}

/* Every vcore busy with yielding uthreads: the reader must still wake. */
static atomic_int spin_stop;
static atomic_long spin_rounds;

static void *spinner(void *arg)
{
    (void)arg;
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    while (!atomic_load(&spin_stop)) {
        weft_yield();
        atomic_fetch_add(&spin_rounds, 1);
        CHECK(weft_now_ns() < end, "the reader never woke while vcores were busy");
    }
    return NULL;
}

static void check_busy_wakes(void)
{
    check_phase("a pthread's write wakes a reader while every vcore is busy");
    int nv = weft_num_vcores();
    for (int i = 0; i < ROUNDS / 2 + 1; i++) {
        int p[2];
        make_pipe(p);
        struct reader r = { .fd = p[0] };
        struct writer w = { .fd = p[1], .delay = DELAY_NS, .use_weft = 0 };
        weft_t t = spawn(reader_main, &r);
        WAIT_UNTIL(atomic_load(&r.started), "reader started");
        atomic_store(&spin_stop, 0);
        weft_t sp[64];
        int ns = nv < 64 ? nv : 64;
        for (int k = 0; k < ns; k++)
            sp[k] = spawn_ex(spinner, NULL, nv >= 2 ? WEFT_PINNED : 0, k, "spinner");
        pthread_t th = start_pthread(writer_main, &w);
        join(t);
        atomic_store(&spin_stop, 1);
        for (int k = 0; k < ns; k++)
            join(sp[k]);
        join_pthread(th);
        check_one_wake(&r, &w, "busy vcores");
        CHECK(weft_close(p[0]) == 0 && close(p[1]) == 0, "close");
    }
    CHECK(atomic_load(&spin_rounds) > 0, "the spinners never ran");
}

/* ---- ping-pong ------------------------------------------------------------------------------ */

#define PP_ROUNDS SCALE(10000, 2000)

static void read_exact(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = weft_read(fd, (char *)buf + got, n - got);
        CHECK(r > 0, "ping-pong read returned %zd: %s", r, r < 0 ? strerror(IOERR) : "EOF");
        got += (size_t)r;
    }
}

struct pp {
    int a2b[2], b2a[2];
    int rounds;
};

static void *pp_a(void *arg)
{
    struct pp *p = arg;
    for (uint32_t i = 0; i < (uint32_t)p->rounds; i++) {
        CHECK_IO(weft_write(p->a2b[1], &i, sizeof i), sizeof i, 0);
        uint32_t back;
        read_exact(p->b2a[0], &back, sizeof back);
        CHECK(back == i + 1, "round %u: got %u back", i, back);
    }
    return NULL;
}

static void *pp_b(void *arg)
{
    struct pp *p = arg;
    for (uint32_t i = 0; i < (uint32_t)p->rounds; i++) {
        uint32_t v;
        read_exact(p->a2b[0], &v, sizeof v);
        CHECK(v == i, "round %u: got %u", i, v);
        v++;
        CHECK_IO(weft_write(p->b2a[1], &v, sizeof v), sizeof v, 0);
    }
    return NULL;
}

static void pp_run(const char *what, unsigned flags, int b_in_pthread, int rounds)
{
    check_phase(what);
    struct pp p = { .rounds = rounds };
    make_pipe(p.a2b);
    make_pipe(p.b2a);
    uint64_t t0 = weft_now_ns();
    weft_t a = spawn_ex(pp_a, &p, flags, 0, "pp-a");
    if (b_in_pthread) {
        join_pthread(start_pthread(pp_b, &p));
    } else {
        join(spawn_ex(pp_b, &p, flags, flags ? 1 : 0, "pp-b"));
    }
    join(a);
    uint64_t el = weft_now_ns() - t0;
    fprintf(stderr, "io_netwake: %s: %d round trips, %.1f us each\n", what, rounds,
            (double)el / 1e3 / rounds);
    CHECK(weft_close(p.a2b[0]) == 0 && weft_close(p.a2b[1]) == 0 && weft_close(p.b2a[0]) == 0 &&
              weft_close(p.b2a[1]) == 0, "close");
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    io_test_start();
    CHECK_RC(weft_init(NULL), 0);
    check_pthread_wakes();
    io_check_poller();
    check_uthread_wakes();
    check_many_readers();
    check_busy_wakes();
    pp_run("ping-pong, two uthreads", 0, 0, PP_ROUNDS);
    if (weft_num_vcores() >= 2)
        pp_run("ping-pong, uthreads pinned to two vcores", WEFT_PINNED, 0, PP_ROUNDS);
    pp_run("ping-pong, uthread and pthread", 0, 1, PP_ROUNDS / 5);
    fprintf(stderr, "io_netwake: ok (%d vcores, %s, worst wake %.2f ms)\n", weft_num_vcores(),
            weft_poller_name(), ms_of(worst_wake));
    weft_shutdown();
    return 0;
}
