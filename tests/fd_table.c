/*
 * fd_table.c — white-box test of the descriptor table (src/io/fd.c,
 * src/io/fd.h): how a first use classifies a descriptor (standard streams
 * direct, regular files as files, pipes and sockets polled and made
 * non-blocking, a descriptor already non-blocking left as the program
 * made it); chunks made on demand for high numbers, with entries that never
 * move; the generation that weft_close() and weft_fd_forget() bump, which
 * makes a late poller event for the old descriptor a no-op and wakes the
 * waiters of a forgotten one with EBADF; the readiness sequence a current
 * event bumps.
 */
#define _GNU_SOURCE
#include "check.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <weft/io.h>

#include "../src/io/fd.h"

static struct weft__fd *get(int fd, uint32_t *gen)
{
    struct weft__fd *f = NULL;
    CHECK_RC(weft__fd_get(fd, &f, gen), 0);
    CHECK(f != NULL && f->fd == fd, "entry of %d: %p", fd, (void *)f);
    CHECK(weft__fd_lookup(fd) == f, "lookup of %d is not the entry get made", fd);
    return f;
}

static int kind(struct weft__fd *f)
{
    return atomic_load(&f->kind);
}

static void case_classify(void)
{
    check_phase("classification");
    uint32_t gen;
    CHECK(kind(get(1, &gen)) == WEFT__FD_DIRECT, "stdout is not direct");
    CHECK(!weft__fd_managed(1), "stdout managed");

    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    struct weft__fd *f = get(p[0], &gen);
    CHECK(kind(f) == WEFT__FD_POLLED && !f->user_nonblock, "a pipe: kind %d", kind(f));
    CHECK(fcntl(p[0], F_GETFL) & O_NONBLOCK, "weft did not make the polled pipe non-blocking");
    CHECK(weft__fd_managed(p[0]), "a polled pipe is not managed");

    int s[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, s) == 0, "socketpair");
    f = get(s[0], &gen);
    CHECK(kind(f) == WEFT__FD_POLLED && f->user_nonblock,
          "a socket the program made non-blocking: kind %d, user_nonblock %d", kind(f),
          f->user_nonblock);
    CHECK(!weft__fd_managed(s[0]), "the program's non-blocking socket is managed");

    char path[] = "/tmp/weft-fd-table-XXXXXX";
    int file = mkstemp(path);
    CHECK(file >= 0, "mkstemp");
    unlink(path);
    f = get(file, &gen);
    CHECK(kind(f) == WEFT__FD_FILE, "a regular file: kind %d", kind(f));
    CHECK(!(fcntl(file, F_GETFL) & O_NONBLOCK), "a regular file was made non-blocking");

    CHECK_RC(weft_close(p[0]), 0);
    CHECK_RC(weft_close(p[1]), 0);
    CHECK_RC(weft_close(s[0]), 0);
    CHECK_RC(weft_close(s[1]), 0);
    CHECK_RC(weft_close(file), 0);

    struct weft__fd *none = NULL;
    CHECK_RC(weft__fd_get(-1, &none, &gen), EBADF);
}

/* A number in a chunk nobody used yet: lookup finds nothing until a get
 * makes the chunk; the entries of a chunk know their numbers and stay put. */
static void case_chunks(void)
{
    check_phase("chunks on demand");
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
    int high = 3 * 1024 + 5;
    if (rl.rlim_cur <= (rlim_t)high + 1) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
    }
    if (rl.rlim_cur <= (rlim_t)high + 1)
        high = (int)rl.rlim_cur - 2; /* what the hard limit allows */
    int chunk_first = high / 1024 * 1024;
    bool fresh = weft__fd_lookup(high) == NULL; /* nothing used this chunk so far */
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    CHECK(dup2(p[0], high) == high, "dup2 to %d", high);
    uint32_t gen;
    struct weft__fd *f = get(high, &gen);
    CHECK(kind(f) == WEFT__FD_POLLED, "the high pipe: kind %d", kind(f));
    if (fresh) {
        struct weft__fd *first = weft__fd_lookup(chunk_first);
        CHECK(first != NULL && first->fd == chunk_first && f - first == high - chunk_first,
              "the new chunk's entries are not numbered in place");
    }
    /* Another chunk made later does not move this one's entries. */
    get(p[0], &gen);
    CHECK(weft__fd_lookup(high) == f, "an entry moved");
    CHECK_RC(weft_close(high), 0);
    CHECK(weft__fd_lookup(high) == f && kind(f) == WEFT__FD_UNKNOWN,
          "a closed entry: kind %d (want it kept, not seen)", kind(f));
    CHECK_RC(weft_close(p[0]), 0);
    CHECK_RC(weft_close(p[1]), 0);
}

