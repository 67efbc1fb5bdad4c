/*
 * pingpong.c — round-trip nanoseconds between two uthreads that hand a turn
 * back and forth
 *   impl=weft-park     through weft_park() / weft_unpark();
 *   impl=weft-condvar  through one weft_mutex_t and two weft_cond_t;
 * with A pinned to vcore 0 and B to vcore 1 (WEFT_PINNED: every hand-off
 * crosses CPUs; needs 2 vcores), and, as impl=weft-park-free, spawned with
 * default attributes (the runtime may keep the pair on one vcore; param
 * vcores=N, run at 1 vcore and at all).
 * A does the timing. B counts its replies in `replies`; A checks after every
 * round trip that exactly one more reply arrived, so a park that returns
 * without an unpark, or a lost wake-up, fails the run instead of timing it.
 * After the park variants a NOTE gives, per round trip over the whole
 * measurement (warm-up included), the run-wide atomic RMWs, kicks and parks
 * the vcores counted (weft_stats()).
 *
 * Peers: bench/peers/kernel/pingpong.c (futex and pipe between kernel threads
 * pinned to CPUs 0 and 1, and both on CPU 0).
 */
#include "bench.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <weft/event.h>
#include <weft/weft.h>
#include <weft/sched.h>

struct pingpong {
    weft_t b;                   /* set by main before A is spawned */
    _Atomic(weft_t) a;          /* set by A (weft_self) before its first unpark */
    atomic_int stop;            /* set by A when done */
    atomic_uint_fast64_t replies;   /* written by B only */
    /* condvar variant */
    weft_mutex_t m;
    weft_cond_t to_a, to_b;     /* A waits on to_a, B on to_b */
    int turn;                   /* 0: A's turn, 1: B's turn; guarded by m */
};

static struct pingpong pp = {
    .m = WEFT_MUTEX_INIT, .to_a = WEFT_COND_INIT, .to_b = WEFT_COND_INIT,
};

static bool pinned = true;            /* the pair is pinned to vcores 0 and 1 */

static void check_vcore(int want, const char *who)
{
    if (!pinned)
        return;
    int v = weft_vcore_id();
    if (v != want)
        bench_fail("weft pingpong: %s is pinned to vcore %d but runs on vcore %d", who, want, v);
}

/* ---- park / unpark ---------------------------------------------------------- */

static void *park_b(void *unused)
{
    (void)unused;
    check_vcore(1, "B");
    for (;;) {
        bench_check_rc(weft_park());
        if (atomic_load(&pp.stop))
            break;
        atomic_fetch_add(&pp.replies, 1);
        bench_check_rc(weft_unpark(atomic_load(&pp.a)));
    }
    check_vcore(1, "B");
    return NULL;
}

static uint64_t run_park(void *unused, uint64_t n)
{
    (void)unused;
    uint64_t base = atomic_load(&pp.replies), t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        bench_check_rc(weft_unpark(pp.b));
        bench_check_rc(weft_park());
        uint64_t got = atomic_load(&pp.replies) - base;
        if (got != i)
            bench_fail("weft park/unpark: after round trip %llu, B has replied %llu times",
                       (unsigned long long)i, (unsigned long long)got);
    }
    return bench_now_ns() - t0;
}

/* stats_sum() adds up every vcore's counters. */
static struct weft_vcore_stats stats_sum(void)
{
    struct weft_vcore_stats sum = { 0 }, st;
    for (int v = 0; v < weft_num_vcores(); v++) {
        bench_check_rc(weft_stats(v, &st));
        sum.shared_rmw += st.shared_rmw;
        sum.kicks += st.kicks;
        sum.parks += st.parks;
    }
    return sum;
}

static void *park_a(void *unused)
{
    (void)unused;
    check_vcore(0, "A");
    atomic_store(&pp.a, weft_self());
    struct weft_vcore_stats st0 = stats_sum();
    uint64_t r0 = atomic_load(&pp.replies);
    struct bench_sample s = bench_measure(run_park, NULL, 1000, 1u << 28);
    struct weft_vcore_stats st1 = stats_sum();
    double trips = (double)(atomic_load(&pp.replies) - r0);
    check_vcore(0, "A");
    atomic_store(&pp.stop, 1);
    bench_check_rc(weft_unpark(pp.b));
    char param[32];
    if (pinned)
        snprintf(param, sizeof param, "cpus=0,1");
    else
        snprintf(param, sizeof param, "vcores=%d", weft_num_vcores());
    bench_result("pingpong", pinned ? "weft-park" : "weft-park-free", param,
                 (double)s.ns / (double)s.iters, "ns/roundtrip");
    bench_note(pinned ? "weft-park" : "weft-park-free",
               "per round trip: shared_rmw=%.2f kicks=%.4f parks=%.4f",
               (double)(st1.shared_rmw - st0.shared_rmw) / trips,
               (double)(st1.kicks - st0.kicks) / trips, (double)(st1.parks - st0.parks) / trips);
    return NULL;
}

