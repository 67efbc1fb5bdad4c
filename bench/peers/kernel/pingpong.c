/*
 * pingpong.c (kernel peer) — round-trip nanoseconds between two kernel
 * threads handing a turn back and forth
 *   impl=kernel-futex  through a raw futex on two words (FUTEX_WAIT_PRIVATE /
 *                      FUTEX_WAKE_PRIVATE, no spinning: every hand-off is a
 *                      wake syscall and every wait a wait syscall);
 *   impl=kernel-pipe   through two pipes, one byte each way;
 * with A pinned to CPU 0 and B to CPU 1 (param cpus=0,1), and with both
 * pinned to CPU 0 (param cpus=0), as in Turner's "User-level threads... with
 * threads" talk. A does the timing and checks every reply.
 *
 * An extra, impl=kernel-futex-spin (cpus=0,1 only): the taker spins up to
 * SPIN_LIMIT pauses before it sleeps, and the giver makes the wake syscall
 * only when the taker said it sleeps. weft's idle vcores spin before they
 * park, so this row shows how much of weft's lead over the plain futex is
 * spinning rather than user-level switching.
 *
 * Options for other tables (bench/weft/netpingpong.c compares against the
 * pipe variant): --bench=NAME labels the RESULT lines (default pingpong);
 * --layout=L (repeatable) picks the layouts from cpus=0,1 (A on CPU 0, B on
 * CPU 1), cpus=0 (both on CPU 0) and unpinned (neither thread pinned: the
 * kernel places them within the process's affinity mask). Default: cpus=0,1
 * and cpus=0. Every variant runs in every layout (futex-spin only where A
 * and B are pinned to different CPUs).
 *
 * --bench=baseline is the kernel baseline of the issue ("a pipe ping-pong and
 * a futex ping-pong between two kernel threads, pinned to one CPU and
 * unpinned on two"): nanoseconds per *switch*, a round trip being two
 * (A -> B, B -> A), as Turner's talk counts them (500 000 round trips of
 * pipe_test = 1 million context switches), printed as
 *   RESULT bench=baseline impl=kernel-futex|kernel-pipe param=cpus=0|unpinned
 *          value=<ns per switch> unit=ns
 * Its defaults are futex and pipe, layouts cpus=0 and unpinned. (The
 * sched_yield companion: kernel_yield --bench=baseline.)
 *
 * Usage: kernel_pingpong [--bench=NAME] [--layout=L]... [futex|pipe|futex-spin]...
 *        (default: all three; with --bench=baseline, futex and pipe)
 */
#include "bench.h"

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- futex ------------------------------------------------------------------ */

struct futex_pp {
    _Alignas(64) _Atomic uint32_t to_a;    /* 1: A's turn; A waits on it */
    _Alignas(64) _Atomic uint32_t to_b;    /* 1: B's turn; B waits on it */
    _Alignas(64) atomic_int stop;
    atomic_uint_fast64_t replies;          /* written by B only */
};

static struct futex_pp fp;

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    if (syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0) != 0 &&
        errno != EAGAIN && errno != EINTR)
        bench_fail("FUTEX_WAIT: %s", strerror(errno));
}

static void futex_wake(_Atomic uint32_t *w)
{
    if (syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0)
        bench_fail("FUTEX_WAKE: %s", strerror(errno));
}

/* futex_give() hands the turn over through the other side's word `to`. */
static void futex_give(_Atomic uint32_t *to)
{
    atomic_store(to, 1);
    futex_wake(to);
}

/* futex_take() sleeps until the turn arrives on our word `mine`, then consumes it. */
static void futex_take(_Atomic uint32_t *mine)
{
    while (atomic_load(mine) == 0)
        futex_wait(mine, 0);
    atomic_store(mine, 0);
}

/* pin_b() pins a B thread to cpu, or leaves it unpinned (cpu < 0). */
static void pin_b(void *cpu)
{
    if ((intptr_t)cpu >= 0)
        bench_pin_self((int)(intptr_t)cpu);
}

static void *futex_b(void *cpu)
{
    pin_b(cpu);
    for (;;) {
        futex_take(&fp.to_b);
        if (atomic_load(&fp.stop))
            break;
        atomic_fetch_add(&fp.replies, 1);
        futex_give(&fp.to_a);
    }
    return NULL;
}

