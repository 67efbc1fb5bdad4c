/*
 * prio — the priority scheduler (WEFT_SCHED=prio, here weft_config.sched).
 *
 * Proves, each phase on a fresh runtime (the test's vcore count: 1, or all):
 *  - order: 200 uthreads at random levels, queued behind a more urgent
 *    coordinator on one vcore, run most urgent first and, within a level,
 *    in spawn order; yields go round robin within a level; a uthread that
 *    wakes two more urgent ones runs again only after both;
 *  - steal (several vcores): work queued on a vcore kept busy is taken by
 *    the others, each of which runs it most urgent first (a thief never
 *    takes a level while a more urgent one is queued where it looks);
 *  - setprio on queued uthreads (from a uthread, and from main, a kernel
 *    thread) moves them; a uthread lowering itself below a queued one, or
 *    raising a queued one above itself, gives way before weft_setprio
 *    returns; on a uthread running elsewhere it holds when that one yields;
 *    on a parked one, when it is woken; weft_getprio reads the base value;
 *  - preempt: with a 20 ms period, a waking urgent uthread (woken by main,
 *    and, with several vcores, by a uthread on another vcore) preempts a
 *    less urgent one spinning on its vcore within a period; with no period
 *    it runs at the spinner's next yield and not before;
 *  - aging: with WEFT_PRIO_AGING_MS=20, a least urgent uthread runs while a
 *    more urgent one keeps yielding for 300 ms; without, only after;
 *  - bad input: levels out of range are EINVAL and change nothing.
 */
#include "check.h"

#define NORDER 200
#define PERIOD_US 20000u

static int want_vcores(void)
{
    const char *e = getenv("WEFT_VCORES");
    return e && *e ? atoi(e) : 0;
}

static void start(unsigned preempt_us)
{
    struct weft_config c = { .vcores = want_vcores(), .preempt_us = preempt_us, .sched = "prio" };
    CHECK_RC(weft_set_preempt_period(preempt_us), 0); /* 0 in the config keeps the last one */
    CHECK_RC(weft_init(&c), 0);
    CHECK(weft_preempt_period() == preempt_us, "period %u", weft_preempt_period());
}

/* spawn_p() spawns fn(arg) at prio, with flags (WEFT_PINNED: on vcore v). */
static weft_t spawn_p(void *(*fn)(void *), void *arg, int prio, unsigned flags, int v)
{
    weft_attr_t a = { .prio = prio, .flags = flags, .vcore = v };
    weft_t t = NULL;
    CHECK_RC(weft_spawn(&t, &a, fn, arg), 0);
    return t;
}

/* The record of what ran, in order. */
#define LOGN 4096
static _Atomic int nlog;
static int logv[LOGN];

static void note(int v)
{
    int i = atomic_fetch_add(&nlog, 1);
    CHECK(i < LOGN, "log full");
    logv[i] = v;
}

static void log_reset(void)
{
    atomic_store(&nlog, 0);
}

/* ---- order ------------------------------------------------------------------------- */

static int order_level[NORDER];

static void *order_child(void *arg)
{
    note((int)(intptr_t)arg);
    return NULL;
}

static void *rr_child(void *arg)
{
    for (int i = 0; i < 3; i++) {
        note((int)(intptr_t)arg);
        weft_yield();
    }
    return NULL;
}

static weft_t hp, mp;

static void *parks_then_notes(void *arg)
{
    CHECK_RC(weft_park(), 0);
    note((int)(intptr_t)arg);
    return NULL;
}

static void *waker_low(void *arg)
{
    (void)arg;
    CHECK_RC(weft_unpark(hp), 0);
    CHECK_RC(weft_unpark(mp), 0);
    note(100);
    weft_yield();
    note(101);
    return NULL;
}

