/*
 * steal — idle vcores take work from busy ones; pinned threads stay put.
 *
 * Proves: 2000 CPU-busy uthreads spawned by one uthread (so they all start
 * queued on its vcore) get executed by more than one vcore when there are
 * several, including vcores other than the spawner's (work stealing moved
 * them), and all on vcore 0 when there is one;
 * weft_vcore_id() is always in range inside a uthread. Then uthreads pinned
 * to each vcore yield, sleep and block on a mutex among another round of busy
 * threads and are never seen running on any other vcore. And 3000 children
 * of one uthread (more than a ring holds) all run while it computes without
 * yielding, on the other vcores; and a uthread woken by one that then
 * computes without yielding, while every other vcore is parked, runs on
 * another vcore within 2 s (the watcher pokes it loose in about 10 ms;
 * before, it waited as long as the waker computed).
 */
#include "check.h"

#define NBUSY SCALE(2000, 600)
#define MAXV 256

static atomic_long runs_on[MAXV];     /* executions observed per vcore */
static atomic_int out_of_range;

static void note_vcore(void)
{
    int v = weft_vcore_id();
    if (v < 0 || v >= weft_num_vcores() || v >= MAXV)
        atomic_fetch_add(&out_of_range, 1);
    else
        atomic_fetch_add(&runs_on[v], 1);
}

static atomic_int gate;               /* opened once every busy thread exists */
static atomic_int spawner_vcore = -1;

static void *busy(void *arg)
{
    uint64_t acc = (uintptr_t)arg;
    /* Wait for the gate, so the spawner's vcore has a full queue to be
     * stolen from even when spawning is slower than running (sanitizers). */
    while (!atomic_load(&gate))
        weft_yield();
    for (int i = 0; i < 4; i++) {
        note_vcore();
        acc += spin_work(SCALE(20000, 4000));
        weft_yield();
    }
    note_vcore();
    return (void *)(uintptr_t)(acc != 0);
}

/* Spawns the busy threads without switching, so they all start queued on
 * its own vcore: any of them seen on another vcore was stolen. */
static void *spawner(void *arg)
{
    (void)arg;
    static weft_t t[NBUSY];
    atomic_store(&gate, 0);
    atomic_store(&spawner_vcore, weft_vcore_id());
    for (uintptr_t i = 0; i < NBUSY; i++)
        t[i] = spawn(busy, (void *)(i + 1));
    CHECK(weft_vcore_id() == atomic_load(&spawner_vcore), "the spawner moved while spawning");
    atomic_store(&gate, 1);
    for (int i = 0; i < NBUSY; i++)
        CHECK(join(t[i]) == (void *)1, "busy thread %d result", i);
    return NULL;
}

/* ---- pinned threads ----------------------------------------------------------- */

static weft_mutex_t pin_mu = WEFT_MUTEX_INIT;
static long pin_counter;
static atomic_int pin_violations;
static atomic_int pin_first_bad = -1;

static void pinned_check(int want)
{
    int v = weft_vcore_id();
    if (v != want) {
        atomic_fetch_add(&pin_violations, 1);
        int expected = -1;
        atomic_compare_exchange_strong(&pin_first_bad, &expected, v * 1000 + want);
    }
}

static void *pinned(void *arg)
{
    int want = (int)(uintptr_t)arg;
    for (int i = 0; i < 30; i++) {
        pinned_check(want);
        weft_yield();
        pinned_check(want);
        if (i % 5 == 0)
            weft_sleep_ns(50000);
        pinned_check(want);
        weft_mutex_lock(&pin_mu);
        pinned_check(want);
        pin_counter++;
        weft_yield();
        weft_mutex_unlock(&pin_mu);
        pinned_check(want);
        spin_work(SCALE(5000, 1000));
    }
    return NULL;
}

/* Checks where the last round of busy threads ran, then clears the counts.
 * At one vcore, "all on vcore 0" follows from out_of_range == 0. */
static void check_spread(int nv)
{
    CHECK(atomic_load(&out_of_range) == 0, "weft_vcore_id() out of range %d times",
          atomic_load(&out_of_range));
    int used = 0, home = atomic_load(&spawner_vcore);
    long total = 0, elsewhere = 0;
    fprintf(stderr, "executions per vcore (spawned on %d):", home);
    for (int v = 0; v < nv; v++) {
        long n = atomic_exchange(&runs_on[v], 0);
        fprintf(stderr, " %d:%ld", v, n);
        used += n > 0;
        total += n;
        if (v != home)
            elsewhere += n;
    }
    fputc('\n', stderr);
    CHECK(total == 5L * NBUSY, "executions %ld, expected %ld", total, 5L * NBUSY);
    if (nv > 1) {
        CHECK(elsewhere > 0, "%d vcores but every busy thread ran on the spawner's vcore %d: "
              "nothing was stolen", nv, home);
        CHECK(used >= 2, "%d vcores but only %d executed busy threads", nv, used);
    }
}

/* A spawner that queues more uthreads than its ring holds (the rest wait in
 * ws's spill, which thieves cannot see), then computes without a decision:
 * idle vcores must still get to all of them (they poke the busy vcore, which
 * refills its ring from the spill). Before, they ran the ring's 1024 and
 * parked, and the rest waited for the end of the computation. */
