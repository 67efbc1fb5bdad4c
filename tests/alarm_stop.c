/*
 * alarm_stop — weft_alarm_stop() against a running callback never spins
 * without bound.
 *
 * Proves (at two or more vcores; at one the cases cannot overlap and only
 * the table runs):
 *  1. Two alarm callbacks on two vcores, each stopping the other's alarm
 *     while both run, both return (vcore context does not wait for a
 *     callback running elsewhere; before the fix both spun for ever and the
 *     watchdog fired).
 *  2. A uthread that stops an alarm whose callback runs for 20 ms on another
 *     vcore returns only after that callback has returned, and meanwhile
 *     lets another uthread on its own vcore run (it sleeps rather than
 *     spins; before the fix the neighbour made no progress at all).
 *  3. The same from a kernel thread outside the vcores.
 *  4. A uthread stopping an alarm that fires at the same moment, many times:
 *     stop true exactly when the callback did not run, and never a callback
 *     still running after stop returned.
 */
#include "check.h"

/* ---- 1. callbacks that stop each other ------------------------------------------ */

static weft_alarm_t mutual[2];
static atomic_int mutual_in[2], mutual_out[2];
static atomic_int mutual_overlapped;

static void mutual_cb(weft_alarm_t *a)
{
    int me = a == &mutual[1];
    atomic_store(&mutual_in[me], 1);
    uint64_t until = weft_now_ns() + 200 * 1000000ull; /* wait for the other, bounded */
    while (!atomic_load(&mutual_in[!me]) && weft_now_ns() < until)
        ;
    if (atomic_load(&mutual_in[!me]) && !atomic_load(&mutual_out[!me]))
        atomic_fetch_add(&mutual_overlapped, 1);
    weft_alarm_stop(&mutual[!me]); /* FIRING on the other vcore: must not wait */
    atomic_store(&mutual_out[me], 1);
}

struct starter_arg {
    int i;
    uint64_t at;
};

static void *mutual_starter(void *arg)
{
    struct starter_arg *sa = arg;
    int i = sa->i;
    CHECK_RC(weft_alarm_set_abs(&mutual[i], sa->at), 0);
    CHECK_RC(weft_alarm_start(&mutual[i]), 0); /* on this vcore's heap */
    return NULL;
}

static atomic_int spinners_stop;

/* spinner() keeps its vcore busy, so each vcore runs its own heap's due
 * alarms at its scheduling decisions (an idle vcore would run both). */
static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load(&spinners_stop))
        weft_yield();
    return NULL;
}

static bool mutual_settled(void)
{
    for (int i = 0; i < 2; i++)
        if (atomic_load(&mutual_in[i]) != atomic_load(&mutual_out[i]))
            return false;
    return atomic_load(&mutual_out[0]) || atomic_load(&mutual_out[1]);
}

static void callbacks_stop_each_other(void)
{
    check_phase("callbacks stop each other");
    int overlapped = 0;
    for (int round = 0; round < 20 && overlapped == 0; round++) {
        for (int i = 0; i < 2; i++) {
            weft_alarm_init(&mutual[i], mutual_cb);
            atomic_store(&mutual_in[i], 0);
            atomic_store(&mutual_out[i], 0);
        }
        atomic_store(&spinners_stop, 0);
        weft_t sp0 = spawn_ex(spinner, NULL, WEFT_PINNED, 0, "spinner0");
        weft_t sp1 = spawn_ex(spinner, NULL, WEFT_PINNED, 1, "spinner1");
        uint64_t at = weft_now_ns() + 20 * 1000000ull;
        struct starter_arg a0 = { 0, at }, a1 = { 1, at };
        weft_t s0 = spawn_ex(mutual_starter, &a0, WEFT_PINNED, 0, "starter0");
        weft_t s1 = spawn_ex(mutual_starter, &a1, WEFT_PINNED, 1, "starter1");
        join(s0);
        join(s1);
        uint64_t until = weft_now_ns() + 2000 * 1000000ull;
        while (!mutual_settled() && weft_now_ns() < until)
            weft_sleep_ns(1000000);
        CHECK(mutual_settled(), "round %d: callbacks stuck stopping each other (in %d %d, out %d %d)",
              round, atomic_load(&mutual_in[0]), atomic_load(&mutual_in[1]),
              atomic_load(&mutual_out[0]), atomic_load(&mutual_out[1]));
        atomic_store(&spinners_stop, 1);
        join(sp0);
        join(sp1);
        for (int i = 0; i < 2; i++)
            weft_alarm_stop(&mutual[i]); /* one stopped the other before it fired: idle */
        overlapped = atomic_load(&mutual_overlapped);
    }
    CHECK(overlapped > 0, "the two callbacks never ran at the same time in 20 rounds");
}

/* ---- 2, 3. a stopper waits for a long callback without spinning -------------------- */