static void *order_coord(void *arg)
{
    int v = (int)(intptr_t)arg;
    uint32_t seed = 12345;
    static weft_t t[NORDER];

    check_phase("order: levels");
    log_reset();
    for (int i = 0; i < NORDER; i++) {
        order_level[i] = (int)(check_rand(&seed) % 64) - 32;
        t[i] = spawn_p(order_child, (void *)(intptr_t)i, order_level[i], WEFT_PINNED, v);
    }
    for (int i = 0; i < NORDER; i++)
        join(t[i]);
    CHECK(atomic_load(&nlog) == NORDER, "%d ran", atomic_load(&nlog));
    for (int k = 1; k < NORDER; k++) {
        int a = logv[k - 1], b = logv[k];
        CHECK(order_level[a] > order_level[b] || (order_level[a] == order_level[b] && a < b),
              "run %d: uthread %d (prio %d) after %d (prio %d)", k, b, order_level[b], a,
              order_level[a]);
    }

    check_phase("order: round robin within a level");
    log_reset();
    weft_t y[3], z;
    for (int i = 0; i < 3; i++)
        y[i] = spawn_p(rr_child, (void *)(intptr_t)i, 0, WEFT_PINNED, v);
    z = spawn_p(order_child, (void *)(intptr_t)9, 5, WEFT_PINNED, v);
    for (int i = 0; i < 3; i++)
        join(y[i]);
    join(z);
    static const int want_rr[] = { 9, 0, 1, 2, 0, 1, 2, 0, 1, 2 };
    CHECK(atomic_load(&nlog) == 10, "%d notes", atomic_load(&nlog));
    for (int k = 0; k < 10; k++)
        CHECK(logv[k] == want_rr[k], "note %d is %d, want %d", k, logv[k], want_rr[k]);

    check_phase("order: a waker runs after the more urgent ones it woke");
    log_reset();
    hp = spawn_p(parks_then_notes, (void *)(intptr_t)20, 20, WEFT_PINNED, v);
    mp = spawn_p(parks_then_notes, (void *)(intptr_t)5, 5, WEFT_PINNED, v);
    weft_sleep_ns(MS(2)); /* both run and park */
    weft_t w = spawn_p(waker_low, NULL, -10, WEFT_PINNED, v);
    join(w);
    join(hp);
    join(mp);
    static const int want_w[] = { 100, 20, 5, 101 };
    CHECK(atomic_load(&nlog) == 4, "%d notes", atomic_load(&nlog));
    for (int k = 0; k < 4; k++)
        CHECK(logv[k] == want_w[k], "note %d is %d, want %d", k, logv[k], want_w[k]);
    return NULL;
}

static void phase_order(void)
{
    start(0);
    int v = weft_num_vcores() - 1;
    join(spawn_p(order_coord, (void *)(intptr_t)v, WEFT_PRIO_MAX, WEFT_PINNED, v));
    weft_shutdown();
}

/* ---- steal ------------------------------------------------------------------------- */

#define NSTEAL SCALE(120, 60)
static struct { int level, vcore; } stolen[NSTEAL + 1];
static _Atomic int nstolen;

static void *steal_child(void *arg)
{
    int i = atomic_fetch_add(&nstolen, 1);
    stolen[i].level = (int)(intptr_t)arg;
    stolen[i].vcore = weft_vcore_id();
    spin_work(2000);
    return NULL;
}

static _Atomic int nblocking, spawned;

/* keeps another vcore busy while the coordinator queues the children, so
 * that thieves find them all queued */
static void *blocker(void *arg)
{
    (void)arg;
    atomic_fetch_add(&nblocking, 1);
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    while (!atomic_load(&spawned) && weft_now_ns() < end)
        spin_work(100);
    return NULL;
}

