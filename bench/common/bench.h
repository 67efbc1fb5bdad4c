/*
 * bench.h — the little harness every C micro-benchmark shares (weft programs
 * and kernel peers alike), so that they all time, size and report the same way.
 *
 * Output contract (parsed by bench/micro.py), one line per measurement:
 *
 *   RESULT bench=<bench> impl=<impl> param=<param> value=<number> unit=<unit>
 *
 * plus optional "NOTE impl=<impl> <free text>" lines. Tokens never contain
 * spaces. A program that finds its own work wrong prints "FAIL ..." on stderr
 * and exits 1: a number from a broken run is worse than no number.
 *
 * Sizing: bench_measure() runs a warm-up that doubles the iteration count
 * until one run takes BENCH_WARMUP_NS, then one timed run sized for the
 * target duration (BENCH_TARGET_MS in the environment, default 400 ms).
 */
#ifndef WEFT_BENCH_BENCH_H
#define WEFT_BENCH_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* pthread_setaffinity_np, CPU_SET */
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_WARMUP_NS (50u * 1000 * 1000)   /* one warm-up run at least this long */

/* bench_now_ns() returns CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* bench_fail() reports a benchmark that did not do what it was asked and exits 1. */
__attribute__((noreturn, format(printf, 1, 2)))
static inline void bench_fail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("FAIL ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* bench_check_rc() fails loudly when a call that returns an errno value did not return 0. */
#define bench_check_rc(call)                                                   \
    do {                                                                       \
        int bench_rc_ = (call);                                                \
        if (bench_rc_ != 0)                                                    \
            bench_fail("%s:%d: %s returned %d (%s)", __FILE__, __LINE__,       \
                       #call, bench_rc_, strerror(bench_rc_));                 \
    } while (0)

/* bench_result() prints one RESULT line and flushes it (the driver reads lines). */
static inline void bench_result(const char *bench, const char *impl, const char *param,
                                double value, const char *unit)
{
    printf("RESULT bench=%s impl=%s param=%s value=%.3f unit=%s\n", bench, impl, param,
           value, unit);
    fflush(stdout);
}

/* bench_note() prints one NOTE line for the report. */
__attribute__((format(printf, 2, 3)))
static inline void bench_note(const char *impl, const char *fmt, ...)
{
    va_list ap;
    printf("NOTE impl=%s ", impl);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* bench_target_ns() is the timed run's intended length. */
static inline uint64_t bench_target_ns(void)
{
    const char *s = getenv("BENCH_TARGET_MS");
    long ms = s ? strtol(s, NULL, 10) : 0;
    if (ms <= 0)
        ms = 400;
    return (uint64_t)ms * 1000000u;
}

/* A measurement: run(ctx, n) performs n iterations (checking them) and
 * returns the nanoseconds they took. */
typedef uint64_t (*bench_run_fn)(void *ctx, uint64_t n);

struct bench_sample {
    uint64_t iters;   /* iterations of the timed run */
    uint64_t ns;      /* its duration */
};

/* bench_measure() warms up (doubling n from n0 until a run lasts
 * BENCH_WARMUP_NS, at most max_iters), then does one timed run sized for
 * bench_target_ns() and returns it. */
static inline struct bench_sample bench_measure(bench_run_fn run, void *ctx, uint64_t n0,
                                                uint64_t max_iters)
{
    uint64_t n = n0 ? n0 : 1, ns;
    for (;;) {
        ns = run(ctx, n);
        if (ns >= BENCH_WARMUP_NS || n >= max_iters)
            break;
        n *= 2;
    }
    double per = (double)(ns ? ns : 1) / (double)n;
    double want = (double)bench_target_ns() / per;
    uint64_t timed = want < 1.0 ? 1 : (uint64_t)want;
    if (timed > max_iters)
        timed = max_iters;
    struct bench_sample s = { timed, run(ctx, timed) };
    return s;
}

/* bench_pin_self() pins the calling kernel thread to cpu, or fails loudly. */
static inline void bench_pin_self(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    bench_check_rc(pthread_setaffinity_np(pthread_self(), sizeof set, &set));
}

/* bench_affinity_cpus() writes the first (up to) max CPUs of the process's
 * affinity mask to cpu[], in order, and returns how many it wrote. */
static inline int bench_affinity_cpus(int *cpu, int max)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        bench_fail("sched_getaffinity: %s", strerror(errno));
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set))
            cpu[n++] = c;
    return n;
}

/* bench_need_cpus() exits 77 ("skipped") unless CPUs 0..n-1 are all usable. */
static inline void bench_need_cpus(int n)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        bench_fail("sched_getaffinity: %s", strerror(errno));
    for (int i = 0; i < n; i++)
        if (!CPU_ISSET(i, &set)) {
            fprintf(stderr, "SKIP needs CPUs 0..%d in the affinity mask\n", n - 1);
            exit(77);
        }
}

#endif /* WEFT_BENCH_BENCH_H */
