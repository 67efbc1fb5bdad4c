/*
 * prio_urgent — the priority scheduler at two vcores (forced: both parts
 * need a second vcore; the machine must have two CPUs), where one vcore
 * keeps finding less urgent local work:
 *  1. H (prio 20) hogs vcore 0 without yielding, after spawning D and V
 *     (prio 10; D takes vcore 0's next slot, V is queued there). Vcore 1
 *     runs a pair at prio -10 that wake each other, so it only ever takes
 *     local work. V must run (on vcore 1) while H still hogs: a vcore's
 *     slow look sees more urgent work queued on a busy vcore and steals it
 *     (before, V waited for the whole hog).
 *  2. Y (prio -10, pinned to vcore 0) wakes N (prio -10: it lands in vcore
 *     0's next) and yields, in a loop; R on vcore 1 raises Y to prio 10.
 *     From then on Y's yields must not hand vcore 0 to N, which is less
 *     urgent (before, take_local compared N with Y's level as it was
 *     picked, not as raised, and N ran on vcore 0 at some of Y's yields).
 */
#include "check.h"

#include <weft/time.h>

enum { HOG_LIMIT_MS = 3000, ROUNDS = 6, AFTER_RAISE_MS = 50 };

static struct check_pair pair;

/* pair_start() starts the pair on vcore 1 at prio; pair_end() stops it. */
static void pair_start(int prio)
{
    weft_attr_t pa = { .prio = prio, .flags = WEFT_PINNED, .vcore = 1 };
    check_pair_spawn(&pair, &pa);
    CHECK_RC(weft_sleep_ns(10000000), 0);
    check_pair_go(&pair);
}

static void pair_end(void)
{
    check_pair_end(&pair);
}

/* ---- 1. more urgent work queued behind a hog ------------------------------------ */

static atomic_bool v_ran;
static atomic_int v_vcore = -1;

static void *victim(void *arg)
{
    (void)arg;
    atomic_store(&v_vcore, weft_vcore_id());
    atomic_store(&v_ran, true);
    return NULL;
}

static void *dummy(void *arg)
{
    (void)arg;
    return NULL;
}

static void *hog(void *arg)
{
    (void)arg;
    weft_attr_t a = { .prio = 10 };
    weft_t td, tv;
    CHECK_RC(weft_spawn(&td, &a, dummy, NULL), 0); /* next */
    CHECK_RC(weft_spawn(&tv, &a, victim, NULL), 0); /* queued behind */
    uint64_t t0 = weft_now_ns();
    while (!atomic_load(&v_ran) && weft_now_ns() - t0 < (uint64_t)HOG_LIMIT_MS * 1000000)
        ; /* no yield */
    bool ran = atomic_load(&v_ran);
    long waited_ms = (long)((weft_now_ns() - t0) / 1000000);
    CHECK_RC(weft_join(tv, NULL), 0);
    CHECK_RC(weft_join(td, NULL), 0);
    CHECK(ran, "V (prio 10), queued on vcore 0 behind a prio-20 hog, did not run within %d ms "
          "while vcore 1 ran a prio -10 pair (%ld hops)", HOG_LIMIT_MS, atomic_load(&pair.hops));
    CHECK(atomic_load(&v_vcore) == 1, "V ran on vcore %d during the hog", atomic_load(&v_vcore));
    printf("prio_urgent: V ran on vcore 1 after %ld ms of the hog\n", waited_ms);
    return NULL;
}

static void check_steal_from_hog(void)
{
    check_phase("more urgent work queued behind a hog runs on the other vcore");
    pair_start(-10);
    weft_attr_t ha = { .prio = 20, .flags = WEFT_PINNED, .vcore = 0 };
    weft_t th;
    CHECK_RC(weft_spawn(&th, &ha, hog, NULL), 0);
    CHECK_RC(weft_join(th, NULL), 0);
    pair_end();
}

/* ---- 2. a yield after a raise by another thread ------------------------------------ */

static atomic_bool stop;
static atomic_long n_after;
static weft_t tn, ty;

/* On vcore 0 N runs only at Y's yields (Y never blocks): at a yield that Y
 * began at prio 10, never. (Vcore 1 may run N now and then: not counted.) */
static atomic_long n_runs;

static void *n_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        if (weft_vcore_id() == 0)
            atomic_fetch_add(&n_runs, 1);
        CHECK_RC(weft_park(), 0);
    }
    return NULL;
}

static void *y_fn(void *arg)
{
    (void)arg;
    weft_t me = weft_self();
    while (!atomic_load(&stop)) {
        CHECK_RC(weft_unpark(tn), 0);
        int p = weft_getprio(me);
        long runs = atomic_load(&n_runs);
        weft_yield();
        if (p == 10 && atomic_load(&n_runs) != runs)
            atomic_fetch_add(&n_after, 1);
    }
    return NULL;
}

static void *raiser(void *arg)
{
    (void)arg;
    CHECK_RC(weft_sleep_ns(5000000), 0);
    CHECK_RC(weft_setprio(ty, 10), 0);
    CHECK_RC(weft_sleep_ns((uint64_t)AFTER_RAISE_MS * 1000000), 0);
    atomic_store(&stop, true);
    return NULL;
}

static void check_yield_after_raise(void)
{
    check_phase("a yield of a uthread raised by another does not run a less urgent one");
    pair_start(-5);
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&stop, false);
        atomic_store(&n_after, 0);
        weft_attr_t na = { .prio = -10, .flags = WEFT_ON_VCORE, .vcore = 0 };
        weft_attr_t ya = { .prio = -10, .flags = WEFT_PINNED, .vcore = 0 };
        weft_attr_t ra = { .prio = 20, .flags = WEFT_ON_VCORE, .vcore = 1 };
        weft_t tr;
        CHECK_RC(weft_spawn(&tn, &na, n_fn, NULL), 0);
        CHECK_RC(weft_spawn(&ty, &ya, y_fn, NULL), 0);
        CHECK_RC(weft_spawn(&tr, &ra, raiser, NULL), 0);
        CHECK_RC(weft_join(tr, NULL), 0);
        CHECK_RC(weft_join(ty, NULL), 0);
        CHECK_RC(weft_unpark(tn), 0);
        CHECK_RC(weft_join(tn, NULL), 0);
        CHECK(atomic_load(&n_after) == 0,
              "round %d: N (prio -10) ran %ld times at the yields of Y raised to prio 10", r,
              atomic_load(&n_after));
    }
    pair_end();
}

int main(void)
{
    check_watchdog(60);
    if (weft_max_vcores() < 2) {
        fprintf(stderr, "prio_urgent: needs two CPUs, the process has %d\n", weft_max_vcores());
        return 77;
    }
    struct weft_config c = { .vcores = 2, .sched = "prio" };
    CHECK_RC(weft_init(&c), 0);
    check_steal_from_hog();
    check_yield_after_raise();
    weft_shutdown();
    printf("prio_urgent: ok\n");
    return 0;
}
