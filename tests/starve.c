/*
 * starve — at one vcore, two uthreads that wake each other without end
 * (each wake-up lands in the vcore's next slot) beside one that yields in a
 * loop (the paused ring is never empty) do not keep a third from running:
 *  1. S, spawned once the pair runs (the woken ring), sleeps 1 ms and runs
 *     again when its alarm wakes it (the woken ring again);
 *  2. D, woken just before A so that A's wake-up displaces it from next
 *     (ws: into prev), runs;
 *  3. with two such pairs and no yielder, where each break of one pair's
 *     chain runs the other (the one its wake-up displaced, waiting in prev
 *     or at its level's front) while the first stays in next, a uthread
 *     spawned behind them runs.
 * Each victim must run within LIMIT_MS while the three keep going (it
 * would run within microseconds; in ws before its fix, the paused ring took
 * every break of next's chain and both waited for as long as the three
 * ran). Run with each scheduler (FIFO, PRIO); one vcore forced, as the
 * order at one vcore is what is tested.
 */
#include "check.h"

#include <weft/time.h>

enum { LIMIT_MS = 3000 };

static atomic_bool stop, victim_ran, go_d;
static atomic_long yields;
static struct check_pair pair;

static void *yielder(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        weft_yield();
        atomic_fetch_add_explicit(&yields, 1, memory_order_relaxed);
    }
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    CHECK_RC(weft_sleep_ns(1000000), 0);
    atomic_store(&victim_ran, true);
    return NULL;
}

static void *displacee(void *arg)
{
    (void)arg;
    while (!atomic_load(&go_d))
        CHECK_RC(weft_park(), 0);
    atomic_store(&victim_ran, true);
    return NULL;
}

/* run() starts the yielder and the pair, the victim (displaced: D, else S),
 * and the pair's first turn; the victim must run within LIMIT_MS. */
static void *run(void *arg)
{
    bool displaced = arg != NULL;
    weft_t ty, tv;
    atomic_store(&stop, false);
    atomic_store(&victim_ran, false);
    atomic_store(&go_d, false);
    atomic_store(&yields, 0);
    CHECK_RC(weft_spawn(&ty, NULL, yielder, NULL), 0);
    check_pair_spawn(&pair, NULL);
    if (displaced)
        CHECK_RC(weft_spawn(&tv, NULL, displacee, NULL), 0);
    for (int i = 0; i < 200; i++)
        weft_yield(); /* all started: the pair and D parked, Y yielding */
    if (displaced) {
        atomic_store(&go_d, true);
        CHECK_RC(weft_unpark(tv), 0); /* D: next */
        check_pair_go(&pair);         /* A: next, D displaced */
    } else {
        check_pair_go(&pair);
        CHECK_RC(weft_spawn(&tv, NULL, sleeper, NULL), 0); /* it starts, and sleeps, meanwhile */
    }
    uint64_t t0 = weft_now_ns();
    while (!atomic_load(&victim_ran) && weft_now_ns() - t0 < (uint64_t)LIMIT_MS * 1000000)
        weft_yield(); /* this uthread too takes paused turns */
    bool ran = atomic_load(&victim_ran);
    long h = atomic_load(&pair.hops), y = atomic_load(&yields);
    atomic_store(&stop, true);
    check_pair_end(&pair);
    CHECK_RC(weft_join(ty, NULL), 0);
    if (displaced && !atomic_load(&victim_ran)) { /* not run: wake it to end */
        atomic_store(&go_d, true);
        CHECK_RC(weft_unpark(tv), 0);
    }
    CHECK_RC(weft_join(tv, NULL), 0);
    /* The counts say how far the others got (on a slow machine, qemu, the
     * victim may run before the pair's first hop). */
    CHECK(ran, "%s did not run within %d ms beside a waking pair (%ld hops) and a yielder (%ld "
          "yields)", displaced ? "the displaced uthread" : "the spawned sleeper", LIMIT_MS, h, y);
    return NULL;
}

static struct check_pair pair2;

static void *spawned(void *arg)
{
    (void)arg;
    atomic_store(&victim_ran, true);
    return NULL;
}

/* run_two() is the third case: two pairs, a spawned victim, the
 * coordinator asleep meanwhile. */
static void *run_two(void *arg)
{
    (void)arg;
    atomic_store(&victim_ran, false);
    check_pair_spawn(&pair, NULL);
    check_pair_spawn(&pair2, NULL);
    for (int i = 0; i < 200; i++)
        weft_yield(); /* both pairs started and parked */
    check_pair_go(&pair);
    check_pair_go(&pair2);
    weft_t tv;
    CHECK_RC(weft_spawn(&tv, NULL, spawned, NULL), 0);
    uint64_t t0 = weft_now_ns();
    while (!atomic_load(&victim_ran) && weft_now_ns() - t0 < (uint64_t)LIMIT_MS * 1000000)
        CHECK_RC(weft_sleep_ns(1000000), 0);
    bool ran = atomic_load(&victim_ran);
    long h1 = atomic_load(&pair.hops), h2 = atomic_load(&pair2.hops);
    check_pair_end(&pair);
    check_pair_end(&pair2);
    CHECK_RC(weft_join(tv, NULL), 0);
    CHECK(ran, "the spawned uthread did not run within %d ms beside two waking pairs (%ld and %ld "
          "hops)", LIMIT_MS, h1, h2);
    CHECK(h1 > 0 && h2 > 0, "a pair made no hop (%ld, %ld)", h1, h2);
    return NULL;
}

int main(void)
{
    check_watchdog(60);
    struct weft_config c = { .vcores = 1 };
    CHECK_RC(weft_init(&c), 0);
    weft_t m;
    check_phase("an alarm-woken uthread runs beside a waking pair and a yielder");
    CHECK_RC(weft_spawn(&m, NULL, run, NULL), 0);
    CHECK_RC(weft_join(m, NULL), 0);
    check_phase("a uthread displaced from next runs beside them");
    CHECK_RC(weft_spawn(&m, NULL, run, (void *)1), 0);
    CHECK_RC(weft_join(m, NULL), 0);
    check_phase("a spawned uthread runs beside two waking pairs");
    CHECK_RC(weft_spawn(&m, NULL, run_two, NULL), 0);
    CHECK_RC(weft_join(m, NULL), 0);
    weft_shutdown();
    printf("starve: ok\n");
    return 0;
}