static void *steal_coord(void *arg)
{
    int nv = (int)(intptr_t)arg;
    static weft_t t[NSTEAL + 1];
    weft_t b[64];
    uint32_t seed = 777;
    atomic_store(&nblocking, 0);
    atomic_store(&spawned, 0);
    for (int v = 1; v < nv; v++)
        b[v] = spawn_p(blocker, NULL, 0, WEFT_PINNED, v);
    WAIT_UNTIL(atomic_load(&nblocking) == nv - 1, "blockers");
    /* The first spawn takes this vcore's next slot, which thieves cannot
     * take until they poke it loose: the least urgent one. */
    t[0] = spawn_p(steal_child, (void *)(intptr_t)WEFT_PRIO_MIN, WEFT_PRIO_MIN, 0, 0);
    for (int i = 1; i <= NSTEAL; i++) {
        int p = (int)(check_rand(&seed) % 60) - 29;
        t[i] = spawn_p(steal_child, (void *)(intptr_t)p, p, 0, 0);
    }
    atomic_store(&spawned, 1);
    /* Keep this vcore busy (no yield, no period): only thieves run them. */
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    while (atomic_load(&nstolen) < NSTEAL + 1 && weft_now_ns() < end)
        spin_work(100);
    CHECK(atomic_load(&nstolen) == NSTEAL + 1, "only %d of %d ran", atomic_load(&nstolen),
          NSTEAL + 1);
    for (int i = 0; i <= NSTEAL; i++)
        join(t[i]);
    for (int v = 1; v < nv; v++)
        join(b[v]);
    return NULL;
}

static void phase_steal(void)
{
    start(0);
    int nv = weft_num_vcores();
    if (nv < 2) {
        weft_shutdown();
        return;
    }
    check_phase("steal");
    atomic_store(&nstolen, 0);
    join(spawn_p(steal_coord, (void *)(intptr_t)nv, WEFT_PRIO_MAX, WEFT_PINNED, 0));
    int last[64];
    for (int v = 0; v < 64; v++)
        last[v] = WEFT_PRIO_MAX + 1;
    for (int i = 0; i < NSTEAL + 1; i++) {
        int v = stolen[i].vcore, l = stolen[i].level;
        CHECK(v > 0 && v < nv, "a child ran on vcore %d (vcore 0 was busy)", v);
        CHECK(l <= last[v], "vcore %d ran prio %d after prio %d", v, l, last[v]);
        last[v] = l;
    }
    weft_shutdown();
}

/* ---- setprio ----------------------------------------------------------------------- */

static _Atomic int flag1, flag2, ran_x;

static void *spin_until_flag2(void *arg)
{
    (void)arg;
    atomic_store(&flag1, 1);
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    while (!atomic_load(&flag2) && weft_now_ns() < end)
        spin_work(100);
    CHECK(atomic_load(&flag2), "main never set the flag");
    return NULL;
}

static void *sets_ran_x(void *arg)
{
    (void)arg;
    atomic_store(&ran_x, 1);
    return NULL;
}

static void check_cba(const char *what)
{
    CHECK(atomic_load(&nlog) == 3, "%s: %d notes", what, atomic_load(&nlog));
    CHECK(logv[0] == 'C' && logv[1] == 'B' && logv[2] == 'A', "%s: order %c%c%c, want CBA", what,
          logv[0], logv[1], logv[2]);
}

static weft_t qa, qb, qc;

