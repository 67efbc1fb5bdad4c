/*
 * wg — weft_wg_t wait groups.
 *
 * Proves: wait returns only after every done (work counted before done is
 * all visible), for waiters that are main, uthreads and a pthread at once;
 * wait on a zero count returns at once; a wait group can be reused for
 * several rounds; add that would make the count negative is EINVAL and
 * leaves the count unchanged (later dones still balance it exactly).
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

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_table(rows);
    check_phase("rounds");
    for (int r = 0; r < ROUNDS; r++)
        run_round(r);
    CHECK(atomic_load(&waiters_ok) == ROUNDS * (NWAITERS + 2), "waiters ok %d",
          atomic_load(&waiters_ok));
    fprintf(stderr, "wg: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
