/*
 * mutex — weft_mutex_t: mutual exclusion under load and every error row.
 *
 * Proves: 64 uthreads plus 2 pthreads incrementing a plain counter under a
 * mutex (through lock, trylock, timedlock) lose no update and are never two
 * inside at once, for plain and recursive mutexes; the owner relocking a
 * plain mutex gets EDEADLK; a recursive mutex nests and needs as many
 * unlocks; a non-owner (uthread, pthread, main) unlocking gets EPERM, as
 * does unlocking a free mutex; destroy while locked is EBUSY and changes
 * nothing; timedlock returns ETIMEDOUT for a past deadline and for a short
 * future one (never before the deadline) while another holds the mutex,
 * EINVAL for a top-bit deadline; static initialisers work; the timed-wait
 * checks of timed_wait.h; a mutex destroyed and freed by the thread that
 * locks it next is not touched by its unlocker (ASan); a mutex whose
 * sleeper was woken but has not run yet can be taken, and is not
 * destroyable (EBUSY) until that sleeper is done.
 */
#include "check.h"
#include "timed_wait.h"

/* ---- torture ------------------------------------------------------------------- */

#define NUTHREADS 64
#define NPTHREADS 2
#define ITERS SCALE(2000, 300)

static weft_mutex_t tort_mu = WEFT_MUTEX_INIT;
static weft_mutex_t tort_rmu = WEFT_MUTEX_RECURSIVE_INIT;
static long tort_counter;      /* guarded by tort_mu */
static long tort_rcounter;     /* guarded by tort_rmu */
static atomic_int inside;      /* threads inside tort_mu's critical section */
static atomic_int rinside;

static void acquire(weft_mutex_t *m, int how)
{
    int rc;
    switch (how % 4) {
    case 0:
        CHECK_RC(weft_mutex_lock(m), 0);
        break;
    case 1:
        for (unsigned i = 0; (rc = weft_mutex_trylock(m)) == EBUSY; i++)
            check_nap(i % 200);
        CHECK_RC(rc, 0);
        break;
    case 2:
        CHECK_RC(weft_mutex_timedlock(m, weft_now_ns() + WAIT_BOUND_NS), 0);
        break;
    default:
        CHECK_RC(weft_mutex_timedlock(m, WEFT_FOREVER), 0);
        break;
    }
}

static void *torturer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    for (int i = 0; i < ITERS; i++) {
        unsigned r = check_rand(&seed);
        acquire(&tort_mu, (int)(r & 3));
        CHECK(atomic_fetch_add(&inside, 1) == 0, "two threads inside the mutex");
        long v = tort_counter;
        if ((r & 0x30) == 0)
            weft_yield();   /* hold it across a switch now and then */
        tort_counter = v + 1;
        atomic_fetch_sub(&inside, 1);
        CHECK_RC(weft_mutex_unlock(&tort_mu), 0);

        if (i % 4 == 0) {
            acquire(&tort_rmu, (int)(r >> 8));
            acquire(&tort_rmu, (int)(r >> 10));
            CHECK(atomic_fetch_add(&rinside, 1) == 0, "two threads inside the recursive mutex");
            long w = tort_rcounter;
            if ((r & 0x300) == 0)
                weft_yield();
            tort_rcounter = w + 1;
            atomic_fetch_sub(&rinside, 1);
            CHECK_RC(weft_mutex_unlock(&tort_rmu), 0);
            CHECK_RC(weft_mutex_unlock(&tort_rmu), 0);
        }
    }
    return NULL;
}

static void check_torture(void)
{
    check_phase("torture");
    weft_t u[NUTHREADS];
    pthread_t p[NPTHREADS];
    for (uintptr_t i = 0; i < NUTHREADS; i++)
        u[i] = spawn(torturer, (void *)i);
    for (uintptr_t i = 0; i < NPTHREADS; i++)
        p[i] = start_pthread(torturer, (void *)(NUTHREADS + i));
    for (int i = 0; i < NUTHREADS; i++)
        join(u[i]);
    for (int i = 0; i < NPTHREADS; i++)
        join_pthread(p[i]);
    long want = (long)(NUTHREADS + NPTHREADS) * ITERS;
    CHECK(tort_counter == want, "plain counter %ld, expected %ld (lost updates)",
          tort_counter, want);
    long rwant = (long)(NUTHREADS + NPTHREADS) * ((ITERS + 3) / 4);
    CHECK(tort_rcounter == rwant, "recursive counter %ld, expected %ld", tort_rcounter, rwant);
}

/* ---- own-thread semantics (run from main and from a uthread) ------------------- */

