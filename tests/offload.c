/*
 * offload — weft_offload() and the file calls built on it.
 *
 * Proves: while one uthread offloads a call that blocks in the kernel for
 * 300 ms, a ticker uthread on the same vcore (WEFT_PINNED to vcore 0 with
 * it) keeps ticking every 10 ms; the offloaded function runs on another
 * kernel thread, outside any uthread; its result and errno reach the caller
 * (ENOENT and (void *)42), and a NULL result pointer is fine; 100 uthreads
 * each offloading a 20 ms sleep all finish, in parallel (well under
 * 100 x 20 ms), never more than WEFT_OFFLOAD_THREADS (64) at once;
 * weft_open / weft_pwrite / weft_pread / weft_fsync round-trip data through
 * a temporary file (EOF, ENOENT, EEXIST and EBADF included), from a uthread
 * and from main; from main, weft_offload runs fn inline on the calling
 * thread.
 */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <sys/syscall.h>

#include "iocheck.h"

static pid_t my_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

/* nap_kernel() blocks the kernel thread, bypassing anything weft could hook. */
static void nap_kernel(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
    while (syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, &ts) != 0)
        ;
}

/* ---- a long offload with a ticker on the same vcore ---------------------------------------- */

#define LONG_NS MS(300)
#define TICK_NS MS(10)
#define MIN_TICKS SCALE(10, 5)

static atomic_int long_running, long_done;
static atomic_int ticks_during;
static pid_t fn_tid;
static atomic_int fn_in_uthread;

static void *long_fn(void *arg)
{
    (void)arg;
    fn_tid = my_tid();
    atomic_store(&fn_in_uthread, weft_self() != NULL);
    atomic_store(&long_running, 1);
    nap_kernel(LONG_NS);
    atomic_store(&long_running, 0);
    IOERR = ENOENT;
    return (void *)42;
}

static void *long_caller(void *arg)
{
    (void)arg;
    pid_t me = my_tid();
    void *res = NULL;
    IOERR = 0;
    int rc = weft_offload(long_fn, NULL, &res);
    int e = IOERR;
    CHECK_RC(rc, 0);
    CHECK(res == (void *)42, "result %p, expected 42", res);
    CHECK(e == ENOENT, "errno %d (%s) after the offload, expected ENOENT", e, io_errname(e));
    CHECK(fn_tid != me, "the offloaded call ran on the vcore's own kernel thread");
    CHECK(!atomic_load(&fn_in_uthread), "the offloaded call saw weft_self() != NULL");
    atomic_store(&long_done, 1);
    return NULL;
}

static void *ticker(void *arg)
{
    (void)arg;
    while (!atomic_load(&long_running) && !atomic_load(&long_done))
        weft_sleep_ns(MS(1));
    while (!atomic_load(&long_done)) {
        weft_sleep_ns(TICK_NS);
        if (atomic_load(&long_running))
            atomic_fetch_add(&ticks_during, 1);
    }
    return NULL;
}

static void check_long_offload(void)
{
    check_phase("a 300 ms offload, a ticker on the same vcore");
    /* Both pinned to vcore 0: the ticker can only tick if the offload
     * released the vcore. */
    weft_t c = spawn_ex(long_caller, NULL, WEFT_PINNED, 0, "caller");
    weft_t t = spawn_ex(ticker, NULL, WEFT_PINNED, 0, "ticker");
    join(c);
    join(t);
    CHECK(atomic_load(&ticks_during) >= MIN_TICKS,
          "the ticker ticked %d times during the 300 ms offload (expected >= %d): "
          "the offload held the vcore", atomic_load(&ticks_during), MIN_TICKS);
    fprintf(stderr, "offload: %d ticks during the offload\n", atomic_load(&ticks_during));
}

/* ---- small rows -------------------------------------------------------------------------------- */

static void *set_errno_fn(void *arg)
{
    IOERR = (int)(intptr_t)arg;
    return arg;
}

