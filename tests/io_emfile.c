/*
 * io_emfile — running out of descriptors at weft's first I/O call is not
 * kept forever.
 *
 * Proves:
 *  - with every descriptor taken before the first weft I/O call, a read
 *    from a uthread fails at once with -1/EMFILE (the poller cannot start:
 *    epoll, or io_uring for the -uring variant), no hang, and no poller is
 *    reported; a second try while still exhausted fails the same way;
 *  - once descriptors are freed, the same read works: it parks until
 *    another uthread writes 20 ms later and returns the bytes (the poller
 *    started on the later call). Before: EMFILE from every later call.
 */
#define _GNU_SOURCE
#include <sys/resource.h>

#include "iocheck.h"

#define MAXFILL 256

static int sp[2];
static int fill[MAXFILL], nfill;

static void exhaust(void)
{
    nfill = 0;
    for (;;) {
        CHECK(nfill < MAXFILL, "still no EMFILE after %d descriptors", MAXFILL);
        int fd = dup(0);
        if (fd < 0) {
            CHECK(IOERR == EMFILE, "dup: %s", strerror(IOERR));
            return;
        }
        fill[nfill++] = fd;
    }
}

static void release(void)
{
    while (nfill)
        close(fill[--nfill]);
}

static void *writer(void *arg)
{
    (void)arg;
    CHECK_RC(weft_sleep_ns(MS(20)), 0);
    CHECK_IO(weft_write(sp[1], "late", 4), 4, 0);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    char buf[8];
    exhaust();
    CHECK_IO(weft_read(sp[0], buf, sizeof buf), -1, EMFILE);
    CHECK(strcmp(weft_poller_name(), "none") == 0, "poller %s started with no descriptors",
          weft_poller_name());
    CHECK_IO(weft_read(sp[0], buf, sizeof buf), -1, EMFILE);
    release();

    weft_t w;
    CHECK_RC(weft_spawn(&w, NULL, writer, NULL), 0);
    ssize_t n = weft_read(sp[0], buf, sizeof buf);
    CHECK(n == 4 && memcmp(buf, "late", 4) == 0, "read after descriptors came back: %zd (%s)", n,
          n < 0 ? strerror(IOERR) : "");
    io_check_poller();
    CHECK_RC(weft_join(w, NULL), 0);
    return NULL;
}

int main(void)
{
    check_watchdog(SCALE(60, 300));
    io_test_start();
    struct rlimit old, low;
    CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
    low = old;
    low.rlim_cur = 64; /* so that exhausting it stays cheap */
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit: %s", strerror(IOERR));
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
    CHECK(strcmp(weft_poller_name(), "none") == 0, "a poller before any I/O: %s", weft_poller_name());

    weft_t r;
    CHECK_RC(weft_spawn(&r, NULL, reader, NULL), 0);
    CHECK_RC(weft_join(r, NULL), 0);

    close(sp[0]);
    close(sp[1]);
    CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0, "setrlimit back");
    weft_shutdown();
    fprintf(stderr, "io_emfile: ok (%s)\n", getenv("WEFT_POLLER") ? getenv("WEFT_POLLER") : "epoll");
    return 0;
}
