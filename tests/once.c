/*
 * once — weft_once under contention.
 *
 * Proves: 100 uthreads and 2 pthreads released together onto weft_once run
 * fn exactly once, and every caller returns only after fn has finished (fn
 * sleeps and yields before setting its flag); later calls do not run fn
 * again; separate once objects run their own fn; weft_once with a NULL fn
 * is EINVAL and leaves the once object unused.
 */
#include "check.h"

#define NU 100
#define NP 2

static weft_once_t once = WEFT_ONCE_INIT;
static atomic_int calls, finished, go, early_returns;

static void slow_init(void)
{
    atomic_fetch_add(&calls, 1);
    weft_sleep_ns(MS(20));    /* callers must wait through this... */
    weft_yield();
    weft_sleep_ns(MS(5));
    atomic_store(&finished, 1);   /* ...and see this afterwards */
}

static void *caller(void *arg)
{
    (void)arg;
    WAIT_UNTIL(atomic_load(&go), "start signal");
    CHECK_RC(weft_once(&once, slow_init), 0);
    if (!atomic_load(&finished))
        atomic_fetch_add(&early_returns, 1);
    return NULL;
}

static void check_race(void)
{
    check_phase("race on one once");
    weft_t u[NU];
    pthread_t p[NP];
    for (int i = 0; i < NU; i++)
        u[i] = spawn(caller, NULL);
    for (int i = 0; i < NP; i++)
        p[i] = start_pthread(caller, NULL);
    atomic_store(&go, 1);
    for (int i = 0; i < NU; i++)
        join(u[i]);
    for (int i = 0; i < NP; i++)
        join_pthread(p[i]);
    CHECK(atomic_load(&calls) == 1, "fn ran %d times", atomic_load(&calls));
    CHECK(atomic_load(&early_returns) == 0, "%d callers returned before fn finished",
          atomic_load(&early_returns));
    CHECK_RC(weft_once(&once, slow_init), 0);
    CHECK(atomic_load(&calls) == 1, "fn ran again after completion");
}

static atomic_int a_calls, b_calls;
static void fn_a(void) { atomic_fetch_add(&a_calls, 1); }
static void fn_b(void) { atomic_fetch_add(&b_calls, 1); }

static void *rows(void *arg)
{
    (void)arg;
    weft_once_t o = WEFT_ONCE_INIT, o2 = WEFT_ONCE_INIT;
    CHECK_RC(weft_once(&o, NULL), EINVAL);
    CHECK_RC(weft_once(&o, fn_a), 0);         /* the EINVAL left o unused */
    CHECK_RC(weft_once(&o, fn_a), 0);
    CHECK_RC(weft_once(&o, fn_b), 0);
    CHECK_RC(weft_once(&o2, fn_b), 0);
    CHECK_RC(weft_once(&o2, fn_a), 0);
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("rows from main");
    rows(NULL);
    CHECK(atomic_load(&a_calls) == 1 && atomic_load(&b_calls) == 1, "a %d b %d",
          atomic_load(&a_calls), atomic_load(&b_calls));
    check_phase("rows from a uthread");
    in_uthread(rows, NULL);
    CHECK(atomic_load(&a_calls) == 2 && atomic_load(&b_calls) == 2, "a %d b %d",
          atomic_load(&a_calls), atomic_load(&b_calls));
    check_race();
    fprintf(stderr, "once: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