static void *offload_rows(void *arg)
{
    (void)arg;
    void *res;
    IOERR = 0;
    CHECK_RC(weft_offload(set_errno_fn, (void *)(intptr_t)EEXIST, &res), 0);
    CHECK(IOERR == EEXIST, "errno %d after fn set EEXIST", IOERR);
    CHECK(res == (void *)(intptr_t)EEXIST, "result");
    IOERR = 0;
    CHECK_RC(weft_offload(set_errno_fn, (void *)(intptr_t)ENOSPC, NULL), 0);   /* no result */
    CHECK(IOERR == ENOSPC, "errno %d after fn set ENOSPC", IOERR);
    IOERR = 0;
    CHECK_RC(weft_offload(set_errno_fn, (void *)0, &res), 0);
    CHECK(IOERR == 0 && res == NULL, "errno %d after fn set 0", IOERR);
    return (void *)1;
}

/* From main, fn runs on the calling thread. */
static pid_t inline_tid;
static void *inline_fn(void *arg)
{
    inline_tid = my_tid();
    IOERR = ENOENT;
    return arg;
}

static void check_main_inline(void)
{
    check_phase("offload from main runs inline");
    void *res = NULL;
    IOERR = 0;
    CHECK_RC(weft_offload(inline_fn, (void *)42, &res), 0);
    CHECK(IOERR == ENOENT, "errno %d, expected ENOENT", IOERR);
    CHECK(res == (void *)42, "result");
    CHECK(inline_tid == my_tid(), "from main the call ran on another thread");
}

/* ---- many offloads at once ------------------------------------------------------------------------ */

#define NOFF 100
#define OFF_NS MS(20)
#define POOL_MAX 64

static atomic_int running_now, running_max, off_done;

static void *short_fn(void *arg)
{
    int now = atomic_fetch_add(&running_now, 1) + 1;
    int m = atomic_load(&running_max);
    while (now > m && !atomic_compare_exchange_weak(&running_max, &m, now))
        ;
    nap_kernel(OFF_NS);
    atomic_fetch_sub(&running_now, 1);
    return arg;
}

static void *short_caller(void *arg)
{
    void *res = NULL;
    CHECK_RC(weft_offload(short_fn, arg, &res), 0);
    CHECK(res == arg, "result of offload %d", (int)(intptr_t)arg);
    atomic_fetch_add(&off_done, 1);
    return NULL;
}

static void check_many_offloads(void)
{
    check_phase("100 offloads at once");
    weft_t t[NOFF];
    uint64_t t0 = weft_now_ns();
    for (int i = 0; i < NOFF; i++)
        t[i] = spawn(short_caller, (void *)(intptr_t)(i + 1));
    for (int i = 0; i < NOFF; i++)
        join(t[i]);
    uint64_t el = weft_now_ns() - t0;
    CHECK(atomic_load(&off_done) == NOFF, "%d of %d offloads finished",
          atomic_load(&off_done), NOFF);
    CHECK(el >= OFF_NS, "100 offloads of 20 ms took %.1f ms", ms_of(el));
    CHECK(el < SCALE(MS(1000), MS(1500)),
          "100 offloads of 20 ms took %.0f ms: they did not run in parallel", ms_of(el));
    CHECK(atomic_load(&running_max) >= 8, "at most %d offloaded calls ran at once",
          atomic_load(&running_max));
    CHECK(atomic_load(&running_max) <= POOL_MAX, "%d offloaded calls ran at once, above the "
          "pool bound %d", atomic_load(&running_max), POOL_MAX);
    fprintf(stderr, "offload: 100 x 20 ms in %.1f ms, %d at once\n", ms_of(el),
            atomic_load(&running_max));
}

/* ---- file calls ------------------------------------------------------------------------------ */

#define FILE_BIG (1u << 20)

