/*
 * vcores_resize — weft_vcores_request/weft_vcores_release at run time.
 *
 * Proves, under the prio scheduler:
 *  - bad input changes nothing: n < 1, more than the CPUs left, releasing
 *    every vcore (EINVAL); a vcore with a pinned uthread (EBUSY); spawning
 *    pinned or placed on an offline vcore (EINVAL); from vcore context (an
 *    alarm callback: EDEADLK); ws, which cannot resize (ENOTSUP);
 *  - while 64 uthreads lock a shared mutex, yield and sleep, main releases
 *    and requests vcores 40 times: weft_num_vcores() follows, no uthread
 *    is seen on a vcore after its release returned, none is lost (every
 *    increment arrives), and work runs on a vcore brought back;
 *  - a uthread may release the vcore it runs on: it goes on elsewhere.
 * On a machine with one CPU only the error cases run.
 */
#include "check.h"

#define NWORK 64
#define ROUNDS SCALE(400, 100)
#define FLIPS SCALE(40, 10)

static weft_mutex_t mu = WEFT_MUTEX_INIT;
static long counter;
static _Atomic int gen;               /* bumped by main after each resize returned */
static int online_at[2 * FLIPS + 2];  /* weft_num_vcores() from gen g on */
static _Atomic int bad_gen = -1, bad_vcore = -1;
static _Atomic long seen_on[256];

static void *worker(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 7919u + 1;
    for (int r = 0; r < ROUNDS; r++) {
        int g = atomic_load(&gen); /* before the id: a release done by then holds */
        int v = weft_vcore_id();
        if (v < 0 || v >= online_at[g]) {
            atomic_store(&bad_gen, g);
            atomic_store(&bad_vcore, v);
        }
        if (v >= 0 && v < 256)
            atomic_fetch_add(&seen_on[v], 1);
        CHECK_RC(weft_mutex_lock(&mu), 0);
        counter++;
        CHECK_RC(weft_mutex_unlock(&mu), 0);
        switch (check_rand(&seed) % 4) {
        case 0: weft_sleep_ns(50000); break;
        case 1: spin_work(2000); break;
        default: weft_yield();
        }
    }
    return NULL;
}

static _Atomic int alarm_rc = -1;

static void in_alarm(struct weft_alarm *a)
{
    (void)a;
    atomic_store(&alarm_rc, weft_vcores_release(1));
}

static void *parks(void *arg)
{
    (void)arg;
    weft_park();
    return NULL;
}

static _Atomic int releaser_started, holder_started;

/* keeps vcore 0 busy until the releaser runs, so it cannot be stolen there
 * (the releaser is spawned once this runs: an idle vcore 0 could take it) */
static void *hold_vcore0(void *arg)
{
    (void)arg;
    atomic_store(&holder_started, 1);
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    while (!atomic_load(&releaser_started) && weft_now_ns() < end)
        spin_work(100);
    return NULL;
}

static void *releases_own(void *arg)
{
    (void)arg;
    atomic_store(&releaser_started, 1);
    int before = weft_vcore_id();
    CHECK(before == weft_num_vcores() - 1, "placed on vcore %d", before);
    CHECK_RC(weft_vcores_release(1), 0);
    int after = weft_vcore_id();
    CHECK(after >= 0 && after < weft_num_vcores(), "went on on vcore %d of %d", after,
          weft_num_vcores());
    return NULL;
}

static int want_vcores(void)
{
    const char *e = getenv("WEFT_VCORES");
    return e && *e ? atoi(e) : 0;
}

/* A stack-copy uthread running on a vcore being released: it moves, and
 * its run stack with it (before, the vcore went down still holding the run
 * stack, the uthread was forwarded back to it, pinned, and never ran). */
static _Atomic int sc_on = -1, sc_stop, sc_done;

static void *sc_spinner(void *arg)
{
    (void)arg;
    atomic_store(&sc_on, weft_vcore_id());
    while (!atomic_load(&sc_stop))
        (void)weft_now_ns(); /* a call: TSan's only safe point */
    atomic_store(&sc_done, 1);
    return NULL;
}

/* A uthread that blocks with notifications disabled stays on its vcore:
 * that vcore may not be released meanwhile (before, it was, and the sleeper
 * woke into its inbox, never drained). */
static _Atomic int np_on = -1, np_done;

