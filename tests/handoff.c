/*
 * handoff — the direct hand-off between uthreads and where runnable
 * uthreads go (the default scheduler, ws).
 *
 * Proves:
 *  1. A weft_uthread_yield() callback runs with weft_self() == NULL on a
 *     vcore, gets the saved uthread, may make it runnable itself, and the
 *     uthread resumes with its errno intact; both with another uthread ready
 *     on the vcore (the direct path) and without (through vcore context).
 *  2. A park/unpark ping-pong is made of direct hand-offs (weft_stats: most
 *     of the decisions during it, also at all vcores, where the pair gathers
 *     on one vcore), with no run-wide RMW per hand-off once it runs.
 *  3. A woken uthread runs on its waker's vcore, not where it ran before
 *     (unless the waker's vcore handled an event meanwhile: a poke from an
 *     idle vcore that saw it stuck, which a loaded machine may cause).
 *  4. A uthread placed (WEFT_ON_VCORE) on a vcore that runs a CPU-bound
 *     uthread and never decides is run by another vcore whose only uthread
 *     spins on weft_yield() (the yield steals): it ran while the CPU-bound
 *     one still ran.
 *  5. A uthread woken into a busy vcore's next slot, whose waker then runs
 *     on without deciding, is taken by a vcore spinning on weft_yield()
 *     (a poke moves it to a stealable queue): it ran while the waker still
 *     ran. (Under TSan notifications wait for the next decision: there it
 *     only has to run.)
 *  6. A uthread spawned by a uthread that then runs on without deciding
 *     (it starts in its spawner's next slot) is run by the other vcore,
 *     idle until then: the spawn's kick wakes it and it pokes the child
 *     loose. It ran while the spawner still ran (the same TSan proviso).
 * 3-6 need two vcores; at one vcore 1 and 2 run.
 */
#include "check.h"

#include <weft/event.h>

/* test_now() reads the clock without weft_now_ns(), which is a safe
 * point (it would let a notification in: the CPU-bound uthreads here must
 * make no scheduling decision). */
static uint64_t test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- 1: the callback's context --------------------------------------------------- */

static atomic_int cb_calls, cb_bad;

static void own_cb(struct weft_uthread *self, void *arg)
{
    atomic_fetch_add(&cb_calls, 1);
    if (weft_self() != NULL || weft_vcore_id() < 0 || self != arg)
        atomic_fetch_add(&cb_bad, 1);
    weft_uthread_runnable(self); /* the callback may wake the uthread itself */
}

static atomic_int spinner_stop;

static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&spinner_stop))
        weft_yield();
    return NULL;
}

static void *callbacks(void *arg)
{
    int with_other = (int)(uintptr_t)arg;
    weft_t other = NULL;
    if (with_other) /* a runnable uthread here: the hand-off is direct */
        other = spawn_ex(spinner, NULL, WEFT_PINNED, weft_vcore_id(), "spinner");
    for (int i = 0; i < 1000; i++) {
        errno = 1000 + i;
        weft_uthread_yield(own_cb, weft_self());
        CHECK(errno == 1000 + i, "errno %d after the switch, want %d", errno, 1000 + i);
    }
    if (other) {
        atomic_store(&spinner_stop, 1);
        join(other);
        atomic_store(&spinner_stop, 0);
    }
    return NULL;
}

static void check_callbacks(void)
{
    check_phase("1: callback context");
    for (int with = 0; with <= 1; with++) {
        atomic_store(&cb_calls, 0);
        join(spawn_ex(callbacks, (void *)(uintptr_t)with, WEFT_PINNED, 0, "cb"));
        CHECK(atomic_load(&cb_calls) == 1000, "callback ran %d times", atomic_load(&cb_calls));
        CHECK(atomic_load(&cb_bad) == 0, "%d callbacks saw a uthread context or a wrong self",
              atomic_load(&cb_bad));
    }
}

/* ---- 2: hand-offs ------------------------------------------------------------------ */

#define ROUNDS 20000
static weft_t pb;
static _Atomic(weft_t) pa;          /* published by ping itself before its first unpark */
static atomic_int turn, pp_stop;

static void *pong(void *arg)
{
    (void)arg;
    for (;;) {
        while (atomic_load(&turn) != 1 && !atomic_load(&pp_stop))
            weft_park();
        if (atomic_load(&pp_stop))
            return NULL;
        atomic_store(&turn, 0);
        weft_unpark(pa);
    }
}

static void totals(struct weft_vcore_stats *sum)
{
    memset(sum, 0, sizeof *sum);
    for (int v = 0; v < weft_num_vcores(); v++) {
        struct weft_vcore_stats s;
        CHECK_RC(weft_stats(v, &s), 0);
        sum->decisions += s.decisions;
        sum->handoffs += s.handoffs;
        sum->shared_rmw += s.shared_rmw;
    }
}