static void *file_rows(void *arg)
{
    (void)arg;
    char path[128];
    static atomic_int seq;
    snprintf(path, sizeof path, "/tmp/weft-offload-%d-%d", (int)getpid(),
             atomic_fetch_add(&seq, 1));
    unlink(path);
    int fd = weft_open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "weft_open(O_CREAT) %s: %s", path, strerror(IOERR));
    CHECK_IO(weft_open(path, O_CREAT | O_EXCL | O_RDWR, 0600), -1, EEXIST);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && (st.st_mode & 0777) == 0600, "mode of the new file");

    uint8_t *w = malloc(FILE_BIG), *r = malloc(FILE_BIG);
    CHECK(w && r, "malloc");
    pattern_fill(3, 0, w, FILE_BIG);
    CHECK_IO(weft_pwrite(fd, w, FILE_BIG, 4096), FILE_BIG, 0);
    CHECK_IO(weft_pwrite(fd, "head", 4, 0), 4, 0);
    CHECK_RC(weft_fsync(fd), 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 4096 + FILE_BIG, "size %lld after pwrite",
          (long long)st.st_size);
    CHECK(lseek(fd, 0, SEEK_CUR) == 0, "pwrite moved the file position");

    memset(r, 0, FILE_BIG);
    CHECK_IO(weft_pread(fd, r, FILE_BIG, 4096), FILE_BIG, 0);
    CHECK(pattern_find_bad(3, 0, r, FILE_BIG) == FILE_BIG, "pread data differs from pwrite");
    char head[8] = { 0 };
    CHECK_IO(weft_pread(fd, head, 8, 0), 8, 0);
    CHECK(memcmp(head, "head\0\0\0\0", 8) == 0, "head / hole");
    CHECK_IO(weft_pread(fd, r, 100, 4096 + FILE_BIG - 10), 10, 0);       /* short at EOF */
    CHECK(pattern_find_bad(3, FILE_BIG - 10, r, 10) == 10, "tail data");
    CHECK_IO(weft_pread(fd, r, 100, 4096 + FILE_BIG), 0, 0);              /* EOF */

    /* A second descriptor opened read-only sees the data. */
    int fd2 = weft_open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd2 >= 0, "weft_open(O_RDONLY): %s", strerror(IOERR));
    CHECK_IO(weft_pread(fd2, head, 4, 0), 4, 0);
    CHECK(memcmp(head, "head", 4) == 0, "data through a second descriptor");
    CHECK_IO(weft_pwrite(fd2, "x", 1, 0), -1, EBADF);                     /* read-only */
    CHECK(weft_close(fd2) == 0, "close");

    CHECK(weft_close(fd) == 0, "close");
    CHECK_IO(weft_pread(fd, r, 10, 0), -1, EBADF);
    CHECK_IO(weft_fsync(fd), -1, EBADF);
    CHECK(unlink(path) == 0, "unlink");
    CHECK_IO(weft_open(path, O_RDONLY), -1, ENOENT);
    free(w);
    free(r);
    return (void *)1;
}

/* poke_poller() makes one pipe round trip in a uthread: the poller is up. */
static void *poke_poller(void *arg)
{
    (void)arg;
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    CHECK_IO(weft_write(p[1], "x", 1), 1, 0);
    char c;
    CHECK_IO(weft_read(p[0], &c, 1), 1, 0);
    CHECK(weft_close(p[0]) == 0 && weft_close(p[1]) == 0, "close");
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    io_test_start();
    CHECK_RC(weft_init(NULL), 0);
    check_main_inline();
    io_table("offload rows", offload_rows);
    check_long_offload();
    check_many_offloads();
    io_table("file calls", file_rows);
    in_uthread(poke_poller, NULL);
    io_check_poller();
    fprintf(stderr, "offload: ok (%d vcores, %s)\n", weft_num_vcores(), weft_poller_name());
    weft_shutdown();
    return 0;
}