static void *notif_sleeper(void *arg)
{
    (void)arg;
    CHECK_RC(weft_notifs_disable(), 0);
    atomic_store(&np_on, weft_vcore_id());
    CHECK_RC(weft_sleep_ns(MS(50)), 0);
    CHECK(weft_vcore_id() == atomic_load(&np_on), "moved from vcore %d to %d while its "
          "notifications were off", atomic_load(&np_on), weft_vcore_id());
    CHECK_RC(weft_notifs_enable(), 0);
    atomic_store(&np_done, 1);
    return NULL;
}

/* WEFT_ON_VCORE is where a uthread starts unless an idle vcore steals it
 * first (vcore n, just requested, may still be waking): a hog pinned to
 * vcore 0 keeps it busy until the uthread has started, and the start is
 * retried until it lands on vcore n. */
#define PLACE_TRIES 50
static _Atomic int hog_up;
static _Atomic int *hog_until; /* the started uthread's vcore word */

static void *hog0(void *arg)
{
    (void)arg;
    atomic_store(&hog_up, 1);
    uint64_t t0 = weft_now_ns();
    while (atomic_load(hog_until) < 0 && weft_now_ns() - t0 < MS(200))
        ;
    return NULL;
}

/* start_on_top() starts fn on vcore n with flags; false if it started
 * elsewhere (then it runs on: the caller stops it). */
static bool start_on_top(void *(*fn)(void *), unsigned flags, int n, _Atomic int *on,
                         weft_t *t)
{
    atomic_store(on, -1);
    hog_until = on;
    atomic_store(&hog_up, 0);
    weft_t h = spawn_ex(hog0, NULL, WEFT_PINNED, 0, "hog");
    WAIT_UNTIL(atomic_load(&hog_up), "the hog runs on vcore 0");
    weft_attr_t a = { .flags = flags | WEFT_ON_VCORE, .vcore = n };
    CHECK_RC(weft_spawn(t, &a, fn, NULL), 0);
    WAIT_UNTIL(atomic_load(on) >= 0, "the uthread starts");
    join(h);
    return atomic_load(on) == n;
}

