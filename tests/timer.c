/*
 * timer — per-vcore timer heaps: weft_sleep_until_ns, alarms, and the timed
 * waits of every primitive in sync.h.
 *
 * Proves:
 *  (a) 1000 uthreads (200 in sanitized builds) sleeping until random
 *      deadlines (0..50 ms after a common start; 200 ms sanitized) all wake, none before its deadline nor absurdly late,
 *      and in deadline order for deadlines more than 2 ms apart (plus the
 *      scheduling noise a plain pthread measured meanwhile; a handful of
 *      exceptions tolerated: the kernel may deschedule a vcore);
 *      weft_sleep_until_ns(WEFT_FOREVER) and top-bit deadlines are EINVAL,
 *      a past deadline returns 0 at once.
 *  (b) alarms: of N started alarms, half stopped at random moments, the
 *      callbacks that ran plus the stop() calls that returned true is N
 *      exactly, per alarm exactly one of the two, and a false stop() means
 *      the callback has already returned; weft_alarm_reset_abs() accounts
 *      the same way (true: one callback for two armings, false: two); a
 *      periodic alarm re-arming itself (start, and reset_abs) fires exactly
 *      K times, never before its deadline; weft_alarm_stop() from its own
 *      callback returns false at once; callbacks run in vcore context (no
 *      weft_self()); a callback can start another alarm and unpark a
 *      uthread; EBUSY for start/set on an armed alarm, EINVAL for no
 *      deadline, no callback and top-bit deadlines, a bad reset_abs changes
 *      nothing; alarms started from main and from a plain pthread fire,
 *      also with a deadline already past and every vcore idle.
 *  (c) timed waits: mutex timedlock, cond timedwait, sem timedwait, futex
 *      wait, rwlock timedrdlock/timedwrlock time out not before the deadline
 *      and not long after it, fail at once for a past deadline, EINVAL for
 *      a top-bit one, and succeed when released in time — waiters in
 *      uthreads and in main, holders in uthreads and in a pthread; units of
 *      a semaphore posted while timed waiters expire are never lost.
 */
#include "check.h"

#define LATE_TOL_NS SCALE(MS(200), MS(2000))
#define BAD_DEADLINE ((uint64_t)1 << 63)

static inline double ms_of(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- (a) many sleepers ---------------------------------------------------------------- */

/* Sanitized builds wake a uthread ~100x more slowly (ASan makes and drops a
 * fake stack per uthread): fewer sleepers over a longer span there, or the
 * vcores cannot keep up and the order test measures throughput. */
#define NSLEEPERS SCALE(1000, 200)
#define SPAN_NS SCALE(MS(50), MS(200))
#define LEAD_NS SCALE(MS(200), MS(2000))
#define SEP_NS SCALE(MS(2), MS(20))
#define MAX_OUT_OF_ORDER SCALE(NSLEEPERS / 100, NSLEEPERS / 10)

struct sleeper {
    uint64_t deadline;
    uint64_t woke;
    int order;
};

static struct sleeper sleepers[NSLEEPERS];
static int wake_order[NSLEEPERS];
static atomic_int wake_next, late_starts;

static void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;
    if (weft_now_ns() >= s->deadline)
        atomic_fetch_add(&late_starts, 1);
    CHECK_RC(weft_sleep_until_ns(s->deadline), 0);
    s->woke = weft_now_ns();
    s->order = atomic_fetch_add(&wake_next, 1);
    wake_order[s->order] = (int)(s - sleepers);
    return NULL;
}

/* The noise probe: a plain pthread sleeping 1 ms at a time records how late
 * the kernel lets it run. That much of an inversion is the machine's doing
 * (a descheduled vcore), not the timer heaps'. */
static atomic_int noise_stop;
static _Atomic uint64_t noise_max;

static void *noise_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&noise_stop)) {
        uint64_t t0 = weft_now_ns();
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
        uint64_t over = weft_now_ns() - t0 - MS(1);
        if (over > atomic_load(&noise_max))
            atomic_store(&noise_max, over);
    }
    return NULL;
}

