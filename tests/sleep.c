/*
 * sleep — weft_sleep_ns and weft_now_ns.
 *
 * Proves: weft_now_ns is monotonic; weft_sleep_ns(d) sleeps at least d (in
 * a uthread and in main); sleep(0) returns 0; a top-bit duration, including
 * UINT64_MAX, is EINVAL (and returns, it does not sleep forever); 200
 * uthreads sleeping until distinct random deadlines all wake, none before
 * its deadline, and at one vcore they wake in deadline order.
 */
#include "check.h"

static void check_durations(const char *where)
{
    static const uint64_t ds[] = { 1000, MS(1), MS(3), MS(10) };
    uint64_t prev = weft_now_ns();
    for (unsigned i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        uint64_t t0 = weft_now_ns();
        CHECK(t0 >= prev, "weft_now_ns went backwards");
        CHECK_RC(weft_sleep_ns(ds[i]), 0);
        uint64_t t1 = weft_now_ns();
        CHECK(t1 - t0 >= ds[i], "%s: sleep_ns(%llu) took only %llu ns", where,
              (unsigned long long)ds[i], (unsigned long long)(t1 - t0));
        prev = t1;
    }
    CHECK_RC(weft_sleep_ns(0), 0);
    CHECK_RC(weft_sleep_ns((uint64_t)1 << 63), EINVAL);
    CHECK_RC(weft_sleep_ns((uint64_t)-5), EINVAL);
}

static void *durations_in_uthread(void *arg)
{
    (void)arg;
    check_durations("uthread");
    return (void *)1;
}

static atomic_int forever_rc = -1;

static void *sleep_forever_value(void *arg)
{
    (void)arg;
    atomic_store(&forever_rc, weft_sleep_ns(UINT64_MAX));
    return NULL;
}

static void check_uint64_max(void)
{
    check_phase("sleep_ns(UINT64_MAX) is EINVAL");
    spawn_ex(sleep_forever_value, NULL, WEFT_DETACHED, 0, NULL);
    WAIT_UNTIL(atomic_load(&forever_rc) != -1, "weft_sleep_ns(UINT64_MAX) returned");
    CHECK_RC(atomic_load(&forever_rc), EINVAL);
}

/* ---- many sleepers ---------------------------------------------------------------- */

#define NSLEEP 200
#define GAP_NS 1000000ull                 /* deadlines 1 ms apart */
#define JITTER_SLOTS 10                   /* out-of-order wakes tolerated, in gaps */
#define LEAD_NS SCALE(MS(400), MS(1500))  /* time to start everyone first */

struct sleeper {
    uint64_t deadline;
    int slot;
};

static struct sleeper sl[NSLEEP];
static int wake_log[NSLEEP];
static atomic_int wake_next, late_start;

static void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;
    uint64_t now = weft_now_ns();
    if (now >= s->deadline) {
        atomic_fetch_add(&late_start, 1);
        return NULL;
    }
    CHECK_RC(weft_sleep_ns(s->deadline - now), 0);
    uint64_t woke = weft_now_ns();
    CHECK(woke >= s->deadline, "slot %d woke %llu ns early", s->slot,
          (unsigned long long)(s->deadline - woke));
    wake_log[atomic_fetch_add(&wake_next, 1)] = s->slot;
    return NULL;
}

static void *many_sleepers(void *arg)
{
    (void)arg;
    int perm[NSLEEP];
    for (int i = 0; i < NSLEEP; i++)
        perm[i] = i;
    uint32_t seed = 12345;
    for (int i = NSLEEP - 1; i > 0; i--) {
        int j = (int)(check_rand(&seed) % (uint32_t)(i + 1));
        int tmp = perm[i];
        perm[i] = perm[j], perm[j] = tmp;
    }
    uint64_t base = weft_now_ns() + LEAD_NS;
    weft_t t[NSLEEP];
    for (int i = 0; i < NSLEEP; i++) {
        sl[i] = (struct sleeper){ base + (uint64_t)perm[i] * GAP_NS, perm[i] };
        t[i] = spawn(sleeper_main, &sl[i]);
    }
    for (int i = 0; i < NSLEEP; i++)
        join(t[i]);
    return NULL;
}

static void check_many_sleepers(void)
{
    check_phase("many sleepers");
    in_uthread(many_sleepers, NULL);
    CHECK(atomic_load(&late_start) == 0,
          "%d sleepers started after their deadline (machine too slow for the lead time)",
          atomic_load(&late_start));
    CHECK(atomic_load(&wake_next) == NSLEEP, "%d of %d woke", atomic_load(&wake_next), NSLEEP);
    /* On one vcore, timers fire in deadline order. A sleeper's timer starts
     * a little after it read the clock, and the kernel may deschedule the
     * vcore in between (other tests share the CPUs), so a wake may come out
     * of order by less than JITTER_SLOTS gaps; anything more is a real
     * ordering bug (LIFO, a broken heap). */
    if (weft_num_vcores() == 1) {
        int highest = -1;
        for (int i = 0; i < NSLEEP; i++) {
            CHECK(wake_log[i] > highest - JITTER_SLOTS,
                  "wake %d was slot %d after slot %d: not in deadline order", i, wake_log[i],
                  highest);
            if (wake_log[i] > highest)
                highest = wake_log[i];
        }
    }
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("durations from main");
    check_durations("main");
    check_phase("durations from a uthread");
    CHECK(in_uthread(durations_in_uthread, NULL) == (void *)1, "durations");
    check_uint64_max();
    check_many_sleepers();
    fprintf(stderr, "sleep: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