static void own_plain(void)
{
    weft_mutex_t m;
    CHECK_RC(weft_mutex_init(&m, WEFT_MUTEX_PLAIN), 0);
    CHECK_RC(weft_mutex_unlock(&m), EPERM);              /* unlock of unlocked */
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_mutex_lock(&m), EDEADLK);
    CHECK_RC(weft_mutex_trylock(&m), EBUSY);                /* as pthread_mutex_trylock, even our own */
    CHECK_RC(weft_mutex_timedlock(&m, WEFT_FOREVER), EDEADLK);
    CHECK_RC(weft_mutex_destroy(&m), EBUSY);
    CHECK_RC(weft_mutex_unlock(&m), 0);                  /* still ours after EBUSY */
    CHECK_RC(weft_mutex_unlock(&m), EPERM);

    CHECK_RC(weft_mutex_timedlock(&m, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_mutex_timedlock(&m, (uint64_t)1 << 63), EINVAL);
    CHECK_RC(weft_mutex_trylock(&m), 0);                 /* EINVAL took nothing */
    CHECK_RC(weft_mutex_unlock(&m), 0);
    CHECK_RC(weft_mutex_timedlock(&m, 1), 0);            /* past deadline, free: try once */
    CHECK_RC(weft_mutex_unlock(&m), 0);
    CHECK_RC(weft_mutex_destroy(&m), 0);

    CHECK_RC(weft_mutex_init(&m, 7), EINVAL);
    CHECK_RC(weft_mutex_init(&m, -1), EINVAL);
}

static void own_recursive(void)
{
    weft_mutex_t m;
    CHECK_RC(weft_mutex_init(&m, WEFT_MUTEX_RECURSIVE), 0);
    CHECK_RC(weft_mutex_unlock(&m), EPERM);
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_mutex_trylock(&m), 0);
    CHECK_RC(weft_mutex_timedlock(&m, 1), 0);
    CHECK_RC(weft_mutex_destroy(&m), EBUSY);
    for (int i = 0; i < 5; i++)
        CHECK_RC(weft_mutex_unlock(&m), 0);
    CHECK_RC(weft_mutex_unlock(&m), EPERM);
    CHECK_RC(weft_mutex_destroy(&m), 0);
}

static weft_mutex_t static_plain = WEFT_MUTEX_INIT;
static weft_mutex_t static_rec = WEFT_MUTEX_RECURSIVE_INIT;

static void own_static(void)
{
    CHECK_RC(weft_mutex_lock(&static_plain), 0);
    CHECK_RC(weft_mutex_lock(&static_plain), EDEADLK);
    CHECK_RC(weft_mutex_unlock(&static_plain), 0);
    CHECK_RC(weft_mutex_lock(&static_rec), 0);
    CHECK_RC(weft_mutex_lock(&static_rec), 0);
    CHECK_RC(weft_mutex_unlock(&static_rec), 0);
    CHECK_RC(weft_mutex_unlock(&static_rec), 0);
    CHECK_RC(weft_mutex_unlock(&static_rec), EPERM);
}

static void *own_all(void *arg)
{
    (void)arg;
    own_plain();
    own_recursive();
    own_static();
    return (void *)1;
}

/* ---- someone else holds it ---------------------------------------------------- */

struct holding {
    weft_mutex_t *m;
    int kind;
    atomic_int held;
    atomic_int release;
};

static void *holder(void *arg)
{
    struct holding *h = arg;
    CHECK_RC(weft_mutex_lock(h->m), 0);
    if (h->kind == WEFT_MUTEX_RECURSIVE)
        CHECK_RC(weft_mutex_lock(h->m), 0);
    atomic_store(&h->held, 1);
    WAIT_UNTIL(atomic_load(&h->release), "tester releases the holder");
    if (h->kind == WEFT_MUTEX_RECURSIVE)
        CHECK_RC(weft_mutex_unlock(h->m), 0);
    CHECK_RC(weft_mutex_unlock(h->m), 0);
    return NULL;
}

/* Checks what a non-owner sees while the holder holds m, then takes m. */
static void against_holder(weft_mutex_t *m, struct holding *h)
{
    WAIT_UNTIL(atomic_load(&h->held), "holder took the mutex");
    CHECK_RC(weft_mutex_trylock(m), EBUSY);
    CHECK_RC(weft_mutex_unlock(m), EPERM);               /* not the owner */
    CHECK_RC(weft_mutex_destroy(m), EBUSY);
    CHECK_RC(weft_mutex_timedlock(m, 1), ETIMEDOUT);     /* past deadline */
    CHECK_RC(weft_mutex_timedlock(m, (uint64_t)-5), EINVAL);
    uint64_t deadline = weft_now_ns() + MS(50);
    CHECK_RC(weft_mutex_timedlock(m, deadline), ETIMEDOUT);
    uint64_t now = weft_now_ns();
    CHECK(now >= deadline, "timedlock returned ETIMEDOUT %llu ns before its deadline",
          (unsigned long long)(deadline - now));
    CHECK_RC(weft_mutex_trylock(m), EBUSY);              /* the timeouts took nothing */
    atomic_store(&h->release, 1);
    CHECK_RC(weft_mutex_lock(m), 0);                     /* blocks until released */
    CHECK_RC(weft_mutex_unlock(m), 0);
}