static weft_alarm_t slow;
static atomic_int slow_in, slow_out;
static atomic_long neighbour_steps;
static atomic_int neighbour_stop;

static void slow_cb(weft_alarm_t *a)
{
    (void)a;
    atomic_store(&slow_in, 1);
    uint64_t until = weft_now_ns() + 20 * 1000000ull;
    while (weft_now_ns() < until)
        ;
    atomic_store(&slow_out, 1);
}

static void *slow_starter(void *arg)
{
    (void)arg;
    weft_alarm_init(&slow, slow_cb);
    CHECK_RC(weft_alarm_set_rel(&slow, 1000000), 0);
    CHECK_RC(weft_alarm_start(&slow), 0); /* on vcore 1's heap */
    return NULL;
}

static void *neighbour(void *arg)
{
    (void)arg;
    while (!atomic_load(&neighbour_stop)) {
        atomic_fetch_add(&neighbour_steps, 1);
        weft_yield();
    }
    return NULL;
}

/* stop_slow() stops the slow alarm once its callback runs; true if the
 * callback had returned when stop did. */
static void *stop_slow(void *arg)
{
    (void)arg;
    while (!atomic_load(&slow_in))
        if (weft_self())
            weft_yield();
    long before = atomic_load(&neighbour_steps);
    bool stopped = weft_alarm_stop(&slow);
    long during = atomic_load(&neighbour_steps) - before;
    CHECK(!stopped, "stop returned true for an alarm whose callback ran");
    CHECK(atomic_load(&slow_out), "stop returned while the callback still ran");
    return (void *)during;
}

static void uthread_waits_for_callback(void)
{
    check_phase("a uthread stops a running callback");
    atomic_store(&slow_in, 0);
    atomic_store(&slow_out, 0);
    atomic_store(&neighbour_stop, 0);
    atomic_store(&neighbour_steps, 0);
    join(spawn_ex(slow_starter, NULL, WEFT_PINNED, 1, "starter"));
    weft_t n = spawn_ex(neighbour, NULL, WEFT_PINNED, 0, "neighbour");
    weft_t s = spawn_ex(stop_slow, NULL, WEFT_PINNED, 0, "stopper");
    long during = (long)join(s);
    atomic_store(&neighbour_stop, 1);
    join(n);
    CHECK(during > 0, "the stopper's vcore ran nothing else while it waited 20 ms (it spun)");
    fprintf(stderr, "  neighbour ran %ld times while the stopper waited\n", during);

    check_phase("an outside thread stops a running callback");
    atomic_store(&slow_in, 0);
    atomic_store(&slow_out, 0);
    join(spawn_ex(slow_starter, NULL, WEFT_PINNED, 1, "starter"));
    pthread_t p = start_pthread(stop_slow, NULL);
    join_pthread(p);
}

/* ---- 4. stop racing the firing ----------------------------------------------------- */

#define RACE_ROUNDS 2000
static atomic_int race_ran, race_running;

static void race_cb(weft_alarm_t *a)
{
    (void)a;
    atomic_store(&race_running, 1);
    for (volatile int i = 0; i < 200; i++)
        ;
    atomic_fetch_add(&race_ran, 1);
    atomic_store(&race_running, 0);
}

static void *race_stopper(void *arg)
{
    (void)arg;
    int stopped_n = 0;
    for (int r = 0; r < RACE_ROUNDS; r++) {
        weft_alarm_t a;
        weft_alarm_init(&a, race_cb);
        int ran0 = atomic_load(&race_ran);
        CHECK_RC(weft_alarm_set_rel(&a, (uint64_t)(r % 50) * 2000), 0);
        CHECK_RC(weft_alarm_start(&a), 0);
        for (uint64_t until = weft_now_ns() + (uint64_t)(r % 13) * 4000; weft_now_ns() < until;)
            weft_yield();
        bool stopped = weft_alarm_stop(&a);
        CHECK(!atomic_load(&race_running), "round %d: stop returned with the callback running", r);
        int ran = atomic_load(&race_ran) - ran0;
        CHECK(ran == (stopped ? 0 : 1), "round %d: stop %d but the callback ran %d times", r,
              stopped, ran);
        stopped_n += stopped;
    }
    return (void *)(intptr_t)stopped_n;
}

static void stop_races_firing(void)
{
    check_phase("stop races the firing");
    int stopped = (int)(intptr_t)join(spawn(race_stopper, NULL));
    fprintf(stderr, "  %d of %d stops came first\n", stopped, RACE_ROUNDS);
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    stop_races_firing();
    if (weft_num_vcores() < 2) {
        fprintf(stderr, "alarm_stop: ok (1 vcore: the overlapping cases need two)\n");
        weft_shutdown();
        return 0;
    }
    callbacks_stop_each_other();
    uthread_waits_for_callback();
    fprintf(stderr, "alarm_stop: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
