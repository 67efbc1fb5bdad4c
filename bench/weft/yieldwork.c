/*
 * yieldwork.c — the yield pass's benchmark (issue 6): the EPFL seed's two
 * programs, counting and pointer chasing, and a small real program, sorting
 * (bench/common/yieldwork.h), run by T uthreads on one vcore. One source,
 * one binary per compile-time variant (bench/CMakeLists.txt):
 *
 *   weft_yieldwork[_O0]           gcc or clang, no pass: weft-uninstrumented
 *                                 (each uthread runs to completion), or with
 *                                 --yield-every K weft-yield-<K> (weft_yield()
 *                                 every K iterations, by hand)
 *   weft_yieldwork_flag[_O0]      clang + the pass, flag mode (YW_FLAG):
 *                                 weft-flag-<P> with --preempt-us P, the
 *                                 quantum after which the ticker sets the flag
 *   weft_yieldwork_counter<N>     clang + the pass, counter mode, threshold N
 *                                 (YW_COUNTER=N): weft-counter-<N>
 *
 *   weft_yieldwork count|chase|sort [--threads T] [--work N] [--yield-every K]
 *                  [--preempt-us P] [--intervals 0|1]
 *
 * T = 2, N = total iterations (split evenly), K = 0 (no manual yield; sort
 * yields between two arrays once K elements were sorted), P = 0.
 * The runtime: weft_config.vcores = 1 (weft pins its vcore to a CPU), the
 * period P set with weft_set_preempt_period(). The driver runs every weft
 * variant with WEFT_PREEMPT_SIGNALS=0, so only the pass's checks yield.
 *
 * Intervals between yields (instrumented variants, YW_WRAP, linked with
 * -Wl,--wrap=weft__yield_slow,--wrap=weft__yield_count_slow): with
 * --intervals 1 the wrappers record, per uthread, the time from the moment
 * it got the CPU back (its start after the gate, or the return from a slow
 * path that yielded) to its next slow-path entry: how long it ran between
 * two yields. A slow path counts as a yield when the vcores' preempt_taken
 * (weft_stats()) grew across it: the runtime took it as a preemption and
 * went through the scheduler (a stale flag it ignored does not count; those
 * are reported as `ignored`). Recording costs two clock reads and a lookup
 * per slow path, so the timed runs (--intervals 0, the default) do not
 * record: their wrappers only test a global and call the real slow path.
 * With --intervals 1 the program prints, instead of the timing row,
 *
 *   RESULT bench=yieldpass impl=<impl> param=<prog>,threads=<T>,<opt>,intervals
 *          value=<max us> unit=us p50=<us> p99=<us> yields=<n> ignored=<n>
 *          total_s=<s>
 *
 * (percentiles from a log-linear histogram, 1/32 resolution; the max exact),
 * and in flag mode max_cpu=<us>: the longest interval counted in the vcore
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which leaves out the time the
 * kernel gave that CPU to something else (a system call per read: counter
 * mode's slow paths are too frequent for it).
 *
 * Start: main (a kernel thread outside the runtime) spawns every uthread;
 * each waits on a ready wait group and a gate; main takes t0 and opens the
 * gate; each uthread stamps its finish; main joins them (untimed) and prints
 * the vcore's weft_stats().
 *
 * Peer: bench/peers/kernel/yieldwork.c (pthreads pinned to one CPU).
 * Exit: 0 measured, 1 FAIL (a wrong result, a failed weft call), 2 bad
 * command line.
 */
#include "bench.h"
#include "opts.h"
#include "vcore_stats.h"
#include "yieldwork.h"

#include <weft/weft.h>
#include <weft/event.h>
#include <weft/yield.h>

static struct yw_run run;
static weft_wg_t ready, gate;

/* ---- intervals between yields (instrumented variants) ------------------------ */

#ifdef YW_WRAP
/* Log-linear histogram of nanoseconds: exact below 64, then 32 buckets per
 * power of two. */
#define YW_HSUB 32u
#define YW_HBUCKETS (64u + 58u * YW_HSUB)

struct yw_rec {
    uint64_t last;            /* ns: got the CPU back; 0 = not started */
    uint64_t last_cpu;        /* the vcore thread's CPU time then (flag mode) */
    uint64_t max, max_cpu, yields, ignored;
    uint64_t hist[YW_HBUCKETS];
};

static struct yw_rec *recs;             /* per uthread */
static int recording;                   /* --intervals 1 */
static uintptr_t *rec_keys;             /* weft_t -> index + 1, open addressing */
static uint32_t *rec_vals;
static size_t rec_mask;

void __real_weft__yield_slow(void);
void __real_weft__yield_count_slow(void);

/* cpu_now() is the calling kernel thread's CPU time (flag mode only: a
 * system call, too slow for counter mode's frequent slow paths). */
static inline uint64_t cpu_now(void)
{
#ifdef YW_FLAG
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#else
    return 0;
#endif
}