/* Runs against_holder with the holder as a uthread or a pthread. */
static void *vs_holders(void *arg)
{
    (void)arg;
    for (int kind = 0; kind < 2; kind++) {
        for (int holder_is_pthread = 0; holder_is_pthread < 2; holder_is_pthread++) {
            weft_mutex_t m;
            CHECK_RC(weft_mutex_init(&m, kind), 0);
            struct holding h = { .m = &m, .kind = kind };
            pthread_t p;
            weft_t u = NULL;
            if (holder_is_pthread)
                p = start_pthread(holder, &h);
            else
                u = spawn(holder, &h);
            against_holder(&m, &h);
            if (holder_is_pthread)
                join_pthread(p);
            else
                join(u);
            CHECK_RC(weft_mutex_destroy(&m), 0);
        }
    }
    return (void *)1;
}

/* A pthread tries to unlock a mutex a uthread holds (and vice versa above). */
static void *pthread_unlocker(void *arg)
{
    CHECK_RC(weft_mutex_unlock((weft_mutex_t *)arg), EPERM);
    return NULL;
}

static void *uthread_locks_then_pthread_unlocks(void *arg)
{
    (void)arg;
    weft_mutex_t m = WEFT_MUTEX_INIT;
    CHECK_RC(weft_mutex_lock(&m), 0);
    join_pthread(start_pthread(pthread_unlocker, &m));
    CHECK_RC(weft_mutex_unlock(&m), 0);
    return (void *)1;
}

/* ---- timed waits (timed_wait.h) ------------------------------------------------- */

static weft_mutex_t tw_mutex = WEFT_MUTEX_INIT;

static void tw_mutex_hold(void) { CHECK_RC(weft_mutex_lock(&tw_mutex), 0); }
static void tw_mutex_release(void) { CHECK_RC(weft_mutex_unlock(&tw_mutex), 0); }
static int tw_mutex_timed(uint64_t dl)
{
    int rc = weft_mutex_timedlock(&tw_mutex, dl);
    if (rc == 0)
        CHECK_RC(weft_mutex_unlock(&tw_mutex), 0);
    return rc;
}

static const struct tw_prim tw_prims[] = {
    { "mutex_timedlock", tw_mutex_hold, tw_mutex_release, tw_mutex_timed },
};

/* ---- destroyed by the next owner, and a woken contender -------------------------- */

/* Each once a real bug. The thread that locks the mutex next destroys and
 * frees it at once: the unlocker must not touch it after the release (ASan
 * catches a later touch). */
static void *taker_frees(void *arg)
{
    weft_mutex_t *m = arg;
    CHECK_RC(weft_mutex_lock(m), 0);
    CHECK_RC(weft_mutex_unlock(m), 0);
    CHECK_RC(weft_mutex_destroy(m), 0);
    free(m);
    return NULL;
}

static void *freed_by_taker(void *arg)
{
    (void)arg;
    for (int i = 0; i < SCALE(2000, 300); i++) {
        weft_mutex_t *m = malloc(sizeof *m);
        CHECK(m != NULL, "malloc");
        weft_mutex_init(m, WEFT_MUTEX_PLAIN);
        CHECK_RC(weft_mutex_lock(m), 0);
        weft_t t = spawn(taker_frees, m);
        weft_yield(); /* let it block on the mutex (or not: both are fine) */
        CHECK_RC(weft_mutex_unlock(m), 0);
        join(t);
    }
    return (void *)1;
}

static weft_mutex_t woken_mu = WEFT_MUTEX_INIT;

static void *contender(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&woken_mu), 0);
    CHECK_RC(weft_mutex_unlock(&woken_mu), 0);
    return NULL;
}

/* A mutex whose sleeper was woken but has not run yet is free to take, but
 * not destroyable (EBUSY). All on vcore 0: the contender cannot run between
 * the unlock and the checks. */
static void *woken_contender(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&woken_mu), 0);
    weft_t c = spawn_ex(contender, NULL, WEFT_PINNED, 0, NULL);
    weft_yield(); /* it sleeps on the mutex */
    CHECK_RC(weft_mutex_unlock(&woken_mu), 0); /* wakes it; it has not run yet */
    CHECK_RC(weft_mutex_trylock(&woken_mu), 0);
    CHECK_RC(weft_mutex_unlock(&woken_mu), 0);
    CHECK_RC(weft_mutex_destroy(&woken_mu), EBUSY);
    join(c);
    CHECK_RC(weft_mutex_destroy(&woken_mu), 0);
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("own semantics from main");
    own_all(NULL);
    check_phase("own semantics from a uthread");
    CHECK(in_uthread(own_all, NULL) == (void *)1, "own_all");
    check_phase("against a holder, from main");
    vs_holders(NULL);
    check_phase("against a holder, from a uthread");
    in_uthread(vs_holders, NULL);
    check_phase("pthread unlocks a uthread's mutex");
    in_uthread(uthread_locks_then_pthread_unlocks, NULL);
    check_torture();
    tw_check(tw_prims, 1);
    check_phase("destroyed by the next owner, from a uthread");
    CHECK(in_uthread(freed_by_taker, NULL) == (void *)1, "freed_by_taker");
    check_phase("destroyed by the next owner, from main");
    freed_by_taker(NULL);
    check_phase("a woken contender");
    CHECK(join(spawn_ex(woken_contender, NULL, WEFT_PINNED, 0, NULL)) == (void *)1, "woken");
    fprintf(stderr, "mutex: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
