/*
 * fairness.c — the fixed-work fairness benchmark of issue 5 (after the parlib
 * thesis's experiment): T uthreads each run the same fixed computation, and
 * the program records when each one finishes.
 *
 *   weft_fairness [--threads T] [--work N] [--preempt-us P] [--yield-every K]
 *
 * T = 1024, N = 2 400 000 mixing steps, P = 0 and K = 0 by default. The work,
 * its check and the output are bench/common/fairness.h's: every uthread runs
 * N steps of a loop that calls nothing and must end with the sink main
 * computed beforehand. Variants:
 *   --preempt-us P   weft_set_preempt_period(P) after weft_init(): a uthread
 *                    that has run P us without a scheduling decision is
 *                    preempted to the back of its queue (0: cooperative, and
 *                    then each vcore runs its uthreads one after another to
 *                    completion);
 *   --yield-every K  the loop is cut into chunks of K steps with a
 *                    weft_yield() between two chunks (0: one chunk, no
 *                    call).
 * impl = weft-nopreempt, weft-preempt-<P/1000>ms (or <P>us; "-ticker" added
 * with WEFT_PREEMPT_TICKER=1), weft-yield-<K>,
 * or both suffixes.
 *
 * Vcores: WEFT_VCORES or all CPUs. Uthread i is spawned on vcore i % vcores
 * (WEFT_ON_VCORE, striped as in the thesis; the default work-stealing
 * scheduler may still move them). Start: main (a kernel thread, not a
 * uthread) spawns every uthread; each marks itself ready on a wait group and
 * waits on a second one, the gate; once all are ready main takes t0 and
 * opens the gate. Each uthread takes its finish time after its last step;
 * main joins them all (untimed: the total is the last finish time), prints
 * the per-vcore weft_stats() as NOTEs and their totals on the RESULT line.
 *
 * Peer: bench/peers/kernel/fairness.c (one pthread per thread).
 * Exit: 0 measured, 1 FAIL (a wrong sink, a thread without a finish time,
 * a weft call that failed), 2 bad command line.
 */
#include "bench.h"
#include "fairness.h"
#include "opts.h"
#include "vcore_stats.h"

#include <weft/weft.h>
#include <weft/event.h>

static struct {
    uint64_t work, chunk;
    int yield;                 /* weft_yield() between two chunks */
    uint64_t *finish;          /* absolute ns, per uthread */
    volatile uint64_t *sink;   /* per uthread */
    int *first_vcore;          /* per uthread: where it started its work */
    weft_wg_t ready, gate;
} g;

static void *worker(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    bench_check_rc(weft_wg_done(&g.ready));
    bench_check_rc(weft_wg_wait(&g.gate));
    g.first_vcore[i] = weft_vcore_id();

    struct fair_state s = fair_start();
    for (uint64_t left = g.work; left > g.chunk; left -= g.chunk) {
        fair_mix(&s, g.chunk);
        if (g.yield)
            weft_yield();
    }
    fair_mix(&s, g.work % g.chunk ? g.work % g.chunk : g.chunk);
    g.sink[i] = fair_sink(&s);
    g.finish[i] = bench_now_ns();
    return NULL;
}

/* impl_name() names the variant after its flags. */
static void impl_name(char *buf, size_t size, uint64_t preempt_us, uint64_t yield_every)
{
    int len = snprintf(buf, size, "weft");
    if (preempt_us && preempt_us % 1000 == 0)
        len += snprintf(buf + len, size - (size_t)len, "-preempt-%llums",
                        (unsigned long long)preempt_us / 1000);
    else if (preempt_us)
        len += snprintf(buf + len, size - (size_t)len, "-preempt-%lluus",
                        (unsigned long long)preempt_us);
    if (yield_every)
        len += snprintf(buf + len, size - (size_t)len, "-yield-%llu",
                        (unsigned long long)yield_every);
    if (!preempt_us && !yield_every)
        len += snprintf(buf + len, size - (size_t)len, "-nopreempt");
    const char *ticker = getenv("WEFT_PREEMPT_TICKER");
    if (preempt_us && ticker && strcmp(ticker, "1") == 0)
        snprintf(buf + len, size - (size_t)len, "-ticker"); /* one ticker thread, not a timer per vcore */
}

/* note_placement() prints how many uthreads started their work on each vcore
 * (where the gate found them: work stealing before it may move some). */
static void note_placement(const char *impl, uint64_t threads, int nv)
{
    char buf[256];
    size_t len = 0;
    for (int v = 0; v < nv && len < sizeof buf; v++) {
        uint64_t on = 0;
        for (uint64_t i = 0; i < threads; i++)
            on += g.first_vcore[i] == v;
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%llu", v ? "," : "",
                                (unsigned long long)on);
    }
    bench_note(impl, "uthreads that started their work on vcores 0..%d: %s", nv - 1, buf);
}

int main(int argc, char **argv)
{
    uint64_t threads = 1024, preempt_us = 0, yield_every = 0;
    g.work = 2400000;
    struct bench_opt opts[] = {
        { "--threads", &threads, 1, 1u << 20 },
        { "--work", &g.work, 1, UINT64_MAX / 2 },
        { "--preempt-us", &preempt_us, 0, 10000000 },
        { "--yield-every", &yield_every, 0, UINT64_MAX / 2 },
    };
    bench_opts_parse(argc, argv, "[--threads T] [--work N] [--preempt-us P] [--yield-every K]",
                     opts, sizeof opts / sizeof opts[0]);
    g.yield = yield_every != 0;
    g.chunk = yield_every ? yield_every : g.work;
    char impl[64], stats[160];
    impl_name(impl, sizeof impl, preempt_us, yield_every);

    struct fair_run run = { .impl = impl, .threads = threads, .work = g.work, .chunk = g.chunk };
    run.expected = fair_expected(g.work, &run.alone_ns);
    weft_t *ts = calloc(threads, sizeof *ts);
    run.finish = g.finish = calloc(threads, sizeof *g.finish);
    run.sink = g.sink = calloc(threads, sizeof *g.sink);
    g.first_vcore = calloc(threads, sizeof *g.first_vcore);
    if (!ts || !g.finish || !g.sink || !g.first_vcore)
        bench_fail("%s fairness: no memory for %llu threads", impl, (unsigned long long)threads);

    bench_check_rc(weft_init(NULL));
    bench_check_rc(weft_set_preempt_period((unsigned)preempt_us));
    int nv = weft_num_vcores();
    bench_check_rc(weft_wg_add(&g.ready, (int)threads));
    bench_check_rc(weft_wg_add(&g.gate, 1));
    for (uint64_t i = 0; i < threads; i++) {
        weft_attr_t attr = { .flags = WEFT_ON_VCORE, .vcore = (int)(i % (uint64_t)nv) };
        bench_check_rc(weft_spawn(&ts[i], &attr, worker, (void *)(uintptr_t)i));
    }
    bench_check_rc(weft_wg_wait(&g.ready));
    run.t0 = bench_now_ns();
    bench_check_rc(weft_wg_done(&g.gate));
    for (uint64_t i = 0; i < threads; i++)
        bench_check_rc(weft_join(ts[i], NULL));
    bench_note(impl, "vcores=%d, uthread i spawned on vcore i%%%d; preemption period %u us",
               nv, nv, weft_preempt_period());
    note_placement(impl, threads, nv);
    bench_vcore_stats(impl, stats, sizeof stats);
    weft_shutdown();

    fair_report(&run, stats);
    free(ts);
    free(g.finish);
    free((void *)g.sink);
    free(g.first_vcore);
    return 0;
}