static inline unsigned yw_bucket(uint64_t ns)
{
    if (ns < 64)
        return (unsigned)ns;
    unsigned e = 63u - (unsigned)__builtin_clzll(ns);   /* >= 6 */
    unsigned sub = (unsigned)(ns >> (e - 5)) & (YW_HSUB - 1);
    unsigned b = 64u + (e - 6) * YW_HSUB + sub;
    return b < YW_HBUCKETS ? b : YW_HBUCKETS - 1;
}

static inline uint64_t yw_bucket_low(unsigned b)
{
    if (b < 64)
        return b;
    unsigned e = (b - 64) / YW_HSUB + 6, sub = (b - 64) % YW_HSUB;
    return (1ull << e) + ((uint64_t)sub << (e - 5));
}

static inline size_t yw_hash(uintptr_t k)
{
    return (size_t)(((uint64_t)k >> 4) * 0x9e3779b97f4a7c15u >> 20) & rec_mask;
}

/* Filled by main before the gate opens; read-only afterwards. */
static void rec_insert(weft_t t, uint32_t i)
{
    size_t h = yw_hash((uintptr_t)t);
    while (rec_keys[h])
        h = (h + 1) & rec_mask;
    rec_keys[h] = (uintptr_t)t;
    rec_vals[h] = i;
}

WEFT_NOYIELD static struct yw_rec *rec_self(void)
{
    uintptr_t k = (uintptr_t)weft_self();
    if (!k)
        return NULL;
    for (size_t h = yw_hash(k);; h = (h + 1) & rec_mask) {
        if (rec_keys[h] == k)
            return &recs[rec_vals[h]];
        if (!rec_keys[h])
            return NULL;
    }
}

WEFT_NOYIELD static uint64_t preempt_taken(void)
{
    uint64_t n = 0;
    struct weft_vcore_stats st;
    for (int v = 0; v < weft_num_vcores(); v++)
        if (weft_stats(v, &st) == 0)
            n += st.preempt_taken;
    return n;
}

WEFT_NOYIELD static void record_slow(void (*real)(void))
{
    uint64_t in = bench_now_ns(), in_cpu = cpu_now();
    struct yw_rec *me = rec_self();
    if (!me) {
        real();
        return;
    }
    uint64_t before = preempt_taken();
    real();
    if (preempt_taken() == before) {
        me->ignored++;
        return;
    }
    if (me->last) {
        uint64_t d = in - me->last;
        me->hist[yw_bucket(d)]++;
        me->max = d > me->max ? d : me->max;
        d = in_cpu - me->last_cpu;
        me->max_cpu = d > me->max_cpu ? d : me->max_cpu;
        me->yields++;
    }
    me->last_cpu = cpu_now();
    me->last = bench_now_ns();
}

WEFT_NOYIELD void __wrap_weft__yield_slow(void)
{
    if (__builtin_expect(!recording, 1)) {
        __real_weft__yield_slow();
        return;
    }
    record_slow(__real_weft__yield_slow);
}

WEFT_NOYIELD void __wrap_weft__yield_count_slow(void)
{
    if (__builtin_expect(!recording, 1)) {
        __real_weft__yield_count_slow();
        return;
    }
    record_slow(__real_weft__yield_count_slow);
}

static void rec_setup(uint64_t threads)
{
    size_t size = 64;
    while (size < 4 * threads)
        size *= 2;
    rec_mask = size - 1;
    recs = calloc(threads, sizeof *recs);
    rec_keys = calloc(size, sizeof *rec_keys);
    rec_vals = calloc(size, sizeof *rec_vals);
    if (!recs || !rec_keys || !rec_vals)
        bench_fail("yieldwork: no memory for the interval records");
}

/* rec_report() merges the uthreads' histograms and prints the intervals row. */
static void rec_report(const char *impl, uint64_t total_ns)
{
    static uint64_t hist[YW_HBUCKETS];
    uint64_t n = 0, ignored = 0, max = 0, max_cpu = 0;
    for (uint64_t i = 0; i < run.threads; i++) {
        max_cpu = recs[i].max_cpu > max_cpu ? recs[i].max_cpu : max_cpu;
        for (unsigned b = 0; b < YW_HBUCKETS; b++)
            hist[b] += recs[i].hist[b];
        n += recs[i].yields;
        ignored += recs[i].ignored;
        max = recs[i].max > max ? recs[i].max : max;
    }
    double p[2] = { 0, 0 }, want[2] = { 0.50, 0.99 };
    for (int q = 0; q < 2 && n; q++) {
        uint64_t rank = (uint64_t)(want[q] * (double)n + 0.999999), seen = 0;
        rank = rank ? rank : 1;
        for (unsigned b = 0; b < YW_HBUCKETS; b++) {
            seen += hist[b];
            if (seen >= rank) {
                p[q] = (double)yw_bucket_low(b);
                break;
            }
        }
    }
    char cpu[48] = "";
#ifdef YW_FLAG
    snprintf(cpu, sizeof cpu, " max_cpu=%.3f", (double)max_cpu / 1e3);
#endif
    printf("RESULT bench=yieldpass impl=%s param=%s,threads=%llu,%s,intervals value=%.3f "
           "unit=us p50=%.3f p99=%.3f yields=%llu ignored=%llu total_s=%.4f%s\n", impl,
           run.prog_name, (unsigned long long)run.threads, YW_OPT, (double)max / 1e3,
           p[0] / 1e3, p[1] / 1e3, (unsigned long long)n, (unsigned long long)ignored,
           (double)total_ns / 1e9, cpu);
    fflush(stdout);
}
#endif /* YW_WRAP */