static void *ping(void *arg)
{
    (void)arg;
    atomic_store(&pa, weft_self());
    for (int i = 0; i < 1000; i++) { /* settle: the pair gathers on one vcore */
        atomic_store(&turn, 1);
        weft_unpark(pb);
        while (atomic_load(&turn) != 0)
            weft_park();
    }
    struct weft_vcore_stats s0, s1;
    totals(&s0);
    for (int i = 0; i < ROUNDS; i++) {
        atomic_store(&turn, 1);
        weft_unpark(pb);
        while (atomic_load(&turn) != 0)
            weft_park();
    }
    totals(&s1);
    atomic_store(&pp_stop, 1);
    weft_unpark(pb);
    uint64_t dec = s1.decisions - s0.decisions, hand = s1.handoffs - s0.handoffs;
    uint64_t rmw = s1.shared_rmw - s0.shared_rmw;
    fprintf(stderr, "handoff: %d round trips: %llu decisions, %llu direct, %llu run-wide RMWs\n",
            ROUNDS, (unsigned long long)dec, (unsigned long long)hand, (unsigned long long)rmw);
    CHECK(dec >= 2 * ROUNDS, "only %llu decisions for %d round trips", (unsigned long long)dec,
          ROUNDS);
    CHECK(hand * 10 >= dec * 9, "only %llu of %llu decisions were direct hand-offs",
          (unsigned long long)hand, (unsigned long long)dec);
    CHECK(rmw * 100 <= (uint64_t)ROUNDS, "%llu run-wide RMWs in %d round trips",
          (unsigned long long)rmw, ROUNDS);
    return NULL;
}

static void check_handoffs(void)
{
    check_phase("2: hand-offs");
    atomic_store(&pp_stop, 0);
    atomic_store(&turn, 0);
    pb = spawn(pong, NULL);
    join(spawn(ping, NULL));
    join(pb);
}

/* ---- 3: a woken uthread runs on its waker's vcore ------------------------------------ */

static atomic_int woken_on = -2, parked_on = -2, sleeper_parked, blocking;

static void *sleeper(void *arg)
{
    (void)arg;
    atomic_store(&parked_on, weft_vcore_id());
    atomic_store(&sleeper_parked, 1);
    while (atomic_load(&woken_on) == -2)
        weft_park();
    atomic_store(&woken_on, weft_vcore_id());
    return NULL;
}

/* blocker() keeps vcore 0 busy, without deciding, until the sleeper parked:
 * vcore 0 cannot take the sleeper placed on vcore 1 meanwhile. */
static void *blocker(void *arg)
{
    (void)arg;
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    atomic_store(&blocking, 1);
    while (!atomic_load(&sleeper_parked) && test_now() < end)
        ;
    return NULL;
}

static void *waker(void *arg)
{
    weft_t s = arg;
    atomic_store(&woken_on, -1);
    weft_unpark(s);
    join(s); /* blocks: the woken one runs here, next */
    return NULL;
}

static void check_locality(void)
{
    check_phase("3: wake-up locality");
    int poked = 0;
    for (int round = 0; round < 20; round++) {
        atomic_store(&woken_on, -2);
        atomic_store(&parked_on, -2);
        atomic_store(&sleeper_parked, 0);
        atomic_store(&blocking, 0);
        weft_t b = spawn_ex(blocker, NULL, WEFT_PINNED, 0, "blocker");
        while (!atomic_load(&blocking))
            sched_yield();
        weft_t s = spawn_ex(sleeper, NULL, WEFT_ON_VCORE, 1, "sleeper");
        join(b);
        CHECK(atomic_load(&sleeper_parked), "the sleeper did not park while vcore 0 was busy");
        /* sleeper_parked is set just before the park: the waker must come
         * once it has parked (vcore 1 then runs nothing), or the sleeper
         * sees woken_on change and goes on where it is, never woken */
        WAIT_UNTIL(!weft_vcore_busy(1), "vcore 1 idle: the sleeper parked");
        CHECK(atomic_load(&parked_on) == 1, "round %d: the sleeper placed on vcore 1 ran on %d",
              round, atomic_load(&parked_on));
        struct weft_vcore_stats before, after;
        CHECK_RC(weft_stats(0, &before), 0);
        join(spawn_ex(waker, s, WEFT_PINNED, 0, "waker"));
        CHECK_RC(weft_stats(0, &after), 0);
        if (atomic_load(&woken_on) != 0 && after.events > before.events) {
            /* vcore 1 poked vcore 0's next loose: the waker's kernel thread
             * lost its CPU between the wake-up and the join (a loaded
             * machine), as the poke is there for */
            poked++;
            continue;
        }
        CHECK(atomic_load(&woken_on) == 0, "round %d: parked on vcore 1 and woken by a uthread "
              "on vcore 0, it ran on %d", round, atomic_load(&woken_on));
    }
    CHECK(poked < 20, "every round's woken uthread was poked off its waker's vcore");
}

/* ---- 4, 5: idle vcores take work from a vcore that does not decide ------------------ */

static atomic_int hog_running, hog_done, hog_saw, target_ran, target_vcore;
static atomic_int target_parked;

/* hog() runs on vcore 1 without any scheduling decision until the target
 * has run or `limit` seconds passed; says which came first. With target
 * set, it first wakes the target (parked, last run on vcore 1) into its
 * next; with spawn set, it first spawns the target (into its next). */
