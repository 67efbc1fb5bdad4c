/*
 * wakelat.c — wake-up latency under load (issue 5): how late a uthread that
 * sleeps 1 ms wakes while CPU-bound uthreads keep every vcore busy.
 *
 *   weft_wakelat [--spinners S] [--seconds D] [--preempt-us P] [--placed 0|1]
 *
 * S = 4 × vcores, D = 2, P = 0 (cooperative) by default. After weft_init()
 * main sets the period (weft_set_preempt_period(P)), spawns the probe on
 * vcore 0 and waits until it runs, then spawns the S spinners on vcores
 * i % vcores (WEFT_ON_VCORE; work stealing may move them). The probe loops:
 * t = weft_now_ns(); weft_sleep_ns(1 ms); late = weft_now_ns() - (t + 1 ms),
 * until the stop flag is set. A spinner runs a xorshift step in a loop that
 * calls nothing and reads the stop flag, so only a preemption takes its vcore
 * away. Main, a kernel thread outside the runtime, sleeps D seconds, sets the
 * flag and joins everyone. --placed 0 spawns the probe and the spinners
 * with default attributes instead (no vcore hint: they start on the
 * spawner's side and spread by stealing, as a user writes it); impl then
 * ends in -default. It prints as NOTEs the vcores the spinners
 * started on and their steps' spread (min and max over the mean: how evenly
 * preemption shared the vcores), the per-vcore weft_stats(), and
 *
 *   RESULT bench=wakelat impl=<impl> param=spinners=<S> value=<p99> unit=ms
 *          p50=<ms> max=<ms> wakeups=<n> preempt_taken=... preempt_deferred=...
 *          longest_stretch_ms=...
 *
 * (nearest-rank percentiles of the lateness of every wake-up, the last one,
 * after the flag, included). impl = weft-nopreempt or weft-preempt-<P/1000>ms
 * (<P>us if not whole milliseconds). Without preemption nothing makes the
 * spinners give up their vcores: the probe wakes when they stop, once, about
 * D seconds late; that is the expected result, not a failure.
 *
 * Checks (FAIL, exit 1): no wake-up at all, a sleep that returned early
 * (late < 0), and with preemption a spinner that never ran. Exit 2: bad
 * command line.
 */
#include "bench.h"
#include "opts.h"
#include "vcore_stats.h"

#include <stdatomic.h>
#include <weft/weft.h>
#include <weft/event.h>

#define SLEEP_NS 1000000u

static volatile uint64_t seed = 0x9e3779b97f4a7c15u;

static struct {
    atomic_int stop;
    weft_wg_t probe_ready;
    int64_t *late;             /* ns, one per wake-up */
    size_t cap, n;
    size_t early;              /* sleeps that returned before their time */
    volatile uint64_t *sink;   /* per spinner */
    int *first_vcore;          /* per spinner: where it started */
} g;

static void *probe(void *unused)
{
    (void)unused;
    weft_wg_done(&g.probe_ready);
    while (!atomic_load_explicit(&g.stop, memory_order_acquire) && g.n < g.cap) {
        uint64_t t = weft_now_ns();
        bench_check_rc(weft_sleep_ns(SLEEP_NS));
        int64_t late = (int64_t)(weft_now_ns() - (t + SLEEP_NS));
        g.early += late < 0;
        g.late[g.n++] = late;
    }
    return NULL;
}

