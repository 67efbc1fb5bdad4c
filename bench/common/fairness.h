/*
 * fairness.h — what the two fixed-work fairness programs share
 * (bench/weft/fairness.c, bench/peers/kernel/fairness.c): the work, its
 * check, and the report of completion times.
 *
 * The work (after the parlib thesis's fixed-work experiment): every thread
 * runs `work` steps of a mixing loop (a xorshift64 step feeding an LCG-style
 * accumulator: two dependent chains the compiler can neither fold nor
 * vectorise) from the same seed, in chunks of `chunk` steps; the loop inside
 * a chunk calls nothing, so only a signal can interrupt it. Every thread
 * must end with the same sink value, which main computes once beforehand
 * (untimed): a thread that skipped work, or whose registers a switch
 * corrupted, fails the run.
 *
 * The report: the clock starts when main opens the start gate (every thread
 * has been created and has reached the gate), each thread takes its finish
 * time after storing its sink, and
 *
 *   RESULT bench=fairness impl=<impl> param=threads=<T> value=<s> unit=s
 *          first=<s> points=<P> curve=<s>,<s>,...[ <extra>]
 *
 * gives the total (the last finish), the first finish, and the completion
 * curve: point j (1..P) is the time by which j*T/P threads (integer
 * division) had finished; P = min(T, FAIR_CURVE_POINTS). Seconds from the
 * gate.
 */
#ifndef WEFT_BENCH_FAIRNESS_H
#define WEFT_BENCH_FAIRNESS_H

#include "bench.h"

#define FAIR_CURVE_POINTS 64

/* Not a constant to the compiler: the work cannot be computed at build time. */
static volatile uint64_t fair_seed = 0x9e3779b97f4a7c15u;

struct fair_state {
    uint64_t x, acc;
};

static inline struct fair_state fair_start(void)
{
    struct fair_state s = { fair_seed, 0 };
    return s;
}

/* fair_mix() advances s by n steps; it calls nothing. Never inlined, and
 * 64-byte aligned: every caller in every program (weft's, the pthread
 * peer's, fair_expected's measurement of one thread's work alone) runs the
 * same loop at the same place relative to a cache line. Inlined, the copies
 * sat at different addresses, and the one weft_fairness ran the whole work
 * in had its macro-fused compare-and-branch across a 32-byte boundary,
 * which the microcode for Intel's JCC erratum makes ~1.6x slower (a 2-vCPU
 * Cascade Lake VM: 9.75 s for 1024 threads' work at one vcore, 6.0 s with
 * the work cut in chunks): the run-to-completion rows measured code
 * placement. */
#if defined(__GNUC__) && !defined(__clang__)
#define FAIR_NOCLONE __attribute__((noclone)) /* no constant-propagated copy either */
#else
#define FAIR_NOCLONE
#endif
static __attribute__((noinline, aligned(64), unused)) FAIR_NOCLONE void fair_mix(struct fair_state *s,
                                                                               uint64_t n)
{
    uint64_t x = s->x, acc = s->acc;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc * 6364136223846793005u + x;
    }
    s->x = x;
    s->acc = acc;
}

static inline uint64_t fair_sink(const struct fair_state *s)
{
    return s->x ^ s->acc;
}

/* fair_expected() is the sink every thread must end with after work steps,
 * computed twice (the two must agree); *ns is the faster of the two
 * computations: one thread's work, alone. */
static inline uint64_t fair_expected(uint64_t work, uint64_t *ns)
{
    uint64_t sink[2];
    for (int k = 0; k < 2; k++) {
        uint64_t t0 = bench_now_ns();
        struct fair_state s = fair_start();
        fair_mix(&s, work);
        sink[k] = fair_sink(&s);
        uint64_t t = bench_now_ns() - t0;
        *ns = k == 0 || t < *ns ? t : *ns;
    }
    if (sink[0] != sink[1])
        bench_fail("fairness: the same work gave two different sinks");
    return sink[0];
}

static inline int fair_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

struct fair_run {
    const char *impl;
    size_t threads;
    uint64_t work, chunk;
    uint64_t expected, alone_ns;     /* fair_expected()'s */
    uint64_t t0;                     /* the gate opened */
    uint64_t *finish;                /* absolute ns per thread, 0 = never finished */
    const volatile uint64_t *sink;   /* per thread */
};

/* fair_report() checks every thread's sink and finish time, then prints the
 * RESULT line (extra appended as is, "" for none) and a NOTE. Sorts finish. */
static inline void fair_report(const struct fair_run *r, const char *extra)
{
    const char *impl = r->impl;
    size_t threads = r->threads;
    uint64_t t0 = r->t0, *finish = r->finish;
    size_t bad = 0, unfinished = 0;
    for (size_t i = 0; i < threads; i++) {
        bad += r->sink[i] != r->expected;
        unfinished += finish[i] < t0;
    }
    if (bad || unfinished)
        bench_fail("%s fairness: %zu of %zu threads ended with a wrong sink, %zu have no "
                   "finish time", impl, bad, threads, unfinished);
    qsort(finish, threads, sizeof *finish, fair_cmp_u64);

    size_t points = threads < FAIR_CURVE_POINTS ? threads : FAIR_CURVE_POINTS, len = 0;
    char curve[FAIR_CURVE_POINTS * 24];
    for (size_t j = 1; j <= points; j++)
        len += (size_t)snprintf(curve + len, sizeof curve - len, "%s%.4f", j > 1 ? "," : "",
                                (double)(finish[j * threads / points - 1] - t0) / 1e9);
    printf("RESULT bench=fairness impl=%s param=threads=%zu value=%.4f unit=s first=%.4f "
           "points=%zu curve=%s%s\n", impl, threads, (double)(finish[threads - 1] - t0) / 1e9,
           (double)(finish[0] - t0) / 1e9, points, curve, extra);
    fflush(stdout);
    bench_note(impl, "threads=%zu work=%llu steps each (%.2f ms alone), chunk=%llu steps; "
               "every sink checked", threads, (unsigned long long)r->work,
               (double)r->alone_ns / 1e6, (unsigned long long)r->chunk);
}

#endif /* WEFT_BENCH_FAIRNESS_H */