struct hog_arg {
    weft_t target;
    uint64_t limit_ns;
    bool spawn;
};

static void *target(void *arg);

static void *hog(void *arg)
{
    struct hog_arg *h = arg;
    if (h->target) {
        WAIT_UNTIL(atomic_load(&target_parked), "the target parked");
        weft_unpark(h->target);
    }
    if (h->spawn)
        CHECK_RC(weft_spawn(&h->target, NULL, target, (void *)0), 0);
    atomic_store(&hog_running, 1);
    uint64_t end = weft_now_ns() + h->limit_ns;
    volatile uint64_t spin = 0;
    while (!atomic_load(&target_ran)) {
        for (int i = 0; i < 1000; i++)
            spin++;
        if (test_now() > end)
            break;
    }
    atomic_store(&hog_saw, atomic_load(&target_ran));
    atomic_store(&hog_done, 1);
    return NULL;
}

static void *target(void *arg)
{
    int park_first = (int)(uintptr_t)arg;
    if (park_first) {
        atomic_store(&target_parked, 1);
        while (!atomic_load(&hog_running) && !atomic_load(&hog_done))
            weft_park();
    }
    atomic_store(&target_vcore, weft_vcore_id());
    atomic_store(&target_ran, 1);
    return NULL;
}

static void *yielder(void *arg)
{
    (void)arg;
    while (!atomic_load(&target_ran) && !atomic_load(&hog_done))
        weft_yield();
    return NULL;
}

static void reset_hog(void)
{
    atomic_store(&hog_running, 0);
    atomic_store(&hog_done, 0);
    atomic_store(&hog_saw, 0);
    atomic_store(&target_ran, 0);
    atomic_store(&target_vcore, -1);
    atomic_store(&target_parked, 0);
}

static void check_yield_steals(void)
{
    check_phase("4: weft_yield steals");
    reset_hog();
    struct hog_arg h = { NULL, MS(SCALE(10000, 30000)) };
    weft_t hg = spawn_ex(hog, &h, WEFT_PINNED, 1, "hog");
    WAIT_UNTIL(atomic_load(&hog_running), "the hog runs");
    weft_t y = spawn_ex(yielder, NULL, WEFT_PINNED, 0, "yielder");
    weft_t t = spawn_ex(target, (void *)0, WEFT_ON_VCORE, 1, "target"); /* queued behind the hog */
    join(t);
    join(y);
    join(hg);
    CHECK(atomic_load(&hog_saw) == 1, "the target placed on the hog's vcore ran only after "
          "the hog gave up: nobody took it while vcore 0 only yielded");
    CHECK(atomic_load(&target_vcore) == 0, "the target ran on vcore %d",
          atomic_load(&target_vcore));
}

static void check_poke(void)
{
    check_phase("5: a stuck next is poked");
    reset_hog();
    weft_t t = spawn_ex(target, (void *)1, WEFT_ON_VCORE, 1, "target");
    WAIT_UNTIL(atomic_load(&target_parked), "the target parked");
    struct hog_arg h = { t, MS(TEST_TSAN ? 1000 : SCALE(10000, 30000)) };
    weft_t hg = spawn_ex(hog, &h, WEFT_PINNED, 1, "hog");
    WAIT_UNTIL(atomic_load(&hog_running), "the hog runs");
    weft_t y = spawn_ex(yielder, NULL, WEFT_PINNED, 0, "yielder");
    join(y);
    join(hg);
    join(t);
    CHECK(atomic_load(&target_ran) == 1, "the target never ran");
    if (!TEST_TSAN)
        CHECK(atomic_load(&hog_saw) == 1, "the target woken into the hog's next ran only after "
              "the hog gave up: the spinning vcore did not poke");
}

static void check_spawn_kick(void)
{
    check_phase("6: a child spawned by a uthread that runs on is taken elsewhere");
    reset_hog();
    struct hog_arg h = { NULL, MS(TEST_TSAN ? 1000 : SCALE(10000, 30000)), true };
    weft_t hg = spawn_ex(hog, &h, WEFT_PINNED, 1, "hog");
    join(hg);
    join(h.target);
    CHECK(atomic_load(&target_ran) == 1, "the child never ran");
    if (!TEST_TSAN) {
        CHECK(atomic_load(&hog_saw) == 1, "the child spawned into the hog's next ran only after "
              "the hog gave up: the idle vcore was not kicked, or did not poke");
        CHECK(atomic_load(&target_vcore) == 0, "the child ran on vcore %d",
              atomic_load(&target_vcore));
    }
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_init(NULL), 0);
    check_callbacks();
    check_handoffs();
    if (weft_num_vcores() >= 2) {
        check_locality();
        check_yield_steals();
        check_poke();
        check_spawn_kick();
    } else {
        fprintf(stderr, "handoff: one vcore: parts 3-6 need two\n");
    }
    weft_shutdown();
    fprintf(stderr, "handoff: ok\n");
    return 0;
}