static void *setprio_coord(void *arg)
{
    int v = (int)(intptr_t)arg;

    check_phase("setprio: queued, by a uthread");
    log_reset();
    qa = spawn_p(order_child, (void *)(intptr_t)'A', 0, WEFT_PINNED, v);
    qb = spawn_p(order_child, (void *)(intptr_t)'B', 0, WEFT_PINNED, v);
    qc = spawn_p(order_child, (void *)(intptr_t)'C', 0, WEFT_PINNED, v);
    CHECK_RC(weft_setprio(qc, 10), 0);
    CHECK_RC(weft_setprio(qa, -5), 0);
    CHECK(weft_getprio(qc) == 10 && weft_getprio(qa) == -5 && weft_getprio(qb) == 0, "getprio");
    CHECK(atomic_load(&nlog) == 0, "ran before the coordinator blocked");
    join(qa);
    join(qb);
    join(qc);
    check_cba("by a uthread");

    check_phase("setprio: a running uthread lowers itself below a queued one");
    atomic_store(&ran_x, 0);
    weft_t x = spawn_p(sets_ran_x, NULL, 5, WEFT_PINNED, v);
    CHECK(!atomic_load(&ran_x), "x ran too early");
    CHECK_RC(weft_setprio(weft_self(), 0), 0);
    CHECK(atomic_load(&ran_x), "x (prio 5) had not run when its spawner went to prio 0");
    join(x);

    check_phase("setprio: a running uthread raises a queued one above itself");
    atomic_store(&ran_x, 0);
    x = spawn_p(sets_ran_x, NULL, -3, WEFT_PINNED, v);
    CHECK(!atomic_load(&ran_x), "x ran too early");
    CHECK_RC(weft_setprio(x, 3), 0);
    CHECK(atomic_load(&ran_x), "x (raised to 3) had not run when setprio returned to prio 0");
    join(x);

    check_phase("setprio: a parked uthread, then woken");
    log_reset();
    weft_t p = spawn_p(parks_then_notes, (void *)(intptr_t)'P', 0, WEFT_PINNED, v);
    CHECK_RC(weft_setprio(weft_self(), WEFT_PRIO_MAX), 0);
    weft_sleep_ns(MS(2)); /* p parks */
    weft_t w1 = spawn_p(order_child, (void *)(intptr_t)'1', 10, WEFT_PINNED, v);
    weft_t w2 = spawn_p(order_child, (void *)(intptr_t)'2', 10, WEFT_PINNED, v);
    CHECK_RC(weft_setprio(p, 20), 0);
    CHECK_RC(weft_unpark(p), 0);
    join(w1);
    join(w2);
    join(p);
    CHECK(atomic_load(&nlog) == 3 && logv[0] == 'P' && logv[1] == '1' && logv[2] == '2',
          "order %c%c%c, want P12", logv[0], logv[1], logv[2]);
    return NULL;
}

/* queued uthreads re-prioritised by main, a kernel thread, while the
 * coordinator keeps their vcore busy */
static void *setprio_outside_coord(void *arg)
{
    int v = (int)(intptr_t)arg;
    log_reset();
    qa = spawn_p(order_child, (void *)(intptr_t)'A', 0, WEFT_PINNED, v);
    qb = spawn_p(order_child, (void *)(intptr_t)'B', 0, WEFT_PINNED, v);
    qc = spawn_p(order_child, (void *)(intptr_t)'C', 0, WEFT_PINNED, v);
    spin_until_flag2(NULL);
    join(qa);
    join(qb);
    join(qc);
    check_cba("by main");
    return NULL;
}

static void *r_yields_after_flag(void *arg)
{
    (void)arg;
    spin_until_flag2(NULL);
    weft_yield();
    note('R');
    return NULL;
}

static void phase_setprio(void)
{
    start(0);
    int v = weft_num_vcores() - 1;
    join(spawn_p(setprio_coord, (void *)(intptr_t)v, WEFT_PRIO_MAX, WEFT_PINNED, v));

    check_phase("setprio: queued, by main");
    atomic_store(&flag1, 0);
    atomic_store(&flag2, 0);
    weft_t c = spawn_p(setprio_outside_coord, (void *)(intptr_t)v, WEFT_PRIO_MAX, WEFT_PINNED, v);
    WAIT_UNTIL(atomic_load(&flag1), "coordinator spinning");
    CHECK_RC(weft_setprio(qc, 10), 0);
    CHECK_RC(weft_setprio(qa, -5), 0);
    atomic_store(&flag2, 1);
    join(c);

    check_phase("setprio: a uthread running elsewhere, effective at its yield");
    log_reset();
    atomic_store(&flag1, 0);
    atomic_store(&flag2, 0);
    weft_t r = spawn_p(r_yields_after_flag, NULL, 10, WEFT_PINNED, v);
    WAIT_UNTIL(atomic_load(&flag1), "r spinning");
    weft_t q = spawn_p(order_child, (void *)(intptr_t)'Q', 0, WEFT_PINNED, v);
    CHECK_RC(weft_setprio(r, -7), 0);
    CHECK(weft_getprio(r) == -7, "getprio %d", weft_getprio(r));
    atomic_store(&flag2, 1);
    join(r);
    join(q);
    CHECK(atomic_load(&nlog) == 2 && logv[0] == 'Q' && logv[1] == 'R',
          "order %c%c, want QR (r lowered to -7 yields to q at 0)", logv[0], logv[1]);
    weft_shutdown();
}

