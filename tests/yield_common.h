/*
 * yield_common.h — the cases shared by the yield tests: yield_rt (checks
 * written by hand, as the pass would emit them) and yield_pass (loops
 * compiled with the plugin). Each test supplies its spin loops:
 *
 *   spin_checked(stop, count)    spins until *stop, adding to *count, with
 *                                flag-mode checks in the loop;
 *   spin_unchecked(stop, count)  the same loop without any check.
 *
 * Everything runs on one vcore with a 1 ms quantum (2 ms for the interval
 * case) and WEFT_PREEMPT_SIGNALS=0, so the flag is the only way a spinner
 * gives up the vcore. Proves:
 *  (a) a checked spinner does not starve a sleeper on its vcore: the sleeper
 *      wakes while the spinner still spins, the spinner keeps running after
 *      it (its count grows), preempt_taken grows, and the vcore received no
 *      notification signal;
 *  (b) an unchecked spinner starves the sleeper for 300 ms (so (a) is the
 *      flag's doing, not a signal's), and the sleeper runs once it stops;
 *  (c) a checked spinner inside weft_notifs_disable() keeps the vcore for
 *      100 ms (the sleeper does not run), and yields at the outermost enable;
 *  (d) quantum: two checked spinners share the vcore; the median time one
 *      runs between two yields lies between half and four quanta (the
 *      yield respects the quantum and comes soon after it ends).
 */
#ifndef WEFT_TESTS_YIELD_COMMON_H
#define WEFT_TESTS_YIELD_COMMON_H

#include "check.h"

#include <weft/event.h>
#include <weft/yield.h>

#define YQ_US 1000u
#define Y_BOUND_NS SCALE(MS(5000), MS(20000))

void spin_checked(atomic_int *stop, atomic_ulong *count);
void spin_unchecked(atomic_int *stop, atomic_ulong *count);

struct ystats {
    uint64_t taken, notifs;
};

static struct ystats ystats(void)
{
    struct weft_vcore_stats s;
    CHECK_RC(weft_stats(0, &s), 0);
    return (struct ystats){ s.preempt_taken, s.notifs };
}

struct yspin {
    int checked;
    atomic_int stop, running;
    atomic_ulong count;
};

static void *yspinner(void *arg)
{
    struct yspin *s = arg;
    atomic_store(&s->running, 1);
    if (s->checked)
        spin_checked(&s->stop, &s->count);
    else
        spin_unchecked(&s->stop, &s->count);
    return NULL;
}

struct ysleeper {
    atomic_int started, woke;
    atomic_int *after; /* the spinner's running flag */
};

/* ysleeper() sleeps 10 ms from a moment the spinner already runs (it
 * naps until then: on a slow machine, or under qemu, the spinner may start
 * later than 10 ms after the sleeper), so once the spinner runs, the
 * sleeper wakes only if the spinner is preempted. */
static void *ysleeper(void *arg)
{
    struct ysleeper *s = arg;
    atomic_store(&s->started, 1);
    while (!atomic_load(s->after))
        CHECK_RC(weft_sleep_ns(MS(1)), 0);
    CHECK_RC(weft_sleep_ns(MS(10)), 0);
    atomic_store(&s->woke, 1);
    return NULL;
}

/* ywait() waits (main, an outside thread) up to bound for *flag. */
static void ywait(atomic_int *flag, uint64_t bound, const char *what)
{
    uint64_t t0 = weft_now_ns();
    while (!atomic_load(flag)) {
        CHECK(weft_now_ns() - t0 < bound, "%s: not after %.0f ms", what, (double)bound / 1e6);
        CHECK_RC(weft_sleep_ns(100000), 0);
    }
}

static void case_sleeper(int checked)
{
    struct yspin sp = { .checked = checked };
    struct ysleeper sl = { .after = &sp.running };
    weft_t tsl = spawn(ysleeper, &sl);
    ywait(&sl.started, Y_BOUND_NS, "sleeper started");
    struct ystats s0 = ystats();
    weft_t tsp = spawn(yspinner, &sp);
    ywait(&sp.running, Y_BOUND_NS, "spinner started");
    if (checked) {
        ywait(&sl.woke, Y_BOUND_NS, "the sleeper woke beside a checked spinner");
        unsigned long c0 = atomic_load(&sp.count);
        uint64_t t0 = weft_now_ns();
        while (atomic_load(&sp.count) == c0) {
            CHECK(weft_now_ns() - t0 < Y_BOUND_NS, "the spinner did not run again");
            CHECK_RC(weft_sleep_ns(100000), 0);
        }
        struct ystats s1 = ystats();
        CHECK(s1.taken > s0.taken, "preempt_taken did not grow (%llu)",
              (unsigned long long)s1.taken);
        CHECK(s1.notifs == s0.notifs, "the vcore took %llu notification signals",
              (unsigned long long)(s1.notifs - s0.notifs));
    } else {
        CHECK_RC(weft_sleep_ns(MS(300)), 0);
        CHECK(!atomic_load(&sl.woke), "an unchecked spinner was preempted with signals off");
        CHECK(ystats().taken == s0.taken, "a preemption was taken with signals off");
    }
    atomic_store(&sp.stop, 1);
    join(tsp);
    ywait(&sl.woke, Y_BOUND_NS, "the sleeper after the spinner stopped");
    join(tsl);
}