#define NSPILL 3000
#define SPILL_BOUND_NS SCALE(MS(5000), MS(60000))
static atomic_int spill_ran;

static void *spill_child(void *arg)
{
    (void)arg;
    uint64_t end = weft_now_ns() + 20000; /* 20 us of work */
    while (weft_now_ns() < end)
        ;
    atomic_fetch_add(&spill_ran, 1);
    return NULL;
}

static void *spill_spawner(void *arg)
{
    (void)arg;
    for (int i = 0; i < NSPILL; i++)
        spawn_ex(spill_child, NULL, WEFT_DETACHED, 0, "child");
    uint64_t t0 = weft_now_ns();
    while (atomic_load(&spill_ran) < NSPILL) /* computing: no yield (a call: TSan's safe point) */
        CHECK(weft_now_ns() - t0 < SPILL_BOUND_NS,
              "%d of %d children ran while their spawner computed for %.0f ms: the rest wait "
              "where no idle vcore finds them", atomic_load(&spill_ran), NSPILL,
              (double)SPILL_BOUND_NS / 1e6);
    return NULL;
}

/* A uthread woken by one that computes on, every other vcore parked: the
 * woken one waits in the waker's vcore's next slot, which no thief takes;
 * before the watch it waited for as long as the waker computed (with no
 * preemption: for good). The watcher, a parked vcore that looks every
 * 10 ms while others are busy, pokes the waker's vcore, and the woken
 * uthread runs on another vcore. */
#define WATCH_BOUND_NS SCALE(MS(2000), MS(20000))
static weft_t woken;
static atomic_int woken_go, woken_ran, woken_vcore = -1;

static void *woken_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&woken_go))
        weft_park();
    atomic_store(&woken_vcore, weft_vcore_id());
    atomic_store(&woken_ran, 1);
    return NULL;
}

static void *waker_fn(void *arg)
{
    (void)arg;
    weft_sleep_ns(MS(50)); /* every vcore idle: they park */
    /* Compute 5 ms first: a vcore woken for our timer spins, takes its last
     * look and parks again before the wake-up. */
    uint64_t t0 = weft_now_ns();
    while (weft_now_ns() - t0 < MS(5))
        ;
    int me = weft_vcore_id();
    atomic_store(&woken_go, 1);
    CHECK_RC(weft_unpark(woken), 0);
    t0 = weft_now_ns();
    while (!atomic_load(&woken_ran)) /* computing: no yield (a call: TSan's safe point) */
        CHECK(weft_now_ns() - t0 < WATCH_BOUND_NS,
              "a uthread woken by one computing on vcore %d did not run in %.0f ms with "
              "every other vcore idle", me, (double)WATCH_BOUND_NS / 1e6);
    CHECK(atomic_load(&woken_vcore) != me, "the woken uthread ran on the waker's vcore %d", me);
    fprintf(stderr, "steal: woken uthread ran after %.1f ms on vcore %d\n",
            (double)(weft_now_ns() - t0) / 1e6, atomic_load(&woken_vcore));
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_init(NULL), 0);
    int nv = weft_num_vcores();
    CHECK(nv >= 1 && nv <= MAXV, "weft_num_vcores() = %d", nv);

    check_phase("busy threads alone");
    join(spawn(spawner, NULL));
    check_spread(nv);

    /* Pinned threads keep every vcore busy, so stealing is not required
     * here; what is checked is that nobody steals a pinned thread. */
    check_phase("pinned threads among busy ones");
    enum { PER_VCORE = 40 };
    static weft_t pins[MAXV * PER_VCORE];
    int npins = 0;
    for (int v = 0; v < nv; v++)
        for (int k = 0; k < PER_VCORE; k++)
            pins[npins++] = spawn_ex(pinned, (void *)(uintptr_t)v, WEFT_PINNED, v, "pinned");
    join(spawn(spawner, NULL));
    for (int i = 0; i < npins; i++)
        join(pins[i]);
    CHECK(atomic_load(&out_of_range) == 0, "weft_vcore_id() out of range %d times",
          atomic_load(&out_of_range));
    int bad = atomic_load(&pin_first_bad);
    CHECK(atomic_load(&pin_violations) == 0,
          "pinned threads ran off their vcore %d times (first: on %d, pinned to %d)",
          atomic_load(&pin_violations), bad / 1000, bad % 1000);
    CHECK(pin_counter == 30L * npins, "pinned counter %ld", pin_counter);
    if (nv >= 2) {
        check_phase("children queued past the ring, spawner computing");
        join(spawn(spill_spawner, NULL));
        check_phase("a uthread woken by one that computes on, other vcores parked");
        for (int i = 0; i < 3; i++) {
            atomic_store(&woken_go, 0);
            atomic_store(&woken_ran, 0);
            woken = spawn(woken_fn, NULL);
            weft_t w = spawn(waker_fn, NULL);
            join(w);
            join(woken);
        }
    }
    fprintf(stderr, "steal: ok (%d vcores)\n", nv);
    weft_shutdown();
    return 0;
}
