/*
 * yield.c — nanoseconds per weft_yield() with 2, 100 and 10 000 uthreads, all
 * on one vcore.
 *
 * The runtime is started with a single vcore (weft_config.vcores = 1), so
 * every yield is a switch from one uthread to the next on the same core
 * through vcore context and the scheduler.
 *
 * Timing (the one boundary of every yield program, bench/README.md): a
 * coordinator uthread spawns the workers; each counts itself in on a
 * weft_wg_t (`ready`) and waits at the start gate (another weft_wg_t). When
 * all are in, the coordinator takes the start time and opens the gate. Each
 * worker yields n times, counting handovers (the uthread that ran last was
 * another one), which checks that weft_yield() really switched instead of
 * returning at once; then it counts itself done, and the last one takes the
 * end time and wakes the coordinator. A finished worker waits at a release
 * gate instead of returning, so no uthread exits inside the timed span;
 * creation, the first run up to the gate, the exits and the joins (each
 * frees a stack, which past the caches is a munmap: most of the run at
 * 10 000 uthreads) are all untimed. Warm-up: bench_measure()'s doubling runs
 * before the timed one, as in every yield program. With 10 000 uthreads
 * every yield touches a different stack and uthread struct, so the row shows
 * the cost once the working set no longer fits the L1/L2 caches; its warm-up
 * starts from fewer yields per worker to keep the run short.
 *
 * Peers: bench/peers/cpp/boost_fiber_yield.cpp, boost_context_yield.cpp,
 * bench/peers/go (yield), bench/peers/kernel/yield.c.
 */
#include "bench.h"

#include <stdatomic.h>
#include <weft/weft.h>
#include <weft/sched.h>

static const struct {
    int nthreads;
    uint64_t n0;      /* yields per worker in the first warm-up run */
} rows[] = { { 2, 1000 }, { 100, 1000 }, { 10000, 10 } };

static _Atomic(weft_t) last_runner;       /* the worker that ran last */
static atomic_uint_fast64_t handovers;    /* yields after which another worker had run */
static atomic_int wrong_vcore;            /* workers seen off vcore 0 */
static atomic_int running;                /* workers not yet done with their yields */
static _Atomic uint64_t end_ns;           /* taken by the last of them */
static weft_wg_t ready = WEFT_WG_INIT;    /* workers not yet at the start gate */
static weft_wg_t gate = WEFT_WG_INIT;     /* 1 until the clock starts */
static weft_wg_t all_done = WEFT_WG_INIT; /* 1 until the last worker is done */
static weft_wg_t release = WEFT_WG_INIT;  /* 1 until the clock has stopped */

static void *worker(void *arg)
{
    uint64_t n = (uint64_t)(uintptr_t)arg, h = 0, i;
    weft_t me = weft_self();

    weft_wg_done(&ready);
    bench_check_rc(weft_wg_wait(&gate));
    for (i = 0; i < n; i++) {
        weft_yield();
        if (atomic_load_explicit(&last_runner, memory_order_relaxed) != me) {
            atomic_store_explicit(&last_runner, me, memory_order_relaxed);
            h++;
        }
    }
    if (atomic_fetch_sub(&running, 1) == 1) {
        atomic_store(&end_ns, bench_now_ns());
        weft_wg_done(&all_done);
    }
    bench_check_rc(weft_wg_wait(&release)); /* untimed from here */
    if (weft_vcore_id() != 0)
        atomic_fetch_add(&wrong_vcore, 1);
    atomic_fetch_add(&handovers, h);
    return (void *)(uintptr_t)i;
}

struct yield_ctx {
    int nthreads;
    weft_t *workers;
};

/* run_yield() lets nthreads workers yield n times each; returns the ns it took. */
static uint64_t run_yield(void *arg, uint64_t n)
{
    struct yield_ctx *c = arg;
    uint64_t total = n * (uint64_t)c->nthreads, done = 0, t0, t1;

    atomic_store(&last_runner, NULL);
    atomic_store(&handovers, 0);
    atomic_store(&running, c->nthreads);
    bench_check_rc(weft_wg_add(&ready, c->nthreads));
    bench_check_rc(weft_wg_add(&gate, 1));
    bench_check_rc(weft_wg_add(&all_done, 1));
    bench_check_rc(weft_wg_add(&release, 1));
    for (int i = 0; i < c->nthreads; i++)
        bench_check_rc(weft_spawn(&c->workers[i], NULL, worker, (void *)(uintptr_t)n));
    bench_check_rc(weft_wg_wait(&ready));
    t0 = bench_now_ns();
    weft_wg_done(&gate);
    bench_check_rc(weft_wg_wait(&all_done));
    weft_wg_done(&release);
    for (int i = 0; i < c->nthreads; i++) {
        void *r;
        bench_check_rc(weft_join(c->workers[i], &r));
        done += (uintptr_t)r;
    }
    t1 = atomic_load(&end_ns);

    if (done != total)
        bench_fail("weft yield: %llu yields done, %llu asked", (unsigned long long)done,
                   (unsigned long long)total);
    /* Only the last yields, once the others have finished, may find nobody to switch to. */
    uint64_t h = atomic_load(&handovers);
    if (h + 2 * (uint64_t)c->nthreads < total)
        bench_fail("weft yield (%d uthreads): only %llu of %llu yields switched to another uthread",
                   c->nthreads, (unsigned long long)h, (unsigned long long)total);
    if (atomic_load(&wrong_vcore))
        bench_fail("weft yield: a worker ran on a vcore other than 0 with one vcore configured");
    return t1 - t0;
}

static void *coordinator(void *unused)
{
    (void)unused;
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        struct yield_ctx c = { .nthreads = rows[k].nthreads };
        char param[32];
        c.workers = malloc(sizeof *c.workers * (size_t)c.nthreads);
        if (!c.workers)
            bench_fail("weft yield: no memory for %d handles", c.nthreads);
        struct bench_sample s =
            bench_measure(run_yield, &c, rows[k].n0, (1u << 30) / c.nthreads);
        free(c.workers);
        snprintf(param, sizeof param, "threads=%d", c.nthreads);
        bench_result("yield", "weft", param, (double)s.ns / (double)(s.iters * c.nthreads),
                     "ns/yield");
    }
    return NULL;
}

int main(void)
{
    struct weft_config cfg = { .vcores = 1 };
    weft_t coord;

    bench_check_rc(weft_init(&cfg));
    if (weft_num_vcores() != 1)
        bench_fail("weft yield: asked for 1 vcore, runtime runs %d", weft_num_vcores());
    bench_note("weft", "one vcore (weft_config.vcores=1); default scheduler unless WEFT_SCHED is set");
    bench_check_rc(weft_spawn(&coord, NULL, coordinator, NULL));
    bench_check_rc(weft_join(coord, NULL));
    weft_shutdown();
    return 0;
}
