/*
 * wg — weft_wg_t wait groups.
 *
 * Proves: wait returns only after every done (work counted before done is
 * all visible), for waiters that are main, uthreads and a pthread at once;
 * wait on a zero count returns at once; a wait group can be reused for
 * several rounds; add that would make the count negative is EINVAL and
 * leaves the count unchanged (later dones still balance it exactly); the
 * done that releases a waiter writes nothing to the wait group afterwards
 * (the waiter overwrites it at once, on its stack, and the bytes must stay
 * so until that done has returned: before the fix, the generation bump
 * after the count's zero came late in about one wait in a thousand at two
 * vcores); a waiter whose zero is undone by an add before it has run is
 * still released.
 */
#include "check.h"

#define NWORK 500
#define NWAITERS 8
#define ROUNDS 5

static weft_wg_t wg = WEFT_WG_INIT;
static atomic_int work_done;
static atomic_int waiters_ok;

static void *worker(void *arg)
{
    uintptr_t i = (uintptr_t)arg;
    if (i % 3 == 0)
        weft_yield();
    if (i % 17 == 0)
        weft_sleep_ns(200000);
    atomic_fetch_add(&work_done, 1);
    CHECK_RC(weft_wg_done(&wg), 0);
    return NULL;
}

static void *waiter(void *arg)
{
    int want = (int)(intptr_t)arg;
    CHECK_RC(weft_wg_wait(&wg), 0);
    int seen = atomic_load(&work_done);
    CHECK(seen >= want, "wait returned with %d of %d done", seen, want);
    atomic_fetch_add(&waiters_ok, 1);
    return NULL;
}

static void run_round(int r)
{
    int want = (r + 1) * NWORK;
    CHECK_RC(weft_wg_add(&wg, NWORK), 0);
    weft_t w[NWAITERS];
    for (int i = 0; i < NWAITERS; i++)
        w[i] = spawn(waiter, (void *)(intptr_t)want);
    pthread_t p = start_pthread(waiter, (void *)(intptr_t)want);
    weft_attr_t a = { .flags = WEFT_DETACHED };
    for (uintptr_t i = 0; i < NWORK; i++)
        CHECK_RC(weft_spawn(NULL, &a, worker, (void *)i), 0);
    waiter((void *)(intptr_t)want);   /* main waits too */
    for (int i = 0; i < NWAITERS; i++)
        join(w[i]);
    join_pthread(p);
    CHECK(atomic_load(&work_done) == want, "round %d: %d done", r, atomic_load(&work_done));
}

static void *rows(void *arg)
{
    (void)arg;
    weft_wg_t g = WEFT_WG_INIT;
    CHECK_RC(weft_wg_wait(&g), 0);            /* zero: at once */
    CHECK_RC(weft_wg_done(&g), EINVAL);       /* 0 - 1 */
    CHECK_RC(weft_wg_add(&g, -1), EINVAL);
    CHECK_RC(weft_wg_add(&g, 2), 0);
    CHECK_RC(weft_wg_add(&g, -3), EINVAL);    /* count unchanged: still 2 */
    CHECK_RC(weft_wg_add(&g, 0), 0);
    CHECK_RC(weft_wg_done(&g), 0);
    CHECK_RC(weft_wg_add(&g, -1), 0);         /* 2 - 1 - 1 = 0 */
    CHECK_RC(weft_wg_wait(&g), 0);
    CHECK_RC(weft_wg_done(&g), EINVAL);
    CHECK_RC(weft_wg_add(&g, 1), 0);
    CHECK_RC(weft_wg_done(&g), 0);
    CHECK_RC(weft_wg_wait(&g), 0);
    return (void *)1;
}

/* ---- released: nothing written after the releasing done ---------------------- */

#define RELEASE_ROUNDS 100000
static weft_wg_t *_Atomic handed;  /* the releaser's wait group, for the doer */
static atomic_uint done_round;     /* the doer's last round whose done returned */

static void *doer(void *arg)
{
    (void)arg;
    for (unsigned r = 1; r <= RELEASE_ROUNDS; r++) {
        weft_wg_t *g;
        while (!(g = atomic_load(&handed)))
            weft_yield();
        atomic_store(&handed, NULL);
        CHECK_RC(weft_wg_done(g), 0);
        atomic_store(&done_round, r);
    }
    return NULL;
}

static void *releaser(void *arg)
{
    (void)arg;
    unsigned late = 0;
    for (unsigned r = 1; r <= RELEASE_ROUNDS; r++) {
        weft_wg_t g = WEFT_WG_INIT; /* on this stack, reused every round */
        CHECK_RC(weft_wg_add(&g, 1), 0);
        atomic_store(&handed, &g);
        if (weft_num_vcores() > 1) /* enter the wait as the done runs, at varying points */
            while (atomic_load(&handed))
                ;
        for (unsigned i = r % 16; i; i--)
            atomic_signal_fence(memory_order_seq_cst);
        CHECK_RC(weft_wg_wait(&g), 0);
        memset(&g, 0xa5, sizeof g); /* released: it is ours again */
        while (atomic_load(&done_round) != r)
            weft_yield();
        const unsigned char *b = (const unsigned char *)&g;
        for (size_t i = 0; i < sizeof g; i++)
            if (b[i] != 0xa5) {
                late++;
                break;
            }
    }
    CHECK(late == 0, "%u of %d waits: the wait group was written after weft_wg_wait returned",
          late, RELEASE_ROUNDS);
    return NULL;
}

static void released(void)
{
    check_phase("released");
    int two = weft_num_vcores() > 1;
    weft_t d = spawn_ex(doer, NULL, two ? WEFT_PINNED | WEFT_ON_VCORE : 0, two, "doer");
    weft_t w = spawn_ex(releaser, NULL, two ? WEFT_PINNED | WEFT_ON_VCORE : 0, 0, "releaser");
    join(w);
    join(d);
}

/* ---- a zero undone before the waiter runs ---------------------------------------- */

/* Once a real bug: a wait group whose zero is undone by an add before the
 * waiter has run still releases that waiter. All on vcore 0: the waiter
 * cannot run between the done and the add. */
static weft_wg_t gen_wg = WEFT_WG_INIT;
static atomic_int gen_returned;

static void *gen_waiter(void *arg)
{
    (void)arg;
    CHECK_RC(weft_wg_wait(&gen_wg), 0);
    atomic_store(&gen_returned, 1);
    return NULL;
}

static void *zero_undone(void *arg)
{
    (void)arg;
    CHECK_RC(weft_wg_add(&gen_wg, 1), 0);
    weft_t w = spawn_ex(gen_waiter, NULL, WEFT_PINNED, 0, NULL);
    weft_yield(); /* it runs and sleeps */
    CHECK_RC(weft_wg_done(&gen_wg), 0);
    CHECK_RC(weft_wg_add(&gen_wg, 1), 0);
    join(w);
    CHECK(atomic_load(&gen_returned) == 1, "wait group waiter not released");
    CHECK_RC(weft_wg_done(&gen_wg), 0);
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_table(rows);
    check_phase("rounds");
    for (int r = 0; r < ROUNDS; r++)
        run_round(r);
    CHECK(atomic_load(&waiters_ok) == ROUNDS * (NWAITERS + 2), "waiters ok %d",
          atomic_load(&waiters_ok));
    released();
    check_phase("a zero undone before the waiter runs");
    CHECK(join(spawn_ex(zero_undone, NULL, WEFT_PINNED, 0, NULL)) == (void *)1, "zero_undone");
    fprintf(stderr, "wg: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