/* ---- the uthreads -------------------------------------------------------------- */

static void do_yield(void)
{
    weft_yield();
}

static void *worker(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    bench_check_rc(weft_wg_done(&ready));
    bench_check_rc(weft_wg_wait(&gate));
#ifdef YW_WRAP
    recs[i].last_cpu = cpu_now();
    recs[i].last = bench_now_ns();
#endif
    yw_work(&run, i);
    return NULL;
}

__attribute__((unused)) static void fmt_us(char *buf, size_t size, const char *prefix, uint64_t us)
{
    if (us && us % 1000 == 0)
        snprintf(buf, size, "%s%llums", prefix, (unsigned long long)us / 1000);
    else
        snprintf(buf, size, "%s%lluus", prefix, (unsigned long long)us);
}

/* impl_name() names the variant after how it was compiled and its options. */
static void impl_name(char *buf, size_t size, uint64_t preempt_us, uint64_t yield_every)
{
#if defined(YW_FLAG)
    fmt_us(buf, size, "weft-flag-", preempt_us);
#elif defined(YW_COUNTER)
    (void)preempt_us;                    /* counter mode ignores the clock */
    snprintf(buf, size, "weft-counter-%llu", (unsigned long long)(YW_COUNTER));
#else
    if (preempt_us)                      /* uninstrumented code, signal preemption */
        fmt_us(buf, size, "weft-signal-", preempt_us);
    else
        snprintf(buf, size, "weft-uninstrumented");
#endif
    if (yield_every) {
        size_t len = strlen(buf);
        if (strcmp(buf, "weft-uninstrumented") == 0)
            len = 4;                     /* "weft-yield-K" */
        snprintf(buf + len, size - len, "-yield-%llu", (unsigned long long)yield_every);
    }
}

int main(int argc, char **argv)
{
    uint64_t preempt_us = 0, intervals = 0;
    run.threads = 2;
    run.work = 100000000;
    struct bench_opt opts[] = {
        { "--threads", &run.threads, 1, YW_MAX_THREADS },
        { "--work", &run.work, 1, UINT64_MAX / 2 },
        { "--yield-every", &run.yield_every, 0, UINT64_MAX / 2 },
        { "--preempt-us", &preempt_us, 0, 10000000 },
        { "--intervals", &intervals, 0, 1 },
    };
    const char *usage = "count|chase|sort [--threads T] [--work N] [--yield-every K] "
                        "[--preempt-us P] [--intervals 0|1]";
    yw_parse(&run, argc, argv, opts, sizeof opts / sizeof opts[0], usage);
#ifndef YW_WRAP
    if (intervals) {
        fprintf(stderr, "%s: --intervals needs a variant compiled with the yield pass\n",
                argv[0]);
        return 2;
    }
#endif
    run.yield = run.yield_every ? do_yield : NULL;
    char impl[64], stats[160];
    impl_name(impl, sizeof impl, preempt_us, run.yield_every);
    yw_setup(&run);

    struct weft_config cfg = { .vcores = 1 };
    bench_check_rc(weft_init(&cfg));
    bench_check_rc(weft_set_preempt_period((unsigned)preempt_us));
    weft_t *ts = calloc(run.threads, sizeof *ts);
    if (!ts)
        bench_fail("yieldwork: no memory for %llu handles", (unsigned long long)run.threads);
#ifdef YW_WRAP
    rec_setup(run.threads);
    recording = (int)intervals;
#endif
    bench_check_rc(weft_wg_add(&ready, (int)run.threads));
    bench_check_rc(weft_wg_add(&gate, 1));
    for (uint64_t i = 0; i < run.threads; i++) {
        bench_check_rc(weft_spawn(&ts[i], NULL, worker, (void *)(uintptr_t)i));
#ifdef YW_WRAP
        rec_insert(ts[i], (uint32_t)i);
#endif
    }
    bench_check_rc(weft_wg_wait(&ready));
    run.t0 = bench_now_ns();
    bench_check_rc(weft_wg_done(&gate));
    for (uint64_t i = 0; i < run.threads; i++)
        bench_check_rc(weft_join(ts[i], NULL));
    const char *sig = getenv("WEFT_PREEMPT_SIGNALS");
    bench_note(impl, "vcores=%d; preemption period %u us; signal preemption %s", weft_num_vcores(),
               weft_preempt_period(), sig && strcmp(sig, "0") == 0 ? "off "
               "(WEFT_PREEMPT_SIGNALS=0)" : "on");
    bench_vcore_stats(impl, stats, sizeof stats);
    weft_shutdown();

#ifdef YW_WRAP
    if (intervals) {
        uint64_t first, last;
        yw_check(&run, impl, &first, &last);
        rec_report(impl, last);
    } else
#endif
        yw_report(&run, impl, stats);
    free(ts);
    yw_free(&run);
    return 0;
}