/* Generations: a close bumps it; an event for the old generation does
 * nothing, one for the current bumps the direction's readiness sequence. */
static void case_generations(void)
{
    check_phase("generations and late events");
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    uint32_t g0, g1;
    struct weft__fd *f = get(p[0], &g0);
    uint32_t rd0 = atomic_load(&f->d[WEFT__RD].seq), wr0 = atomic_load(&f->d[WEFT__WR].seq);
    struct weft__waiter *list = NULL;
    weft__fd_event(p[0], g0 + 1, WEFT__READY_RD, &list);
    CHECK(list == NULL && atomic_load(&f->d[WEFT__RD].seq) == rd0,
          "an event for another generation changed the entry");
    weft__fd_event(p[0], g0, WEFT__READY_RD, &list);
    CHECK(list == NULL && atomic_load(&f->d[WEFT__RD].seq) == rd0 + 1 &&
              atomic_load(&f->d[WEFT__WR].seq) == wr0,
          "a read event: rd %u -> %u, wr %u -> %u", rd0, atomic_load(&f->d[WEFT__RD].seq), wr0,
          atomic_load(&f->d[WEFT__WR].seq));
    weft__fd_event(p[0], g0, WEFT__READY_ERR, &list);
    CHECK(atomic_load(&f->d[WEFT__RD].seq) == rd0 + 2 && atomic_load(&f->d[WEFT__WR].seq) == wr0 + 1,
          "an error event bumps both directions");

    int n = p[0];
    CHECK_RC(weft_close(p[0]), 0);
    CHECK_RC(weft_close(p[1]), 0);
    /* The number comes back with the next descriptor: a new generation. */
    int q[2];
    CHECK(pipe(q) == 0, "pipe");
    CHECK(q[0] == n || q[1] == n, "the number %d was not reused (got %d, %d)", n, q[0], q[1]);
    CHECK(get(n, &g1) == f, "a reused number has another entry");
    CHECK(g1 != g0, "a reused number kept its generation %u", g0);
    uint32_t rd1 = atomic_load(&f->d[WEFT__RD].seq);
    weft__fd_event(n, g0, WEFT__READY_RD | WEFT__READY_ERR, &list);
    CHECK(list == NULL && atomic_load(&f->d[WEFT__RD].seq) == rd1,
          "a late event of the closed descriptor reached its successor");
    CHECK_RC(weft_close(q[0]), 0);
    CHECK_RC(weft_close(q[1]), 0);
}

/* weft_fd_forget() (weft__fd_drop) wakes a reader parked on the descriptor
 * with EBADF and bumps the generation. */
static int fp[2];
static atomic_int reader_parked;

static void *reader(void *unused)
{
    (void)unused;
    char c;
    atomic_store(&reader_parked, 1);
    ssize_t r = weft_read(fp[0], &c, 1);
    CHECK(r == -1 && errno == EBADF, "a reader of a forgotten descriptor: %zd (%s)", r,
          r < 0 ? strerror(errno) : "data");
    return (void *)1;
}

static void *case_forget(void *unused)
{
    (void)unused;
    check_phase("forget wakes the waiters");
    CHECK(pipe(fp) == 0, "pipe");
    uint32_t g0, g1;
    struct weft__fd *f = get(fp[0], &g0);
    weft_t r = spawn(reader, NULL);
    WAIT_UNTIL(atomic_load(&reader_parked), "the reader started");
    /* Until it is queued on the read direction. */
    WAIT_UNTIL(__atomic_load_n(&f->d[WEFT__RD].q.n, __ATOMIC_RELAXED) == 1,
               "the reader queued on the pipe");
    weft_fd_forget(fp[0]);
    CHECK(join(r) == (void *)1, "reader");
    CHECK(kind(f) == WEFT__FD_UNKNOWN, "a forgotten entry: kind %d", kind(f));
    get(fp[0], &g1); /* still open: seen afresh */
    CHECK(g1 != g0, "forget kept the generation");
    CHECK_RC(weft_close(fp[0]), 0);
    CHECK_RC(weft_close(fp[1]), 0);
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_init(NULL), 0);
    case_classify();
    case_chunks();
    case_generations();
    CHECK(in_uthread(case_forget, NULL) == (void *)1, "forget");
    weft_shutdown();
    printf("fd_table: ok\n");
    return 0;
}