static void *spawn_sleepers(void *arg)
{
    (void)arg;
    uint32_t seed = 4242;
    uint64_t base = weft_now_ns() + LEAD_NS;
    weft_t *t = calloc(NSLEEPERS, sizeof *t);
    CHECK(t != NULL, "calloc");
    for (int i = 0; i < NSLEEPERS; i++) {
        sleepers[i].deadline = base + (uint64_t)check_rand(&seed) % (SPAN_NS + 1);
        t[i] = spawn(sleeper_main, &sleepers[i]);
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

static void check_sleepers(void)
{
    check_phase("sleep_until rows");
    check_table(sleep_until_rows);

    check_phase("many sleepers");
    pthread_t noise = start_pthread(noise_main, NULL);
    in_uthread(spawn_sleepers, NULL);
    atomic_store(&noise_stop, 1);
    join_pthread(noise);
    uint64_t sep = SEP_NS + atomic_load(&noise_max);
    CHECK(atomic_load(&late_starts) == 0,
          "%d sleepers started after their deadline (lead time too short for this machine)",
          atomic_load(&late_starts));
    CHECK(atomic_load(&wake_next) == NSLEEPERS, "%d of %d woke", atomic_load(&wake_next),
          NSLEEPERS);
    uint64_t worst_late = 0;
    for (int i = 0; i < NSLEEPERS; i++) {
        struct sleeper *s = &sleepers[i];
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
        struct sleeper *s = &sleepers[wake_order[k]];
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
    fprintf(stderr, "timer: %d sleepers: worst lateness %.2f ms, %d out of order by more "
            "than %.2f ms (kernel noise %.2f ms)\n", NSLEEPERS, ms_of(worst_late), ooo, ms_of(sep),
            ms_of(atomic_load(&noise_max)));
    CHECK(worst_late < LATE_TOL_NS, "a sleeper woke %.1f ms late", ms_of(worst_late));
    CHECK(ooo <= MAX_OUT_OF_ORDER,
          "%d sleepers woke after one with a deadline > %.0f ms later (first at wake %d, "
          "worst %.1f ms): timers not in deadline order",
          ooo, ms_of(sep), first_bad, ms_of_i(worst));
}

/* ---- (b) alarms -------------------------------------------------------------------------- */

struct talarm {
    weft_alarm_t a;              /* first: the callback casts back */
    atomic_int fired;            /* callbacks run */
    atomic_int in_cb;            /* 1 while the callback runs */
    uint64_t not_before;         /* earliest deadline of any arming */
};

static atomic_int total_fired, cb_bad_context;

static void count_cb(struct weft_alarm *a)
{
    struct talarm *t = (struct talarm *)a;
    atomic_store(&t->in_cb, 1);
    if (weft_self() != NULL || weft_vcore_id() < 0 || weft_vcore_id() >= weft_num_vcores())
        atomic_fetch_add(&cb_bad_context, 1);
    uint64_t now = weft_now_ns();
    CHECK(now >= t->not_before, "alarm fired %llu ns before its deadline",
          (unsigned long long)(t->not_before - now));
    /* Linger a little so that stop() from another vcore may find us running. */
    if ((uintptr_t)t % 3 == 0)
        spin_work(2000);
    atomic_fetch_add(&t->fired, 1);
    atomic_fetch_add(&total_fired, 1);
    atomic_store(&t->in_cb, 0);
}

#define NALARMS SCALE(1000, 200)

static struct talarm alarms[NALARMS];

/* stop_half() starts n alarms 0..10 ms out, then stops every other one at
 * random moments (some before, some racing with, some after the firing). */
static void stop_half(struct talarm *al, int n, uint32_t seed)
{
    atomic_store(&total_fired, 0);
    for (int i = 0; i < n; i++) {
        atomic_store(&al[i].fired, 0);
        weft_alarm_init(&al[i].a, count_cb);
        uint64_t dl = weft_now_ns() + check_rand(&seed) % (MS(10) + 1);
        al[i].not_before = dl;
        CHECK_RC(weft_alarm_set_abs(&al[i].a, dl), 0);
        CHECK_RC(weft_alarm_start(&al[i].a), 0);
    }
    int stopped_true = 0;
    char *stopped = calloc((size_t)n, 1);
    CHECK(stopped != NULL, "calloc");
    for (int i = 0; i < n; i += 2) {
        if (check_rand(&seed) % 8 == 0)
            weft_sleep_ns(check_rand(&seed) % 200000);
        if (weft_alarm_stop(&al[i].a)) {
            stopped[i] = 1;
            stopped_true++;
        } else {
            /* Not stopped: it fired, and its callback has returned. */
            CHECK(atomic_load(&al[i].fired) == 1 && atomic_load(&al[i].in_cb) == 0,
                  "alarm %d: stop() returned false but fired=%d in_cb=%d", i,
                  atomic_load(&al[i].fired), atomic_load(&al[i].in_cb));
        }
        /* A second stop finds nothing armed. */
        CHECK(!weft_alarm_stop(&al[i].a), "alarm %d: second stop returned true", i);
    }
    WAIT_UNTIL(atomic_load(&total_fired) + stopped_true >= n, "the unstopped alarms fired");
    weft_sleep_ns(MS(30));          /* any extra (double) firing would show now */
    CHECK(atomic_load(&total_fired) + stopped_true == n,
          "%d callbacks + %d successful stops != %d alarms", atomic_load(&total_fired),
          stopped_true, n);
    for (int i = 0; i < n; i++)
        CHECK(atomic_load(&al[i].fired) == (stopped[i] ? 0 : 1),
              "alarm %d fired %d times (stopped=%d)", i, atomic_load(&al[i].fired), stopped[i]);
    CHECK(stopped_true > 0 || n < 20, "no stop() won at all (%d alarms)", n);
    free(stopped);
}

static void *stop_half_in_uthread(void *arg)
{
    (void)arg;
    stop_half(alarms, NALARMS, 99);
    return NULL;
}

/* reset_all() arms n alarms, then moves each with reset_abs at random moments
 * (a few were never armed): callbacks == 2n - (resets that returned true) -
 * (never armed). */
static void reset_all(struct talarm *al, int n, uint32_t seed)
{
    atomic_store(&total_fired, 0);
    char *armed = calloc((size_t)n, 1);
    CHECK(armed != NULL, "calloc");
    uint64_t t0 = weft_now_ns();
    for (int i = 0; i < n; i++) {
        atomic_store(&al[i].fired, 0);
        weft_alarm_init(&al[i].a, count_cb);
        al[i].not_before = t0;
        if (i % 10 == 9)
            continue;               /* never armed before its reset */
        CHECK_RC(weft_alarm_set_rel(&al[i].a, check_rand(&seed) % (MS(8) + 1)), 0);
        CHECK_RC(weft_alarm_start(&al[i].a), 0);
        armed[i] = 1;
    }
    int expect_total = 0;
    int *expect = calloc((size_t)n, sizeof *expect);
    CHECK(expect != NULL, "calloc");
    for (int i = 0; i < n; i++) {
        if (check_rand(&seed) % 8 == 0)
            weft_sleep_ns(check_rand(&seed) % 200000);
        bool r = weft_alarm_reset_abs(&al[i].a, weft_now_ns() + check_rand(&seed) % (MS(8) + 1));
        if (!armed[i])
            CHECK(!r, "alarm %d: reset_abs of a never-armed alarm returned true", i);
        expect[i] = armed[i] ? (r ? 1 : 2) : 1;
        expect_total += expect[i];
    }
    WAIT_UNTIL(atomic_load(&total_fired) >= expect_total, "the reset alarms fired");
    weft_sleep_ns(MS(30));
    CHECK(atomic_load(&total_fired) == expect_total, "%d callbacks, expected %d",
          atomic_load(&total_fired), expect_total);
    for (int i = 0; i < n; i++)
        CHECK(atomic_load(&al[i].fired) == expect[i], "alarm %d fired %d times, expected %d", i,
              atomic_load(&al[i].fired), expect[i]);
    free(expect);
    free(armed);
}

static void *reset_all_in_uthread(void *arg)
{
    (void)arg;
    reset_all(alarms, NALARMS, 7);
    return NULL;
}

/* A periodic alarm: the callback re-arms itself until it has run K times. */
#define PERIOD_K 20
#define PERIOD_NS MS(1)

struct periodic {
    weft_alarm_t a;
    atomic_int count;
    atomic_int rearm_errors;
    uint64_t last;
    uint64_t min_gap;
    int use_reset;
    weft_sem_t done;
};

static void periodic_cb(struct weft_alarm *a)
{
    struct periodic *p = (struct periodic *)a;
    uint64_t now = weft_now_ns();
    if (p->last && now - p->last < p->min_gap)
        p->min_gap = now - p->last;
    p->last = now;
    int c = atomic_fetch_add(&p->count, 1) + 1;
    if (c < PERIOD_K) {
        if (p->use_reset) {
            /* Firing: not armed any more, so reset_abs reports nothing stopped. */
            if (weft_alarm_reset_abs(a, now + PERIOD_NS))
                atomic_fetch_add(&p->rearm_errors, 1);
        } else {
            if (weft_alarm_set_rel(a, PERIOD_NS) != 0 || weft_alarm_start(a) != 0)
                atomic_fetch_add(&p->rearm_errors, 1);
        }
    } else {
        CHECK_RC(weft_sem_post(&p->done), 0);
    }
}

static void check_periodic(int use_reset)
{
    static struct periodic p;
    memset(&p, 0, sizeof p);
    p.min_gap = UINT64_MAX;
    p.use_reset = use_reset;
    CHECK_RC(weft_sem_init(&p.done, 0), 0);
    weft_alarm_init(&p.a, periodic_cb);
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_alarm_set_rel(&p.a, PERIOD_NS), 0);
    CHECK_RC(weft_alarm_start(&p.a), 0);
    CHECK_RC(weft_sem_timedwait(&p.done, weft_now_ns() + WAIT_BOUND_NS), 0);
    uint64_t t1 = weft_now_ns();
    weft_sleep_ns(MS(20));
    CHECK(atomic_load(&p.count) == PERIOD_K, "periodic alarm ran %d times, expected %d",
          atomic_load(&p.count), PERIOD_K);
    CHECK(atomic_load(&p.rearm_errors) == 0, "%d re-arms failed", atomic_load(&p.rearm_errors));
    CHECK(p.min_gap >= PERIOD_NS, "two periods only %llu ns apart",
          (unsigned long long)p.min_gap);
    CHECK(t1 - t0 >= PERIOD_K * PERIOD_NS, "K periods took only %.2f ms", ms_of(t1 - t0));
    CHECK(!weft_alarm_stop(&p.a), "stop after the last period returned true");
}

/* weft_alarm_stop() from the alarm's own callback. */
static struct {
    weft_alarm_t a;
    atomic_int ran;
    atomic_int result;           /* 0 false, 1 true */
    uint64_t took;
} selfstop;

static void selfstop_cb(struct weft_alarm *a)
{
    uint64_t t0 = weft_now_ns();
    atomic_store(&selfstop.result, weft_alarm_stop(a) ? 1 : 0);
    selfstop.took = weft_now_ns() - t0;
    atomic_store(&selfstop.ran, 1);
}

/* A chain: each callback starts the next alarm; the last unparks a uthread. */
#define CHAIN 10
static weft_alarm_t chain[CHAIN];
static atomic_int chain_ran;
static weft_t _Atomic chain_waiter;

static void chain_cb(struct weft_alarm *a)
{
    int i = (int)(a - chain);
    atomic_fetch_add(&chain_ran, 1);
    if (i + 1 < CHAIN) {
        CHECK_RC(weft_alarm_set_rel(&chain[i + 1], 100000), 0);
        CHECK_RC(weft_alarm_start(&chain[i + 1]), 0);
    } else {
        CHECK_RC(weft_unpark(atomic_load(&chain_waiter)), 0);
    }
}

static void *chain_main(void *arg)
{
    (void)arg;
    atomic_store(&chain_waiter, weft_self());
    for (int i = 0; i < CHAIN; i++)
        weft_alarm_init(&chain[i], chain_cb);
    CHECK_RC(weft_alarm_set_rel(&chain[0], 100000), 0);
    CHECK_RC(weft_alarm_start(&chain[0]), 0);
    while (atomic_load(&chain_ran) < CHAIN)
        CHECK_RC(weft_park(), 0);            /* only the last callback unparks us */
    return (void *)1;
}

static void noop_cb(struct weft_alarm *a)
{
    (void)a;
}

static void *alarm_rows(void *arg)
{
    (void)arg;
    weft_alarm_t a;
    weft_alarm_init(&a, noop_cb);
    CHECK_RC(weft_alarm_start(&a), EINVAL);                    /* no deadline */
    CHECK(!weft_alarm_stop(&a), "stop of a never-armed alarm returned true");
    CHECK_RC(weft_alarm_set_abs(&a, BAD_DEADLINE), EINVAL);
    CHECK_RC(weft_alarm_set_abs(&a, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_alarm_set_rel(&a, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_alarm_set_rel(&a, BAD_DEADLINE), EINVAL);
    CHECK_RC(weft_alarm_start(&a), EINVAL);                    /* still no deadline */

    weft_alarm_t nocb;
    weft_alarm_init(&nocb, NULL);
    CHECK_RC(weft_alarm_set_rel(&nocb, MS(1)), 0);
    CHECK_RC(weft_alarm_start(&nocb), EINVAL);                 /* no callback */

    CHECK_RC(weft_alarm_set_abs(&a, weft_now_ns() + MS(10000)), 0);
    CHECK_RC(weft_alarm_start(&a), 0);
    CHECK_RC(weft_alarm_start(&a), EBUSY);
    CHECK_RC(weft_alarm_set_abs(&a, weft_now_ns() + MS(5)), EBUSY);
    CHECK_RC(weft_alarm_set_rel(&a, MS(5)), EBUSY);
    /* A bad reset changes nothing: still armed at the old deadline. */
    CHECK(!weft_alarm_reset_abs(&a, BAD_DEADLINE), "reset_abs(bad) returned true");
    CHECK(weft_alarm_stop(&a), "the alarm was not armed any more after a bad reset_abs");
    CHECK(!weft_alarm_stop(&a), "second stop returned true");
    /* A good reset of an armed alarm stops the old arming. */
    CHECK_RC(weft_alarm_set_abs(&a, weft_now_ns() + MS(10000)), 0);
    CHECK_RC(weft_alarm_start(&a), 0);
    CHECK(weft_alarm_reset_abs(&a, weft_now_ns() + MS(20000)), "reset_abs of an armed alarm");
    CHECK(weft_alarm_stop(&a), "stop after reset_abs");
    return (void *)1;
}

/* Alarms started from outside threads, with every vcore idle. */
#define NOUT 16
static struct talarm out_alarms[NOUT];

static void start_outside(int first, int n, uint32_t seed)
{
    for (int i = first; i < first + n; i++) {
        atomic_store(&out_alarms[i].fired, 0);
        weft_alarm_init(&out_alarms[i].a, count_cb);
        /* Every fourth one is already due. */
        uint64_t now = weft_now_ns();
        uint64_t dl = i % 4 == 0 ? now - 1000 : now + 1000000 + check_rand(&seed) % MS(20);
        out_alarms[i].not_before = i % 4 == 0 ? 0 : dl;
        CHECK_RC(weft_alarm_set_abs(&out_alarms[i].a, dl), 0);
        CHECK_RC(weft_alarm_start(&out_alarms[i].a), 0);
    }
}

static void *pthread_starts_alarms(void *arg)
{
    (void)arg;
    start_outside(NOUT / 2, NOUT / 2, 5);
    return NULL;
}

static void check_outside_alarms(void)
{
    check_phase("alarms from main and a pthread");
    atomic_store(&total_fired, 0);
    start_outside(0, NOUT / 2, 3);
    join_pthread(start_pthread(pthread_starts_alarms, NULL));
    WAIT_UNTIL(atomic_load(&total_fired) == NOUT, "alarms started outside fired");
    weft_sleep_ns(MS(30));
    CHECK(atomic_load(&total_fired) == NOUT, "%d callbacks for %d alarms",
          atomic_load(&total_fired), NOUT);
    for (int i = 0; i < NOUT; i++)
        CHECK(atomic_load(&out_alarms[i].fired) == 1, "alarm %d fired %d times", i,
              atomic_load(&out_alarms[i].fired));
}

static void *periodic_in_uthread(void *arg)
{
    check_periodic((int)(uintptr_t)arg);
    return (void *)1;
}

static void check_alarms(void)
{
    check_phase("alarm rows");
    check_table(alarm_rows);

    check_outside_alarms();

    check_phase("stop half, in a uthread");
    in_uthread(stop_half_in_uthread, NULL);
    check_phase("stop half, from main");
    stop_half(alarms, NALARMS / 4, 1234);

    check_phase("reset_abs, in a uthread");
    in_uthread(reset_all_in_uthread, NULL);
    check_phase("reset_abs, from main");
    reset_all(alarms, NALARMS / 4, 77);

    check_phase("periodic alarm (start from the callback)");
    CHECK(in_uthread(periodic_in_uthread, (void *)0) == (void *)1, "periodic");
    check_phase("periodic alarm (reset_abs from the callback), from main");
    check_periodic(1);

    check_phase("stop from its own callback");
    weft_alarm_init(&selfstop.a, selfstop_cb);
    CHECK_RC(weft_alarm_set_rel(&selfstop.a, MS(1)), 0);
    CHECK_RC(weft_alarm_start(&selfstop.a), 0);
    WAIT_UNTIL(atomic_load(&selfstop.ran), "self-stopping callback finished");
    CHECK(atomic_load(&selfstop.result) == 0, "stop() from its own callback returned true");
    CHECK(selfstop.took < MS(20), "stop() from its own callback took %.1f ms",
          ms_of(selfstop.took));
    CHECK(!weft_alarm_stop(&selfstop.a), "stop after the callback returned true");

    check_phase("alarm chain waking a parked uthread");
    CHECK(in_uthread(chain_main, NULL) == (void *)1, "chain");
    CHECK(atomic_load(&chain_ran) == CHAIN, "chain ran %d", atomic_load(&chain_ran));

    CHECK(atomic_load(&cb_bad_context) == 0,
          "%d callbacks ran outside vcore context (weft_self() != NULL or no vcore id)",
          atomic_load(&cb_bad_context));
}

/* ---- (c) timed waits -------------------------------------------------------------------------- */

static weft_mutex_t tw_mutex = WEFT_MUTEX_INIT;
static weft_mutex_t tw_cmutex = WEFT_MUTEX_INIT;
static weft_cond_t tw_cond = WEFT_COND_INIT;
static int tw_cond_flag;                       /* guarded by tw_cmutex */
static weft_sem_t tw_sem = WEFT_SEM_INIT(0);
static uint32_t tw_word;
static weft_rwlock_t tw_rw = WEFT_RWLOCK_INIT;

struct prim {
    const char *name;
    void (*hold)(void);               /* make it unavailable (holder thread) */
    void (*release)(void);            /* make it available (same holder thread) */
    int (*timed)(uint64_t deadline);  /* acquire with a deadline; on 0 undo it */
};

static void mutex_hold(void) { CHECK_RC(weft_mutex_lock(&tw_mutex), 0); }
static void mutex_release(void) { CHECK_RC(weft_mutex_unlock(&tw_mutex), 0); }
static int mutex_timed(uint64_t dl)
{
    int rc = weft_mutex_timedlock(&tw_mutex, dl);
    if (rc == 0)
        CHECK_RC(weft_mutex_unlock(&tw_mutex), 0);
    return rc;
}

static void cond_hold(void)
{
    CHECK_RC(weft_mutex_lock(&tw_cmutex), 0);
    tw_cond_flag = 0;
    CHECK_RC(weft_mutex_unlock(&tw_cmutex), 0);
}
static void cond_release(void)
{
    CHECK_RC(weft_mutex_lock(&tw_cmutex), 0);
    tw_cond_flag = 1;
    CHECK_RC(weft_cond_broadcast(&tw_cond), 0);
    CHECK_RC(weft_mutex_unlock(&tw_cmutex), 0);
}
static int cond_timed(uint64_t dl)
{
    CHECK_RC(weft_mutex_lock(&tw_cmutex), 0);
    int rc = 0;
    while (!tw_cond_flag && rc == 0)
        rc = weft_cond_timedwait(&tw_cond, &tw_cmutex, dl);
    if (rc == ETIMEDOUT && tw_cond_flag)
        rc = 0;                          /* released at the deadline: fine either way */
    /* The mutex is held again, also after a timeout or EINVAL. */
    CHECK_RC(weft_mutex_trylock(&tw_cmutex), EBUSY);
    CHECK_RC(weft_mutex_unlock(&tw_cmutex), 0);
    return rc;
}

static void sem_hold(void)
{
    while (weft_sem_trywait(&tw_sem) == 0)    /* a unit left by an earlier release */
        ;
}
static void sem_release(void) { CHECK_RC(weft_sem_post(&tw_sem), 0); }
static int sem_timed(uint64_t dl) { return weft_sem_timedwait(&tw_sem, dl); }

static void futex_hold(void) { __atomic_store_n(&tw_word, 0, __ATOMIC_SEQ_CST); }
static void futex_release(void)
{
    __atomic_store_n(&tw_word, 1, __ATOMIC_SEQ_CST);
    weft_futex_wake(&tw_word, 1 << 30);
}
static int futex_timed(uint64_t dl)
{
    for (;;) {
        int rc = weft_futex_wait(&tw_word, 0, dl);
        if (rc == EAGAIN || __atomic_load_n(&tw_word, __ATOMIC_SEQ_CST) != 0)
            return 0;
        if (rc != 0)
            return rc;
    }
}

static void rw_hold_w(void) { CHECK_RC(weft_rwlock_wrlock(&tw_rw), 0); }
static void rw_hold_r(void) { CHECK_RC(weft_rwlock_rdlock(&tw_rw), 0); }
static void rw_release(void) { CHECK_RC(weft_rwlock_unlock(&tw_rw), 0); }
static int rw_timed_r(uint64_t dl)
{
    int rc = weft_rwlock_timedrdlock(&tw_rw, dl);
    if (rc == 0)
        CHECK_RC(weft_rwlock_unlock(&tw_rw), 0);
    return rc;
}
static int rw_timed_w(uint64_t dl)
{
    int rc = weft_rwlock_timedwrlock(&tw_rw, dl);
    if (rc == 0)
        CHECK_RC(weft_rwlock_unlock(&tw_rw), 0);
    return rc;
}

static const struct prim prims[] = {
    { "mutex_timedlock", mutex_hold, mutex_release, mutex_timed },
    { "cond_timedwait", cond_hold, cond_release, cond_timed },
    { "sem_timedwait", sem_hold, sem_release, sem_timed },
    { "futex_wait", futex_hold, futex_release, futex_timed },
    { "rwlock_timedrdlock vs writer", rw_hold_w, rw_release, rw_timed_r },
    { "rwlock_timedwrlock vs reader", rw_hold_r, rw_release, rw_timed_w },
    { "rwlock_timedwrlock vs writer", rw_hold_w, rw_release, rw_timed_w },
};
#define NPRIMS ((int)(sizeof prims / sizeof prims[0]))

/* The holder: takes the primitive, says so, waits to be told (or a delay),
 * releases. Runs as a uthread or a pthread. */
static struct {
    const struct prim *p;
    uint64_t release_after;        /* 0: wait for `go` instead */
    atomic_int held, go;
} holder;

static void *holder_main(void *arg)
{
    (void)arg;
    holder.p->hold();
    uint64_t t0 = weft_now_ns();
    atomic_store(&holder.held, 1);
    if (holder.release_after) {
        while (weft_now_ns() - t0 < holder.release_after)
            weft_sleep_ns(MS(1));
    } else {
        WAIT_UNTIL(atomic_load(&holder.go), "told to release");
    }
    holder.p->release();
    return NULL;
}

struct holder_handle {
    int is_pthread;
    weft_t u;
    pthread_t th;
};

static struct holder_handle start_holder(const struct prim *p, uint64_t release_after,
                                         int as_pthread)
{
    holder.p = p;
    holder.release_after = release_after;
    atomic_store(&holder.held, 0);
    atomic_store(&holder.go, 0);
    struct holder_handle h = { .is_pthread = as_pthread };
    if (as_pthread)
        h.th = start_pthread(holder_main, NULL);
    else
        h.u = spawn(holder_main, NULL);
    WAIT_UNTIL(atomic_load(&holder.held), "holder took the primitive");
    return h;
}

static void finish_holder(struct holder_handle h)
{
    atomic_store(&holder.go, 1);
    if (h.is_pthread)
        join_pthread(h.th);
    else
        join(h.u);
}

/* One waiter's round on every primitive; holder_kind 0 uthread, 1 pthread. */
static void timed_rounds(const char *where, int holder_kind)
{
    for (int i = 0; i < NPRIMS; i++) {
        const struct prim *p = &prims[i];

        /* Times out: not before the deadline, not long after. */
        struct holder_handle h = start_holder(p, 0, holder_kind);
        uint64_t dl = weft_now_ns() + MS(40);
        int rc = p->timed(dl);
        uint64_t now = weft_now_ns();
        CHECK(rc == ETIMEDOUT, "%s (%s): returned %d (%s), expected ETIMEDOUT", p->name, where,
              rc, check_errname(rc));
        CHECK(now >= dl, "%s (%s): timed out %llu ns before the deadline", p->name, where,
              (unsigned long long)(dl - now));
        CHECK(now - dl < LATE_TOL_NS, "%s (%s): timed out %.1f ms after the deadline", p->name,
              where, ms_of(now - dl));

        /* Past deadline: at once. Top-bit deadline: EINVAL. */
        uint64_t t0 = weft_now_ns();
        CHECK_RC(p->timed(1), ETIMEDOUT);
        CHECK_RC(p->timed(weft_now_ns() - 1), ETIMEDOUT);
        CHECK(weft_now_ns() - t0 < LATE_TOL_NS, "%s (%s): a past deadline waited %.1f ms",
              p->name, where, ms_of(weft_now_ns() - t0));
        CHECK_RC(p->timed(BAD_DEADLINE), EINVAL);
        finish_holder(h);

        /* Released in time: succeeds before the deadline. */
        h = start_holder(p, MS(20), holder_kind);
        dl = weft_now_ns() + SCALE(MS(3000), MS(20000));
        rc = p->timed(dl);
        now = weft_now_ns();
        CHECK(rc == 0, "%s (%s): released after 20 ms, returned %d (%s)", p->name, where, rc,
              check_errname(rc));
        CHECK(now < dl, "%s (%s): succeeded only after the deadline", p->name, where);
        finish_holder(h);
    }
}

static void *timed_rounds_uthread(void *arg)
{
    timed_rounds("uthread waiter", (int)(uintptr_t)arg);
    return (void *)1;
}

/* Units are never lost when posts race with expiring timed waiters. */
#define NSEMW SCALE(200, 60)
static weft_sem_t race_sem = WEFT_SEM_INIT(0);
static atomic_int race_ok, race_timeout;

static void *race_waiter(void *arg)
{
    uint64_t dl = (uint64_t)(uintptr_t)arg;
    int rc = weft_sem_timedwait(&race_sem, dl);
    uint64_t now = weft_now_ns();
    if (rc == 0) {
        atomic_fetch_add(&race_ok, 1);
    } else {
        CHECK(rc == ETIMEDOUT, "sem_timedwait returned %d (%s)", rc, check_errname(rc));
        CHECK(now >= dl, "timed out %llu ns early", (unsigned long long)(dl - now));
        CHECK(now - dl < LATE_TOL_NS, "timed out %.1f ms late", ms_of(now - dl));
        atomic_fetch_add(&race_timeout, 1);
    }
    return NULL;
}

static void *sem_race(void *arg)
{
    (void)arg;
    uint32_t seed = 31337;
    weft_t t[NSEMW];
    uint64_t base = weft_now_ns() + MS(20);
    for (int i = 0; i < NSEMW; i++)
        t[i] = spawn(race_waiter, (void *)(uintptr_t)(base + check_rand(&seed) % MS(60)));
    int posts = NSEMW / 2;
    for (int i = 0; i < posts; i++) {
        weft_sleep_ns(check_rand(&seed) % 300000);
        CHECK_RC(weft_sem_post(&race_sem), 0);
    }
    for (int i = 0; i < NSEMW; i++)
        join(t[i]);
    int left = weft_sem_value(&race_sem);
    CHECK(atomic_load(&race_ok) + atomic_load(&race_timeout) == NSEMW, "waiters %d + %d != %d",
          atomic_load(&race_ok), atomic_load(&race_timeout), NSEMW);
    CHECK(atomic_load(&race_ok) + left == posts,
          "%d successful waits + %d units left != %d posts: a unit was lost or made up",
          atomic_load(&race_ok), left, posts);
    return NULL;
}

static void check_timed_waits(void)
{
    check_phase("timed waits: uthread waiter, uthread holder");
    CHECK(in_uthread(timed_rounds_uthread, (void *)0) == (void *)1, "rounds");
    check_phase("timed waits: uthread waiter, pthread holder");
    CHECK(in_uthread(timed_rounds_uthread, (void *)1) == (void *)1, "rounds");
    check_phase("timed waits: main waiter, uthread holder");
    timed_rounds("main waiter", 0);
    check_phase("sem units vs expiring timed waiters");
    in_uthread(sem_race, NULL);
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("init");
    CHECK_RC(weft_init(NULL), 0);
    check_sleepers();
    check_alarms();
    check_timed_waits();
    fprintf(stderr, "timer: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