/* ---- preemption ------------------------------------------------------------------- */

static _Atomic int h_ran, l_spinning;
static _Atomic uint64_t h_at;
static weft_t ph;

static void *urgent(void *arg)
{
    (void)arg;
    CHECK_RC(weft_park(), 0);
    atomic_store(&h_at, weft_now_ns());
    atomic_store(&h_ran, 1);
    return NULL;
}

/* less urgent, spins; with period 0 it yields after a while and checks
 * that the urgent one ran only then */
static void *spinner(void *arg)
{
    bool cooperative = arg != NULL;
    atomic_store(&l_spinning, 1);
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    if (cooperative) {
        /* main has woken it: spin 30 ms more without a yield */
        while (!atomic_load(&flag2) && weft_now_ns() < end)
            spin_work(100);
        uint64_t stop = weft_now_ns() + MS(30);
        while (weft_now_ns() < stop)
            spin_work(100);
        CHECK(!atomic_load(&h_ran), "the urgent uthread ran with no preemption period");
        weft_yield();
        CHECK(atomic_load(&h_ran), "the urgent uthread did not run at the yield");
        return NULL;
    }
    while (!atomic_load(&h_ran) && weft_now_ns() < end)
        spin_work(100);
    return NULL;
}

static void *remote_waker(void *arg)
{
    (void)arg;
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_unpark(ph), 0);
    return (void *)(uintptr_t)t0;
}

static void preempt_round(int v, int waker_vcore)
{
    atomic_store(&h_ran, 0);
    atomic_store(&l_spinning, 0);
    ph = spawn_p(urgent, NULL, 20, WEFT_PINNED, v);
    weft_sleep_ns(MS(1)); /* it parks */
    weft_t l = spawn_p(spinner, NULL, -10, WEFT_PINNED, v);
    WAIT_UNTIL(atomic_load(&l_spinning), "spinner");
    uint64_t t0;
    if (waker_vcore < 0) {
        t0 = weft_now_ns();
        CHECK_RC(weft_unpark(ph), 0);
    } else {
        t0 = (uint64_t)(uintptr_t)join(spawn_p(remote_waker, NULL, 0, WEFT_PINNED, waker_vcore));
    }
    join(l);
    join(ph);
    uint64_t lat = atomic_load(&h_at) - t0;
    CHECK(lat < (uint64_t)PERIOD_US * 1000u * SCALE(1, 5),
          "woken by %s, the urgent uthread ran %.3f ms later (period %u us)",
          waker_vcore < 0 ? "main" : "a uthread", lat / 1e6, PERIOD_US);
}

static void phase_preempt(void)
{
    start(PERIOD_US);
    int nv = weft_num_vcores(), v = nv - 1;
    check_phase("preempt: woken by main");
    for (int i = 0; i < 3; i++)
        preempt_round(v, -1);
    if (nv > 1) {
        check_phase("preempt: woken by a uthread on another vcore");
        for (int i = 0; i < 3; i++)
            preempt_round(v, 0);
    }
    weft_shutdown();

    check_phase("preempt: no period, the next scheduling point");
    start(0);
    atomic_store(&h_ran, 0);
    atomic_store(&flag2, 0);
    atomic_store(&l_spinning, 0);
    ph = spawn_p(urgent, NULL, 20, WEFT_PINNED, v);
    weft_sleep_ns(MS(1));
    weft_t l = spawn_p(spinner, (void *)1, -10, WEFT_PINNED, v);
    WAIT_UNTIL(atomic_load(&l_spinning), "spinner");
    CHECK_RC(weft_unpark(ph), 0);
    atomic_store(&flag2, 1);
    join(l);
    join(ph);
    weft_shutdown();
}