static void check_release_under(int n)
{
    check_phase("a release under a stack-copy uthread");
    CHECK_RC(weft_vcores_request(1), 0);
    weft_t t = NULL;
    for (int tries = 0;; tries++) {
        CHECK(tries < PLACE_TRIES, "the spinner never started on vcore %d", n);
        atomic_store(&sc_stop, 0);
        atomic_store(&sc_done, 0);
        if (start_on_top(sc_spinner, WEFT_STACK_COPY, n, &sc_on, &t))
            break;
        atomic_store(&sc_stop, 1);
        join(t);
    }
    CHECK_RC(weft_vcores_release(1), 0);
    atomic_store(&sc_stop, 1);
    WAIT_UNTIL(atomic_load(&sc_done), "the stack-copy uthread runs again after the release");
    join(t);

    check_phase("a release under a sleeper with notifications off");
    CHECK_RC(weft_vcores_request(1), 0);
    for (int tries = 0;; tries++) {
        CHECK(tries < PLACE_TRIES, "the sleeper never started on vcore %d", n);
        atomic_store(&np_done, 0);
        if (start_on_top(notif_sleeper, 0, n, &np_on, &t))
            break;
        join(t);
    }
    CHECK_RC(weft_vcores_release(1), EBUSY);
    join(t);
    CHECK(atomic_load(&np_done), "the sleeper did not finish");
    CHECK_RC(weft_vcores_release(1), 0);
    CHECK(weft_num_vcores() == n, "%d online", weft_num_vcores());
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_vcores_request(1), EAGAIN); /* not running */

    check_phase("ws cannot resize");
    struct weft_config c = { .vcores = want_vcores(), .sched = "ws" };
    CHECK_RC(weft_init(&c), 0);
    CHECK_RC(weft_vcores_request(1), ENOTSUP);
    CHECK_RC(weft_vcores_release(1), ENOTSUP);
    weft_shutdown();

    check_phase("bad input");
    c.sched = "prio";
    CHECK_RC(weft_init(&c), 0);
    int max = weft_max_vcores(), n0 = weft_num_vcores();
    CHECK(n0 >= 1 && n0 <= max, "%d of %d online", n0, max);
    CHECK_RC(weft_vcores_request(0), EINVAL);
    CHECK_RC(weft_vcores_request(-1), EINVAL);
    CHECK_RC(weft_vcores_request(max - n0 + 1), EINVAL);
    CHECK_RC(weft_vcores_release(0), EINVAL);
    CHECK_RC(weft_vcores_release(n0), EINVAL);
    CHECK(weft_num_vcores() == n0, "refused calls changed the count");
    struct weft_alarm al;
    weft_alarm_init(&al, in_alarm);
    CHECK_RC(weft_alarm_set_rel(&al, 1000), 0);
    CHECK_RC(weft_alarm_start(&al), 0);
    WAIT_UNTIL(atomic_load(&alarm_rc) != -1, "the alarm");
    CHECK_RC(atomic_load(&alarm_rc), EDEADLK);
    if (max < 2) {
        printf("vcores_resize: one CPU, nothing to resize\n");
        weft_shutdown();
        return 0;
    }
    if (n0 == max) { /* all online: take one off to have one to bring back */
        CHECK_RC(weft_vcores_release(1), 0);
        CHECK(weft_num_vcores() == max - 1, "release: %d online", weft_num_vcores());
    }
    int n = weft_num_vcores();
    weft_attr_t a = { .flags = WEFT_PINNED, .vcore = n };
    weft_t t = NULL;
    CHECK_RC(weft_spawn(&t, &a, parks, NULL), EINVAL); /* offline */
    a.flags = WEFT_ON_VCORE;
    CHECK_RC(weft_spawn(&t, &a, parks, NULL), EINVAL);
    CHECK_RC(weft_vcores_request(1), 0);
    CHECK(weft_num_vcores() == n + 1, "request: %d online", weft_num_vcores());
    a.flags = WEFT_PINNED;
    CHECK_RC(weft_spawn(&t, &a, parks, NULL), 0);
    CHECK_RC(weft_vcores_release(1), EBUSY); /* it is pinned there */
    CHECK(weft_num_vcores() == n + 1, "a refused release changed the count");
    CHECK_RC(weft_unpark(t), 0);
    join(t);

    check_phase("a uthread releases its own vcore");
    a.flags = WEFT_PINNED;
    a.vcore = 0;
    weft_t h = NULL;
    CHECK_RC(weft_spawn(&h, &a, hold_vcore0, NULL), 0);
    WAIT_UNTIL(atomic_load(&holder_started), "the holder runs on vcore 0");
    a.flags = WEFT_ON_VCORE;
    a.vcore = weft_num_vcores() - 1;
    CHECK_RC(weft_spawn(&t, &a, releases_own, NULL), 0);
    join(t);
    join(h);
    CHECK(weft_num_vcores() == n, "%d online", weft_num_vcores());
    check_release_under(n);

    check_phase("resize under load");
    atomic_store(&gen, 0);
    online_at[0] = weft_num_vcores();
    weft_t w[NWORK];
    for (int i = 0; i < NWORK; i++)
        w[i] = spawn(worker, (void *)(uintptr_t)i);
    int g = 0;
    for (int k = 0; k < FLIPS; k++) {
        /* A request may be used before it returns: the limit goes up first;
         * a release holds once it has returned: the limit goes down then. */
        online_at[g + 1] = n + 1;
        atomic_store(&gen, ++g);
        CHECK_RC(weft_vcores_request(1), 0);
        CHECK(weft_num_vcores() == n + 1, "after request: %d", weft_num_vcores());
        weft_sleep_ns(MS(2));
        CHECK_RC(weft_vcores_release(1), 0);
        CHECK(weft_num_vcores() == n, "after release: %d", weft_num_vcores());
        online_at[g + 1] = n;
        atomic_store(&gen, ++g);
        weft_sleep_ns(MS(1));
    }
    for (int i = 0; i < NWORK; i++)
        join(w[i]);
    CHECK(atomic_load(&bad_gen) < 0, "a uthread ran on vcore %d after the count went to %d",
          atomic_load(&bad_vcore), online_at[atomic_load(&bad_gen) < 0 ? 0 : atomic_load(&bad_gen)]);
    CHECK(counter == (long)NWORK * ROUNDS, "counter %ld, want %ld", counter, (long)NWORK * ROUNDS);
    CHECK(atomic_load(&seen_on[n]) > 0, "nothing ran on vcore %d while it was online", n);
    weft_shutdown();
    printf("vcores_resize: ok (%d of %d vcores, %d flips)\n", n, max, FLIPS);
    return 0;
}