static void *spinner(void *arg)
{
    uint64_t x = seed, n = 0;
    g.first_vcore[(size_t)(uintptr_t)arg] = weft_vcore_id();
    while (!atomic_load_explicit(&g.stop, memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        n++;
    }
    g.sink[(size_t)(uintptr_t)arg] = x;
    return (void *)(uintptr_t)n;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* pct() is the nearest-rank percentile p (0..100] of the sorted lateness, in ms. */
static double pct(unsigned p)
{
    size_t rank = (g.n * p + 99) / 100;
    return (double)g.late[rank ? rank - 1 : 0] / 1e6;
}

/* join_spinners() joins the spinners, prints how their steps and the vcores
 * they started on were spread (a NOTE), and returns how many never ran
 * before the stop flag. */
static uint64_t join_spinners(const char *impl, weft_t *ts, uint64_t spinners, int nv)
{
    uint64_t idle = 0, lo = UINT64_MAX, hi = 0, total = 0;
    char where[256];
    size_t len = 0;
    for (uint64_t i = 0; i < spinners; i++) {
        void *r;
        bench_check_rc(weft_join(ts[i], &r));
        uint64_t n = (uint64_t)(uintptr_t)r;
        idle += n == 0;
        lo = n < lo ? n : lo;
        hi = n > hi ? n : hi;
        total += n;
    }
    for (int v = 0; v < nv && len < sizeof where; v++) {
        int on = 0;
        for (uint64_t i = 0; i < spinners; i++)
            on += g.first_vcore[i] == v;
        len += (size_t)snprintf(where + len, sizeof where - len, "%s%d", v ? "," : "", on);
    }
    double mean = (double)total / (double)spinners;
    bench_note(impl, "spinners started on vcores 0..%d: %s; steps per spinner min %.2f max %.2f "
               "of the mean; %llu never ran before the stop", nv - 1, where, mean ? (double)lo / mean : 0.0,
               mean ? (double)hi / mean : 0.0, (unsigned long long)idle);
    return idle;
}

int main(int argc, char **argv)
{
    uint64_t spinners = 0, seconds = 2, preempt_us = 0, placed = 1;
    struct bench_opt opts[] = {
        { "--spinners", &spinners, 1, 1u << 16 },
        { "--seconds", &seconds, 1, 3600 },
        { "--preempt-us", &preempt_us, 0, 10000000 },
        { "--placed", &placed, 0, 1 },
    };
    bench_opts_parse(argc, argv, "[--spinners S] [--seconds D] [--preempt-us P] [--placed 0|1]",
                     opts, sizeof opts / sizeof opts[0]);
    char impl[48], stats[160];
    if (!preempt_us)
        snprintf(impl, sizeof impl, "weft-nopreempt");
    else if (preempt_us % 1000 == 0)
        snprintf(impl, sizeof impl, "weft-preempt-%llums", (unsigned long long)preempt_us / 1000);
    else
        snprintf(impl, sizeof impl, "weft-preempt-%lluus", (unsigned long long)preempt_us);
    if (!placed)
        strcat(impl, "-default");

    bench_check_rc(weft_init(NULL));
    bench_check_rc(weft_set_preempt_period((unsigned)preempt_us));
    int nv = weft_num_vcores();
    if (!spinners)
        spinners = 4 * (uint64_t)nv;
    g.cap = seconds * 1000 + 1000;   /* each wake-up comes at least 1 ms after the last */
    g.late = calloc(g.cap, sizeof *g.late);
    g.sink = calloc(spinners, sizeof *g.sink);
    g.first_vcore = calloc(spinners, sizeof *g.first_vcore);
    weft_t *ts = calloc(spinners + 1, sizeof *ts);
    if (!g.late || !g.sink || !g.first_vcore || !ts)
        bench_fail("%s wakelat: no memory", impl);

    bench_check_rc(weft_wg_add(&g.probe_ready, 1));
    weft_attr_t pattr = { .flags = placed ? WEFT_ON_VCORE : 0, .vcore = 0, .name = "probe" };
    bench_check_rc(weft_spawn(&ts[spinners], &pattr, probe, NULL));
    bench_check_rc(weft_wg_wait(&g.probe_ready));
    for (uint64_t i = 0; i < spinners; i++) {
        weft_attr_t attr = { .flags = placed ? WEFT_ON_VCORE : 0,
                             .vcore = placed ? (int)(i % (uint64_t)nv) : 0 };
        bench_check_rc(weft_spawn(&ts[i], &attr, spinner, (void *)(uintptr_t)i));
    }
    bench_check_rc(weft_sleep_ns(seconds * 1000000000u));
    atomic_store_explicit(&g.stop, 1, memory_order_release);

    bench_check_rc(weft_join(ts[spinners], NULL));
    uint64_t idle = join_spinners(impl, ts, spinners, nv);
    bench_note(impl, "vcores=%d spinners=%llu (spinner i spawned on vcore i%%%d) for %llu s; "
               "probe spawned on vcore 0 slept 1 ms %zu times; period %u us%s", nv,
               (unsigned long long)spinners, nv, (unsigned long long)seconds, g.n,
               weft_preempt_period(), placed ? "" : " (default placement: no vcore hints)");
    bench_vcore_stats(impl, stats, sizeof stats);
    weft_shutdown();

    if (g.n == 0 || g.n == g.cap)
        bench_fail("%s wakelat: the probe woke %zu times in %llu s", impl, g.n,
                   (unsigned long long)seconds);
    if (g.early)
        bench_fail("%s wakelat: %zu of %zu 1 ms sleeps returned early", impl, g.early, g.n);
    if (preempt_us && idle)
        bench_fail("%s wakelat: %llu of %llu spinners never ran in %llu s with preemption", impl,
                   (unsigned long long)idle, (unsigned long long)spinners,
                   (unsigned long long)seconds);
    qsort(g.late, g.n, sizeof *g.late, cmp_i64);
    printf("RESULT bench=wakelat impl=%s param=spinners=%llu value=%.3f unit=ms p50=%.3f "
           "max=%.3f wakeups=%zu%s\n", impl, (unsigned long long)spinners, pct(99), pct(50),
           pct(100), g.n, stats);
    fflush(stdout);
    free(g.late);
    free((void *)g.sink);
    free(g.first_vcore);
    free(ts);
    return 0;
}