/* ---- mutex + condition variable -------------------------------------------- */

static void *cond_b(void *unused)
{
    (void)unused;
    check_vcore(1, "B");
    bench_check_rc(weft_mutex_lock(&pp.m));
    for (;;) {
        while (pp.turn != 1 && !atomic_load(&pp.stop))
            bench_check_rc(weft_cond_wait(&pp.to_b, &pp.m));
        if (atomic_load(&pp.stop))
            break;
        atomic_fetch_add(&pp.replies, 1);
        pp.turn = 0;
        bench_check_rc(weft_cond_signal(&pp.to_a));
    }
    bench_check_rc(weft_mutex_unlock(&pp.m));
    check_vcore(1, "B");
    return NULL;
}

static uint64_t run_cond(void *unused, uint64_t n)
{
    (void)unused;
    bench_check_rc(weft_mutex_lock(&pp.m));
    uint64_t base = atomic_load(&pp.replies), t0 = bench_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        pp.turn = 1;
        bench_check_rc(weft_cond_signal(&pp.to_b));
        while (pp.turn != 0)
            bench_check_rc(weft_cond_wait(&pp.to_a, &pp.m));
        uint64_t got = atomic_load(&pp.replies) - base;
        if (got != i)
            bench_fail("weft mutex+condvar: after round trip %llu, B has replied %llu times",
                       (unsigned long long)i, (unsigned long long)got);
    }
    uint64_t ns = bench_now_ns() - t0;
    bench_check_rc(weft_mutex_unlock(&pp.m));
    return ns;
}

static void *cond_a(void *unused)
{
    (void)unused;
    check_vcore(0, "A");
    struct bench_sample s = bench_measure(run_cond, NULL, 1000, 1u << 28);
    check_vcore(0, "A");
    bench_check_rc(weft_mutex_lock(&pp.m));
    atomic_store(&pp.stop, 1);
    bench_check_rc(weft_cond_signal(&pp.to_b));
    bench_check_rc(weft_mutex_unlock(&pp.m));
    bench_result("pingpong", "weft-condvar", "cpus=0,1", (double)s.ns / (double)s.iters,
                 "ns/roundtrip");
    return NULL;
}

/* run_pair() runs one variant: B (pinned to vcore 1), then A (pinned to
 * vcore 0); with pin false both with default attributes. */
static void run_pair(void *(*a)(void *), void *(*b)(void *), bool pin)
{
    weft_attr_t attr_a = { .flags = WEFT_PINNED, .vcore = 0, .name = "pingpong-a" };
    weft_attr_t attr_b = { .flags = WEFT_PINNED, .vcore = 1, .name = "pingpong-b" };
    if (!pin)
        attr_a = (weft_attr_t){ .name = "pingpong-a" }, attr_b = (weft_attr_t){ .name = "pingpong-b" };
    pinned = pin;
    weft_t ta;

    atomic_store(&pp.stop, 0);
    atomic_store(&pp.replies, 0);
    atomic_store(&pp.a, NULL);
    pp.turn = 0;
    bench_check_rc(weft_spawn(&pp.b, &attr_b, b, NULL));
    bench_check_rc(weft_spawn(&ta, &attr_a, a, NULL));
    bench_check_rc(weft_join(ta, NULL));
    bench_check_rc(weft_join(pp.b, NULL));
}

int main(void)
{
    bench_check_rc(weft_init(NULL));
    int nv = weft_num_vcores();
    if (nv >= 2) {
        bench_note("weft-park", "A pinned to vcore 0, B to vcore 1 (WEFT_PINNED), %d vcores", nv);
        run_pair(park_a, park_b, true);
        run_pair(cond_a, cond_b, true);
    } else {
        fprintf(stderr, "weft pingpong: 1 vcore: the pinned variants need 2, only the free one runs\n");
    }
    bench_note("weft-park-free", "A and B spawned with default attributes, %d vcores", nv);
    run_pair(park_a, park_b, false);
    weft_shutdown();
    return 0;
}
