/*
 * board2.c — the cross-process priority board: two processes, one CPU.
 *
 *   weft_board2 --mode alone|noboard|board [--seconds S] [--period-ms P]
 *               [--work-k K] [--loaders N]
 *
 * Process A (this one) runs a latency probe: a uthread at priority 30 wakes
 * every P ms (weft_sleep_until_ns on a fixed schedule), does K thousand
 * rounds of a mixing function, and records its lateness: the time it
 * finished minus the time it was due. Process B (a child, forked before
 * either starts weft, so both run wherever the driver pinned this one: one
 * CPU) runs N CPU-bound uthreads at priority -30 with a 1 ms preemption
 * period, counting the work it gets done. Both use the prio scheduler on one
 * vcore. Modes: alone (no B: the probe's own cost), noboard (A and B share
 * the CPU as the kernel decides), board (both attached to one board: B's
 * vcore cedes the CPU while A has more urgent work ready).
 *
 * Prints RESULT bench=board impl=weft-probe-<mode> param=period=Pms,work=Kk
 * value=<p99 of the lateness, ms> unit=ms p50_ms= max_ms= n= and
 * b_units_per_s= (B's work while A ran). Exits 1 with FAIL if a process
 * fails, 77 if the board cannot be attached (no /dev/shm).
 */
#include "bench.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <weft/weft.h>

struct shared {
    _Atomic int stop;         /* B: finish */
    _Atomic int b_ready;      /* B's loaders run */
    _Atomic long b_units;     /* B's work units */
};

static struct shared *sh;
static char board[64];
static int mode_board;
static long period_ms = 5, work_k = 400, seconds = 3, loaders = 2;

static uint64_t mix(unsigned long k, uint64_t h)
{
    for (unsigned long i = 0; i < k * 1000; i++) {
        h += 0x9e3779b97f4a7c15ull;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
        h ^= h >> 31;
    }
    return h;
}

static void start(void)
{
    weft_set_preempt_period(1000);
    struct weft_config c = { .vcores = 1, .sched = "prio" };
    bench_check_rc(weft_init(&c));
    if (mode_board) {
        int r = weft_board_attach(board);
        if (r == ENOSYS || r == ENOENT || r == EACCES) {
            fprintf(stderr, "SKIP weft_board2: cannot attach a board (%s)\n", strerror(r));
            exit(77);
        }
        bench_check_rc(r);
    }
}

/* ---- B ------------------------------------------------------------------------------ */

static void *loader(void *arg)
{
    uint64_t h = (uintptr_t)arg;
    atomic_store(&sh->b_ready, 1);
    while (!atomic_load(&sh->stop)) {
        h = mix(10, h); /* ~20 us */
        atomic_fetch_add(&sh->b_units, 1);
        weft_now_ns(); /* a safe point, for sanitizer builds that defer signals */
    }
    return (void *)(uintptr_t)(h | 1);
}

static int run_b(void)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    start();
    weft_t t[16];
    weft_attr_t a = { .prio = -30 };
    for (long i = 0; i < loaders; i++)
        bench_check_rc(weft_spawn(&t[i], &a, loader, (void *)(uintptr_t)(i + 1)));
    for (long i = 0; i < loaders; i++)
        bench_check_rc(weft_join(t[i], NULL));
    if (mode_board)
        weft_board_detach();
    weft_shutdown();
    return 0;
}

/* ---- A ------------------------------------------------------------------------------ */

static double *late_ms;
static long nlate;

static void *probe(void *arg)
{
    (void)arg;
    uint64_t period = (uint64_t)period_ms * 1000000u, h = 1;
    uint64_t t0 = weft_now_ns() + period, end = t0 + (uint64_t)seconds * 1000000000u;
    for (uint64_t due = t0; due < end; due += period) {
        bench_check_rc(weft_sleep_until_ns(due));
        h = mix((unsigned long)work_k, h);
        uint64_t done = weft_now_ns();
        late_ms[nlate++] = (double)(done - due) / 1e6;
        while (due + period < done) /* a missed slot is not run late: the next one is */
            due += period;
    }
    return (void *)(uintptr_t)(h | 1);
}

static _Noreturn void usage(void)
{
    fprintf(stderr, "usage: weft_board2 --mode alone|noboard|board [--seconds S] "
                    "[--period-ms P] [--work-k K] [--loaders N]\n");
    exit(2);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const char *mode = "alone";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mode")) mode = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds")) seconds = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--period-ms")) period_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--work-k")) work_k = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--loaders")) loaders = atol(argv[i + 1]);
        else usage();
    }
    bool with_b = strcmp(mode, "alone") != 0;
    mode_board = strcmp(mode, "board") == 0;
    if ((with_b && !mode_board && strcmp(mode, "noboard") != 0) || seconds < 1 || period_ms < 1 ||
        work_k < 1 || loaders < 1 || loaders > 16)
        usage();
    snprintf(board, sizeof board, "weft-bench-%d", (int)getpid());
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        bench_fail("mmap: %s", strerror(errno));
    fflush(NULL);
    pid_t b = -1;
    if (with_b) {
        b = fork();
        if (b < 0)
            bench_fail("fork: %s", strerror(errno));
        if (b == 0)
            _exit(run_b());
    }
    start();
    if (with_b) {
        uint64_t until = bench_now_ns() + 10000000000ull;
        while (!atomic_load(&sh->b_ready) && bench_now_ns() < until)
            weft_sleep_ns(1000000);
        if (!atomic_load(&sh->b_ready))
            bench_fail("process B did not start");
    }
    late_ms = malloc(sizeof(double) * (size_t)(seconds * 1000 / period_ms + 16));
    long u0 = atomic_load(&sh->b_units);
    uint64_t a0 = bench_now_ns();
    weft_attr_t a = { .prio = 30 };
    weft_t t;
    bench_check_rc(weft_spawn(&t, &a, probe, NULL));
    bench_check_rc(weft_join(t, NULL));
    double b_rate = (double)(atomic_load(&sh->b_units) - u0) / ((double)(bench_now_ns() - a0) / 1e9);
    atomic_store(&sh->stop, 1);
    if (with_b) {
        int st;
        if (waitpid(b, &st, 0) != b || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bench_fail("process B failed (status %#x)", st);
    }
    if (mode_board) {
        weft_board_detach();
        weft_board_remove(board);
    }
    weft_shutdown();
    if (nlate < 10)
        bench_fail("only %ld probes ran", nlate);
    qsort(late_ms, (size_t)nlate, sizeof(double), cmp);
    char param[64];
    snprintf(param, sizeof param, "period=%ldms,work=%ldk", period_ms, work_k);
    char impl[32];
    snprintf(impl, sizeof impl, "weft-probe-%s", mode);
    printf("RESULT bench=board impl=%s param=%s value=%.4f unit=ms p50_ms=%.4f max_ms=%.4f n=%ld "
           "b_units_per_s=%.0f\n", impl, param, late_ms[(nlate * 99) / 100], late_ms[nlate / 2],
           late_ms[nlate - 1], nlate, b_rate);
    bench_note(impl, "probe at prio 30 every %ld ms, %ldk mixing rounds; B: %ld loaders at "
                     "prio -30 (%s)", period_ms, work_k, loaders,
               with_b ? (mode_board ? "board attached" : "no board") : "not started");
    return 0;
}
