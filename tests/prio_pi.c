/*
 * prio_pi — priority inheritance for weft mutexes under the prio scheduler.
 *
 * The classic inversion, on one vcore (every uthread pinned to the last
 * vcore, so the other vcores change nothing), with no preemption period:
 * L (least urgent) holds m; H (most urgent) blocks on m; M (in between)
 * is CPU-bound and ready. Proves:
 *  - L runs before M once H waits (it runs at H's level: H's wait lent it
 *    its priority), and H takes m before M starts;
 *  - L gives way to H at its unlock (back to its own level, below H);
 *  - weft_getprio(L) reads L's own priority throughout;
 *  - the same with a recursive mutex locked twice (the boost lasts until
 *    the outermost unlock);
 *  - a waiter less urgent than M lends L only its own level: M runs first.
 * And under ws (which has no priorities) the same program runs the
 * inversion as FIFO would: the mutex still works, no boost is visible.
 */
#include "check.h"

enum { EV_L_LOCKED = 1, EV_L_RESUMED, EV_L_UNLOCKED, EV_H_GOT, EV_M_START, EV_W_GOT };

#define LOGN 64
static _Atomic int nlog;
static int logv[LOGN];

static void note(int v)
{
    int i = atomic_fetch_add(&nlog, 1);
    CHECK(i < LOGN, "log full");
    logv[i] = v;
}

static int pos(int ev)
{
    for (int i = 0; i < atomic_load(&nlog); i++)
        if (logv[i] == ev)
            return i;
    return -1;
}

static void dump(const char *what)
{
    fprintf(stderr, "%s:", what);
    for (int i = 0; i < atomic_load(&nlog); i++)
        fprintf(stderr, " %d", logv[i]);
    fprintf(stderr, "\n");
}

static weft_t spawn_p(void *(*fn)(void *), void *arg, int prio, int v)
{
    weft_attr_t a = { .prio = prio, .flags = WEFT_PINNED, .vcore = v };
    weft_t t = NULL;
    CHECK_RC(weft_spawn(&t, &a, fn, arg), 0);
    return t;
}

static weft_mutex_t m;
static int kind;          /* 0 plain, 1 recursive (locked twice) */
static _Atomic int l_prio_seen = 99, go;
static weft_t lt;

static void *low(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&m), 0);
    if (kind == 1)
        CHECK_RC(weft_mutex_lock(&m), 0);
    note(EV_L_LOCKED);
    /* Runnable, holding m, until the coordinator (more urgent) has queued
     * H and M and blocked. */
    while (!atomic_load(&go))
        weft_yield();
    note(EV_L_RESUMED);
    atomic_store(&l_prio_seen, weft_getprio(weft_self()));
    spin_work(SCALE(200000, 20000));
    if (kind == 1) {
        CHECK_RC(weft_mutex_unlock(&m), 0); /* still held: keeps the boost */
        spin_work(1000);
    }
    note(EV_L_UNLOCKED);
    CHECK_RC(weft_mutex_unlock(&m), 0);
    return NULL;
}

static void *high(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&m), 0);
    note(EV_H_GOT);
    CHECK_RC(weft_mutex_unlock(&m), 0);
    return NULL;
}

static void *middle(void *arg)
{
    (void)arg;
    note(EV_M_START);
    spin_work(SCALE(200000, 20000));
    return NULL;
}

/* run_case() runs L, then H (prio h) and M (prio 0) behind it; returns
 * nothing, leaves the log. */
static void run_case(int v, int h, void *(*hfn)(void *))
{
    atomic_store(&nlog, 0);
    atomic_store(&go, 0);
    CHECK_RC(weft_mutex_init(&m, kind == 1 ? WEFT_MUTEX_RECURSIVE : WEFT_MUTEX_PLAIN), 0);
    lt = spawn_p(low, NULL, -20, v);
    /* We are more urgent than L: L runs while we wait for it to lock. */
    WAIT_UNTIL(pos(EV_L_LOCKED) >= 0, "L locked");
    weft_t mt = spawn_p(middle, NULL, 0, v);
    weft_t ht = spawn_p(hfn, NULL, h, v);
    atomic_store(&go, 1);
    join(ht); /* H, then (with m held by L) whoever is most urgent */
    join(mt);
    join(lt);
    CHECK_RC(weft_mutex_destroy(&m), 0);
}

static void *coord(void *arg)
{
    int v = (int)(intptr_t)arg;
    for (kind = 0; kind < 2; kind++) {
        check_phase(kind ? "inversion, recursive mutex" : "inversion, plain mutex");
        run_case(v, 20, high);
        int lr = pos(EV_L_RESUMED), hg = pos(EV_H_GOT), ms = pos(EV_M_START), lu = pos(EV_L_UNLOCKED);
        if (!(lr >= 0 && hg >= 0 && ms >= 0 && lr < ms && hg < ms && lu < hg))
            dump("log");
        CHECK(lr >= 0 && ms >= 0 && lr < ms, "L (boosted) did not run before M");
        CHECK(hg >= 0 && hg < ms, "H got the mutex only after M ran (priority inversion)");
        CHECK(lu < hg && hg == lu + 1, "H did not run right after L's unlock");
        CHECK(atomic_load(&l_prio_seen) == -20, "weft_getprio(L) = %d while boosted",
              atomic_load(&l_prio_seen));
    }
    kind = 0;

    check_phase("a waiter less urgent than M lends nothing useful");
    run_case(v, -5, high);
    CHECK(pos(EV_M_START) < pos(EV_L_RESUMED), "M (0) should run before L boosted only to -5");
    return NULL;
}

/* Under ws: no priorities, nothing inherited; the program still runs. */
static void *ws_coord(void *arg)
{
    int v = (int)(intptr_t)arg;
    kind = 0;
    run_case(v, 20, high);
    CHECK(pos(EV_H_GOT) >= 0 && pos(EV_M_START) >= 0 && pos(EV_L_UNLOCKED) >= 0, "ran");
    return NULL;
}

static int want_vcores(void)
{
    const char *e = getenv("WEFT_VCORES");
    return e && *e ? atoi(e) : 0;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_set_preempt_period(0), 0);
    struct weft_config c = { .vcores = want_vcores(), .sched = "prio" };
    CHECK_RC(weft_init(&c), 0);
    int v = weft_num_vcores() - 1;
    join(spawn_p(coord, (void *)(intptr_t)v, WEFT_PRIO_MAX, v));
    weft_shutdown();

    check_phase("ws");
    c.sched = "ws";
    CHECK_RC(weft_init(&c), 0);
    v = weft_num_vcores() - 1;
    join(spawn_p(ws_coord, (void *)(intptr_t)v, WEFT_PRIO_MAX, v));
    weft_shutdown();
    printf("prio_pi: ok\n");
    return 0;
}