static uint64_t run_futex(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t base = atomic_load(&fp.replies), t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        futex_give(&fp.to_b);
        futex_take(&fp.to_a);
        if (atomic_load(&fp.replies) - base != i)
            bench_fail("futex pingpong: round trip %llu without exactly one reply",
                       (unsigned long long)i);
    }
    return bench_now_ns() - t0;
}

static struct bench_sample measure_futex(int cpu_b)
{
    pthread_t b;
    atomic_store(&fp.stop, 0);
    atomic_store(&fp.to_a, 0);
    atomic_store(&fp.to_b, 0);
    bench_check_rc(pthread_create(&b, NULL, futex_b, (void *)(intptr_t)cpu_b));
    struct bench_sample s = bench_measure(run_futex, NULL, 1000, 1u << 26);
    atomic_store(&fp.stop, 1);
    futex_give(&fp.to_b);
    bench_check_rc(pthread_join(b, NULL));
    return s;
}

/* ---- futex, spin first ---------------------------------------------------------- */

#define SPIN_LIMIT 4000   /* pauses before sleeping: a few tens of microseconds */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* Word states: 0 not your turn, 1 your turn, 2 not your turn and you sleep on it. */
static void spin_give(_Atomic uint32_t *to)
{
    if (atomic_exchange(to, 1) == 2)
        futex_wake(to);
}

static void spin_take(_Atomic uint32_t *mine)
{
    for (int i = 0; i < SPIN_LIMIT; i++) {
        if (atomic_load_explicit(mine, memory_order_relaxed) == 1)
            break;
        cpu_relax();
    }
    for (;;) {
        uint32_t v = 0;
        if (atomic_load(mine) == 1 ||
            (!atomic_compare_exchange_strong(mine, &v, 2) && v == 1))
            break;
        futex_wait(mine, 2);
    }
    atomic_store(mine, 0);
}

static void *spin_b(void *cpu)
{
    pin_b(cpu);
    for (;;) {
        spin_take(&fp.to_b);
        if (atomic_load(&fp.stop))
            break;
        atomic_fetch_add(&fp.replies, 1);
        spin_give(&fp.to_a);
    }
    return NULL;
}

static uint64_t run_spin(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t base = atomic_load(&fp.replies), t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        spin_give(&fp.to_b);
        spin_take(&fp.to_a);
        if (atomic_load(&fp.replies) - base != i)
            bench_fail("futex-spin pingpong: round trip %llu without exactly one reply",
                       (unsigned long long)i);
    }
    return bench_now_ns() - t0;
}

static struct bench_sample measure_spin(int cpu_b)
{
    pthread_t b;
    atomic_store(&fp.stop, 0);
    atomic_store(&fp.to_a, 0);
    atomic_store(&fp.to_b, 0);
    bench_check_rc(pthread_create(&b, NULL, spin_b, (void *)(intptr_t)cpu_b));
    struct bench_sample s = bench_measure(run_spin, NULL, 1000, 1u << 26);
    atomic_store(&fp.stop, 1);
    spin_give(&fp.to_b);
    bench_check_rc(pthread_join(b, NULL));
    return s;
}

/* ---- pipe ------------------------------------------------------------------- */

static int a_to_b[2], b_to_a[2];   /* [0] read end, [1] write end */

static void *pipe_b(void *cpu)
{
    unsigned char c;
    ssize_t r;
    pin_b(cpu);
    while ((r = read(a_to_b[0], &c, 1)) == 1) {
        c = (unsigned char)~c;
        if (write(b_to_a[1], &c, 1) != 1)
            bench_fail("pipe pingpong: B write: %s", strerror(errno));
    }
    if (r < 0)
        bench_fail("pipe pingpong: B read: %s", strerror(errno));
    return NULL;   /* A closed its end */
}

static uint64_t run_pipe(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        unsigned char out = (unsigned char)i, in;
        if (write(a_to_b[1], &out, 1) != 1)
            bench_fail("pipe pingpong: A write: %s", strerror(errno));
        if (read(b_to_a[0], &in, 1) != 1)
            bench_fail("pipe pingpong: A read: %s", strerror(errno));
        if (in != (unsigned char)~out)
            bench_fail("pipe pingpong: sent %#x, got back %#x", out, in);
    }
    return bench_now_ns() - t0;
}

