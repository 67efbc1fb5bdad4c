/*
 * barrier — weft_barrier_t phases.
 *
 * Proves: init with count 0 is EINVAL; over many phases with N uthreads and
 * a pthread, nobody leaves phase k before everyone has arrived at it,
 * exactly one caller per phase gets WEFT_BARRIER_SERIAL and the others 0;
 * a barrier of 1 always returns SERIAL; destroy during a phase is EBUSY and
 * the phase still completes; destroy between phases is 0.
 */
#include "check.h"

#define NU 8                  /* uthreads; + 1 pthread */
#define NPART (NU + 1)
#define PHASES SCALE(300, 60)

static weft_barrier_t bar;
static atomic_int arrived[PHASES];
static atomic_int left[PHASES];
static atomic_int serials[PHASES];

static void *participant(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg + 3;
    for (int k = 0; k < PHASES; k++) {
        if (check_rand(&seed) % 4 == 0)
            weft_yield();
        atomic_fetch_add(&arrived[k], 1);
        int rc = weft_barrier_wait(&bar);
        CHECK(rc == 0 || rc == WEFT_BARRIER_SERIAL, "barrier_wait returned %d", rc);
        /* a fast thread already in phase k+1 must not have completed phase k */
        int n = atomic_load(&arrived[k]);
        CHECK(n == NPART, "left phase %d when only %d of %d had arrived", k, n, NPART);
        if (rc == WEFT_BARRIER_SERIAL)
            atomic_fetch_add(&serials[k], 1);
        atomic_fetch_add(&left[k], 1);
    }
    return NULL;
}

static void check_phases(void)
{
    check_phase("phases");
    CHECK_RC(weft_barrier_init(&bar, NPART), 0);
    weft_t u[NU];
    for (uintptr_t i = 0; i < NU; i++)
        u[i] = spawn(participant, (void *)i);
    pthread_t p = start_pthread(participant, (void *)100);
    for (int i = 0; i < NU; i++)
        join(u[i]);
    join_pthread(p);
    for (int k = 0; k < PHASES; k++) {
        CHECK(atomic_load(&serials[k]) == 1, "phase %d had %d SERIAL returns", k,
              atomic_load(&serials[k]));
        CHECK(atomic_load(&left[k]) == NPART, "phase %d: %d left", k, atomic_load(&left[k]));
    }
    CHECK_RC(weft_barrier_destroy(&bar), 0);
}

static void check_rows(void)
{
    check_phase("init 0 / barrier of one");
    weft_barrier_t b;
    CHECK_RC(weft_barrier_init(&b, 0), EINVAL);
    CHECK_RC(weft_barrier_init(&b, 1), 0);
    for (int i = 0; i < 3; i++)
        CHECK_RC(weft_barrier_wait(&b), WEFT_BARRIER_SERIAL);
    CHECK_RC(weft_barrier_destroy(&b), 0);
}

static weft_barrier_t busy_bar;
static atomic_int busy_about_to_wait;
static atomic_int busy_serials;

static void *busy_waiter(void *arg)
{
    (void)arg;
    atomic_store(&busy_about_to_wait, 1);
    int rc = weft_barrier_wait(&busy_bar);
    if (rc == WEFT_BARRIER_SERIAL)
        atomic_fetch_add(&busy_serials, 1);
    else
        CHECK_RC(rc, 0);
    return NULL;
}

/* Pinned to vcore 0 with the waiter: our sleep lets it run until it blocks. */
static void *destroy_during_phase(void *arg)
{
    (void)arg;
    CHECK_RC(weft_barrier_init(&busy_bar, 2), 0);
    weft_t w = spawn_ex(busy_waiter, NULL, WEFT_PINNED, 0, NULL);
    WAIT_UNTIL(atomic_load(&busy_about_to_wait), "waiter started");
    weft_sleep_ns(MS(20));
    CHECK_RC(weft_barrier_destroy(&busy_bar), EBUSY);
    int rc = weft_barrier_wait(&busy_bar);               /* the phase still completes */
    if (rc == WEFT_BARRIER_SERIAL)
        atomic_fetch_add(&busy_serials, 1);
    else
        CHECK_RC(rc, 0);
    join(w);
    CHECK(atomic_load(&busy_serials) == 1, "%d SERIAL returns", atomic_load(&busy_serials));
    CHECK_RC(weft_barrier_destroy(&busy_bar), 0);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_rows();
    check_phases();
    check_phase("destroy during a phase");
    join(spawn_ex(destroy_during_phase, NULL, WEFT_PINNED, 0, NULL));
    fprintf(stderr, "barrier: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