/* ---- aging ------------------------------------------------------------------------- */

static _Atomic uint64_t lo_at, hi_end;

static void *hi_yielder(void *arg)
{
    (void)arg;
    uint64_t end = weft_now_ns() + MS(300);
    while (weft_now_ns() < end) {
        spin_work(1000);
        weft_yield();
    }
    atomic_store(&hi_end, weft_now_ns());
    return NULL;
}

static void *lo_notes(void *arg)
{
    (void)arg;
    atomic_store(&lo_at, weft_now_ns());
    return NULL;
}

static void *aging_coord(void *arg)
{
    int v = (int)(intptr_t)arg;
    weft_t lo = spawn_p(lo_notes, NULL, WEFT_PRIO_MIN, WEFT_PINNED, v);
    weft_t hi = spawn_p(hi_yielder, NULL, 10, WEFT_PINNED, v);
    join(hi);
    join(lo);
    return NULL;
}

static void aging_round(bool aging)
{
    if (aging)
        setenv("WEFT_PRIO_AGING_MS", "20", 1);
    else
        unsetenv("WEFT_PRIO_AGING_MS");
    start(0);
    int v = weft_num_vcores() - 1;
    atomic_store(&lo_at, 0);
    join(spawn_p(aging_coord, (void *)(intptr_t)v, WEFT_PRIO_MAX, WEFT_PINNED, v));
    if (aging)
        CHECK(atomic_load(&lo_at) < atomic_load(&hi_end),
              "aging on: the least urgent uthread ran only after the busy one finished");
    else
        CHECK(atomic_load(&lo_at) >= atomic_load(&hi_end),
              "aging off: the least urgent uthread ran %.1f ms before the busy one finished",
              (atomic_load(&hi_end) - atomic_load(&lo_at)) / 1e6);
    weft_shutdown();
    unsetenv("WEFT_PRIO_AGING_MS");
}

/* ---- bad input --------------------------------------------------------------------- */

static void *parks(void *arg)
{
    (void)arg;
    weft_park();
    return NULL;
}

static void phase_bad_input(void)
{
    check_phase("bad input");
    start(0);
    weft_t t = spawn_p(parks, NULL, 7, 0, 0);
    CHECK_RC(weft_setprio(NULL, 0), EINVAL);
    CHECK_RC(weft_setprio(t, WEFT_PRIO_MAX + 1), EINVAL);
    CHECK_RC(weft_setprio(t, WEFT_PRIO_MIN - 1), EINVAL);
    CHECK_RC(weft_setprio(t, 1 << 30), EINVAL);
    CHECK(weft_getprio(t) == 7, "getprio %d after refused changes", weft_getprio(t));
    CHECK(weft_getprio(NULL) == 0, "getprio(NULL)");
    weft_attr_t a = { .prio = WEFT_PRIO_MAX + 1 };
    weft_t u = NULL;
    CHECK_RC(weft_spawn(&u, &a, parks, NULL), EINVAL);
    a.prio = WEFT_PRIO_MIN - 1;
    CHECK_RC(weft_spawn(&u, &a, parks, NULL), EINVAL);
    CHECK(u == NULL, "a refused spawn wrote a handle");
    CHECK_RC(weft_setprio(t, WEFT_PRIO_MIN), 0);
    CHECK(weft_getprio(t) == WEFT_PRIO_MIN, "getprio");
    CHECK_RC(weft_unpark(t), 0);
    join(t);
    weft_vcore_preempt(-1); /* nothing to do, nothing to break */
    weft_vcore_preempt(1 << 20);
    weft_shutdown();
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    phase_bad_input();
    phase_order();
    phase_steal();
    phase_setprio();
    phase_preempt();
    check_phase("aging");
    aging_round(true);
    aging_round(false);
    printf("prio: ok (%s vcores)\n", getenv("WEFT_VCORES") ? getenv("WEFT_VCORES") : "all");
    return 0;
}