struct ydisabled {
    atomic_int stop, running, yielded;
    atomic_ulong count;
};

static void *ydisabled_spinner(void *arg)
{
    struct ydisabled *d = arg;
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK_RC(weft_notifs_disable(), 0);
    atomic_store(&d->running, 1);
    spin_checked(&d->stop, &d->count);
    struct ystats s0 = ystats();
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK(ystats().taken == s0.taken, "yielded at an inner enable");
    CHECK_RC(weft_notifs_enable(), 0); /* the outermost: the pending yield is taken */
    atomic_store(&d->yielded, ystats().taken > s0.taken);
    return NULL;
}

static void case_disabled(void)
{
    struct ydisabled d = { 0 };
    struct ysleeper sl = { .after = &d.running };
    weft_t tsl = spawn(ysleeper, &sl);
    ywait(&sl.started, Y_BOUND_NS, "sleeper started");
    weft_t tsp = spawn(ydisabled_spinner, &d);
    ywait(&d.running, Y_BOUND_NS, "spinner started");
    CHECK_RC(weft_sleep_ns(MS(100)), 0);
    CHECK(!atomic_load(&sl.woke), "the sleeper ran while the spinner held notifications off");
    CHECK(atomic_load(&d.count) > 0, "the spinner did not spin");
    atomic_store(&d.stop, 1);
    join(tsp);
    CHECK(atomic_load(&d.yielded), "no yield at the outermost weft_notifs_enable()");
    ywait(&sl.woke, Y_BOUND_NS, "the sleeper after the enable");
    join(tsl);
}

static void case_quantum(void)
{
    const unsigned q_us = 2 * YQ_US;
    CHECK_RC(weft_set_preempt_period(q_us), 0);
    struct yspin a = { .checked = 1 }, b = { .checked = 1 };
    weft_t ta = spawn(yspinner, &a), tb = spawn(yspinner, &b);
    ywait(&a.running, Y_BOUND_NS, "spinner a started");
    ywait(&b.running, Y_BOUND_NS, "spinner b started");
    struct weft_vcore_stats s0, s1;
    struct timespec c0, c1;
    CHECK_RC(weft_stats(0, &s0), 0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_sleep_ns(MS(300)), 0);
    CHECK_RC(weft_stats(0, &s1), 0);
    uint64_t dt = weft_now_ns() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    atomic_store(&a.stop, 1);
    atomic_store(&b.stop, 1);
    join(ta);
    join(tb);
    uint64_t n = s1.decisions - s0.decisions;
    CHECK(n >= 10, "only %llu decisions in %.0f ms with two checked spinners",
          (unsigned long long)n, (double)dt / 1e6);
    /* The quantum is wall time (a timer), so decisions come no faster than
     * about one per quantum of wall time; but a vcore whose kernel thread
     * lost its CPU (a loaded machine) runs its spinner less than the window
     * lasts, so the upper bound is judged on the CPU time the spinners' vcores
     * got: the process's, shared by the vcores busy with them. */
    double cpu_ns = (double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec);
    int busy = weft_num_vcores() < 2 ? weft_num_vcores() : 2;
    double ran_ns = cpu_ns / busy < (double)dt ? cpu_ns / busy : (double)dt;
    double mean_us = (double)dt / 1e3 / (double)n, ran_us = ran_ns / 1e3 / (double)n;
    fprintf(stderr, "  two checked spinners, quantum %u us: %llu yields in %.0f ms (%.0f ms on a CPU), "
            "%.0f us between decisions on average (%.0f us on a CPU)\n", q_us,
            (unsigned long long)n, (double)dt / 1e6, ran_ns / 1e6, mean_us, ran_us);
    CHECK(mean_us >= 0.5 * q_us && ran_us <= 4.0 * q_us,
          "a uthread ran %.0f us between yields on average (%.0f us on a CPU), quantum %u us",
          mean_us, ran_us, q_us);
    CHECK_RC(weft_set_preempt_period(YQ_US), 0);
}

/* yield_main() runs the cases; the test's main calls it. */
static int yield_main(const char *name)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("init");
    setenv("WEFT_PREEMPT_SIGNALS", "0", 1);
    weft__yield_register(WEFT_YIELD_FLAG); /* the pass's constructor does this too */
    struct weft_config c = { .vcores = 1, .preempt_us = YQ_US };
    CHECK_RC(weft_init(&c), 0);
    check_phase("(a) a checked spinner and a sleeper");
    case_sleeper(1);
    check_phase("(b) an unchecked spinner and a sleeper");
    case_sleeper(0);
    check_phase("(c) checks in a disabled region");
    case_disabled();
    check_phase("(d) the quantum");
    case_quantum();
    weft_shutdown();
    fprintf(stderr, "%s: ok\n", name);
    return 0;
}

#endif /* WEFT_TESTS_YIELD_COMMON_H */
