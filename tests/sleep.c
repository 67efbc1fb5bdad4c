/*
 * sleep — weft_sleep_ns and weft_now_ns.
 *
 * Proves: weft_now_ns is monotonic; weft_sleep_ns(d) sleeps at least d (in
 * a uthread and in main); sleep(0) returns 0; a top-bit duration, including
 * UINT64_MAX, is EINVAL (and returns, it does not sleep forever); 200
 * uthreads sleeping until distinct random deadlines all wake, none before
 * its deadline, and at one vcore they wake in deadline order;
 * weft_sleep_until_ns(WEFT_FOREVER) and top-bit deadlines are EINVAL, a
 * past deadline returns 0 at once; 1000 uthreads (200 in sanitized builds)
 * sleeping until random deadlines (0..50 ms after a common start; 200 ms
 * sanitized) all wake, none before its deadline nor absurdly late, and in
 * deadline order for deadlines more than 2 ms apart (plus the scheduling
 * noise plain pthreads on the vcores' CPUs measured meanwhile; a handful of exceptions
 * tolerated: the kernel may deschedule a vcore), at every vcore count.
 */
#define _GNU_SOURCE
#include <sched.h>

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

#define LATE_TOL_NS SCALE(MS(200), MS(2000))
#define BAD_DEADLINE ((uint64_t)1 << 63)

static inline double ms_of(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- sleep_until: many until_sleepers ---------------------------------------------------------------- */

/* Sanitized builds wake a uthread ~100x more slowly (ASan makes and drops a
 * fake stack per uthread): fewer until_sleepers over a longer span there, or the
 * vcores cannot keep up and the order test measures throughput. */
#define NSLEEPERS SCALE(1000, 200)
#define SPAN_NS SCALE(MS(50), MS(200))
#define UNTIL_LEAD_NS SCALE(MS(200), MS(2000))
#define SEP_NS SCALE(MS(2), MS(20))
#define MAX_OUT_OF_ORDER SCALE(NSLEEPERS / 100, NSLEEPERS / 10)

struct until_sleeper {
    uint64_t deadline;
    uint64_t woke;
    int order;
};

static struct until_sleeper until_sleepers[NSLEEPERS];
static int until_wake_order[NSLEEPERS];
static atomic_int until_wake_next, until_late_starts;

static void *until_sleeper_main(void *arg)
{
    struct until_sleeper *s = arg;
    if (weft_now_ns() >= s->deadline)
        atomic_fetch_add(&until_late_starts, 1);
    CHECK_RC(weft_sleep_until_ns(s->deadline), 0);
    s->woke = weft_now_ns();
    s->order = atomic_fetch_add(&until_wake_next, 1);
    until_wake_order[s->order] = (int)(s - until_sleepers);
    return NULL;
}

/* The noise probes: a plain pthread on each vcore's CPU, sleeping 1 ms at
 * a time, records how late the kernel lets it run. That much of an
 * inversion is the machine's doing (a descheduled vcore), not the timer
 * heaps'. Pinned like the vcores: another process on a vcore's CPU delays
 * it longer than it delays a thread free to move. */
static atomic_int noise_stop;
static _Atomic uint64_t noise_max;

static void *noise_main(void *arg)
{
    int cpu = (int)(intptr_t)arg;
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* else unpinned: still a probe */
    }
    while (!atomic_load(&noise_stop)) {
        uint64_t t0 = weft_now_ns();
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        uint64_t over = weft_now_ns() - t0 - MS(1);
        uint64_t m = atomic_load(&noise_max);
        while (over > m && !atomic_compare_exchange_weak(&noise_max, &m, over))
            ;
    }
    return NULL;
}

static void *spawn_sleepers(void *arg)
{
    (void)arg;
    uint32_t seed = 4242;
    uint64_t base = weft_now_ns() + UNTIL_LEAD_NS;
    weft_t *t = calloc(NSLEEPERS, sizeof *t);
    CHECK(t != NULL, "calloc");
    for (int i = 0; i < NSLEEPERS; i++) {
        until_sleepers[i].deadline = base + (uint64_t)check_rand(&seed) % (SPAN_NS + 1);
        t[i] = spawn(until_sleeper_main, &until_sleepers[i]);
    }
    for (int i = 0; i < NSLEEPERS; i++)
        join(t[i]);
    free(t);
    return NULL;
}