static struct bench_sample measure_pipe(int cpu_b)
{
    pthread_t b;
    if (pipe(a_to_b) != 0 || pipe(b_to_a) != 0)
        bench_fail("pipe: %s", strerror(errno));
    bench_check_rc(pthread_create(&b, NULL, pipe_b, (void *)(intptr_t)cpu_b));
    struct bench_sample s = bench_measure(run_pipe, NULL, 1000, 1u << 26);
    close(a_to_b[1]);
    bench_check_rc(pthread_join(b, NULL));
    close(a_to_b[0]);
    close(b_to_a[0]);
    close(b_to_a[1]);
    return s;
}

/* ---- main ------------------------------------------------------------------- */

static const struct layout {
    int cpu_a;           /* -1: unpinned */
    int cpu_b;
    const char *param;
} layouts[] = {
    { 0, 1, "cpus=0,1" },
    { 0, 0, "cpus=0" },
    { -1, -1, "unpinned" },
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--bench=NAME] [--layout=cpus=0,1|cpus=0|unpinned]... "
            "[futex|pipe|futex-spin]...\n", argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    int want_futex = 0, want_pipe = 0, want_spin = 0, any = 0;
    int want_layout[NLAYOUTS] = { 0 };
    int layouts_given = 0;
    const char *bench = "pingpong";
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--bench=", 8) == 0 && argv[i][8]) {
            bench = argv[i] + 8;
        } else if (strncmp(argv[i], "--layout=", 9) == 0) {
            size_t k = 0;
            while (k < NLAYOUTS && strcmp(argv[i] + 9, layouts[k].param) != 0)
                k++;
            if (k == NLAYOUTS) {
                fprintf(stderr, "unknown layout '%s'\n", argv[i] + 9);
                usage(argv[0]);
            }
            want_layout[k] = layouts_given = 1;
        } else if (strcmp(argv[i], "futex") == 0) {
            want_futex = any = 1;
        } else if (strcmp(argv[i], "pipe") == 0) {
            want_pipe = any = 1;
        } else if (strcmp(argv[i], "futex-spin") == 0) {
            want_spin = any = 1;
        } else {
            usage(argv[0]);
        }
    }
    /* baseline: ns per switch (half a round trip), futex and pipe, cpus=0 and unpinned */
    int baseline = strcmp(bench, "baseline") == 0;
    if (!any) {
        want_futex = want_pipe = 1;
        want_spin = !baseline;
    }
    if (!layouts_given) {
        if (baseline)
            want_layout[1] = want_layout[2] = 1;   /* cpus=0 and unpinned */
        else
            want_layout[0] = want_layout[1] = 1;   /* cpus=0,1 and cpus=0 */
    }
    const char *unit = baseline ? "ns" : "ns/roundtrip";
    double per = baseline ? 2.0 : 1.0;   /* switches per round trip, for baseline */
    bench_need_cpus(2);

    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        bench_fail("sched_getaffinity: %s", strerror(errno));

    for (size_t k = 0; k < NLAYOUTS; k++) {
        if (!want_layout[k])
            continue;
        /* main is A */
        if (layouts[k].cpu_a >= 0)
            bench_pin_self(layouts[k].cpu_a);
        else
            bench_check_rc(pthread_setaffinity_np(pthread_self(), sizeof all, &all));
        struct bench_sample s;
        if (want_futex) {
            s = measure_futex(layouts[k].cpu_b);
            bench_result(bench, "kernel-futex", layouts[k].param,
                         (double)s.ns / (double)s.iters / per, unit);
        }
        if (want_pipe) {
            s = measure_pipe(layouts[k].cpu_b);
            bench_result(bench, "kernel-pipe", layouts[k].param,
                         (double)s.ns / (double)s.iters / per, unit);
        }
        /* spinning only makes sense on two CPUs of our own: on a shared CPU it delays the other side */
        if (want_spin && layouts[k].cpu_a >= 0 && layouts[k].cpu_b != layouts[k].cpu_a) {
            s = measure_spin(layouts[k].cpu_b);
            bench_result(bench, "kernel-futex-spin", layouts[k].param,
                         (double)s.ns / (double)s.iters / per, unit);
        }
    }
    return 0;
}