static void *sleep_until_rows(void *arg)
{
    (void)arg;
    CHECK_RC(weft_sleep_until_ns(WEFT_FOREVER), EINVAL);
    CHECK_RC(weft_sleep_until_ns(BAD_DEADLINE), EINVAL);
    CHECK_RC(weft_sleep_until_ns((uint64_t)-5), EINVAL);
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_sleep_until_ns(1), 0);                     /* long past */
    CHECK_RC(weft_sleep_until_ns(t0), 0);                    /* just past */
    CHECK(weft_now_ns() - t0 < LATE_TOL_NS, "a past deadline slept %.1f ms",
          ms_of(weft_now_ns() - t0));
    uint64_t dl = weft_now_ns() + MS(5);
    CHECK_RC(weft_sleep_until_ns(dl), 0);
    uint64_t now = weft_now_ns();
    CHECK(now >= dl, "woke %llu ns before the deadline", (unsigned long long)(dl - now));
    CHECK(now - dl < LATE_TOL_NS, "woke %.1f ms late", ms_of(now - dl));
    return (void *)1;
}

static inline double ms_of_i(int64_t ns)
{
    return (double)ns / 1e6;
}

static void check_until_sleepers(void)
{
    check_phase("sleep_until rows");
    check_table(sleep_until_rows);

    check_phase("many until_sleepers");
    enum { MAX_PROBES = 64 };
    pthread_t noise[MAX_PROBES];
    int nprobes = weft_num_vcores() < MAX_PROBES ? weft_num_vcores() : MAX_PROBES;
    for (int i = 0; i < nprobes; i++)
        noise[i] = start_pthread(noise_main, (void *)(intptr_t)weft_vcore_cpu(i));
    in_uthread(spawn_sleepers, NULL);
    atomic_store(&noise_stop, 1);
    for (int i = 0; i < nprobes; i++)
        join_pthread(noise[i]);
    uint64_t sep = SEP_NS + atomic_load(&noise_max);
    CHECK(atomic_load(&until_late_starts) == 0,
          "%d until_sleepers started after their deadline (lead time too short for this machine)",
          atomic_load(&until_late_starts));
    CHECK(atomic_load(&until_wake_next) == NSLEEPERS, "%d of %d woke", atomic_load(&until_wake_next),
          NSLEEPERS);
    uint64_t worst_late = 0;
    for (int i = 0; i < NSLEEPERS; i++) {
        struct until_sleeper *s = &until_sleepers[i];
        CHECK(s->woke >= s->deadline, "sleeper %d woke %llu ns early", i,
              (unsigned long long)(s->deadline - s->woke));
        if (s->woke - s->deadline > worst_late)
            worst_late = s->woke - s->deadline;
    }
    /* In wake order, a sleeper whose deadline is more than sep before one
     * that woke earlier woke out of order. */
    uint64_t maxdl = 0;
    int ooo = 0, first_bad = -1;
    int64_t worst = 0;
    for (int k = 0; k < NSLEEPERS; k++) {
        struct until_sleeper *s = &until_sleepers[until_wake_order[k]];
        if (s->deadline + sep < maxdl) {
            ooo++;
            if (first_bad < 0)
                first_bad = k;
            if ((int64_t)(maxdl - s->deadline) > worst)
                worst = (int64_t)(maxdl - s->deadline);
        }
        if (s->deadline > maxdl)
            maxdl = s->deadline;
    }
    fprintf(stderr, "sleep: %d sleep_until sleepers: worst lateness %.2f ms, %d out of order "
            "by more than %.2f ms (kernel noise %.2f ms)\n", NSLEEPERS, ms_of(worst_late), ooo,
            ms_of(sep), ms_of(atomic_load(&noise_max)));
    CHECK(worst_late < LATE_TOL_NS, "a sleeper woke %.1f ms late", ms_of(worst_late));
    CHECK(ooo <= MAX_OUT_OF_ORDER,
          "%d sleepers woke after one with a deadline > %.0f ms later (first at wake %d, "
          "worst %.1f ms): timers not in deadline order",
          ooo, ms_of(sep), first_bad, ms_of_i(worst));
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
    check_until_sleepers();
    fprintf(stderr, "sleep: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
