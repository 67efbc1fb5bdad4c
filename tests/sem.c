/*
 * sem — weft_sem_t: counting, conservation under contention, error rows.
 *
 * Proves: init rejects a negative value and changes nothing; trywait at 0 is
 * EAGAIN; weft_sem_value tracks posts and takes; post at WEFT_SEM_VALUE_MAX
 * is EOVERFLOW and leaves the value; timedwait is ETIMEDOUT no earlier than
 * its deadline, succeeds on a past deadline if a unit is there, EINVAL on a
 * top-bit deadline (taking nothing); under contention (uthread and pthread
 * producers and consumers mixing wait/trywait/timedwait) no post is lost and
 * none is taken twice; destroy with a waiter is EBUSY.
 */
#include "check.h"

static void *rows(void *arg)
{
    (void)arg;
    weft_sem_t s;
    CHECK_RC(weft_sem_init(&s, 3), 0);
    CHECK(weft_sem_value(&s) == 3, "value %d", weft_sem_value(&s));
    CHECK_RC(weft_sem_init(&s, -1), EINVAL);
    CHECK(weft_sem_value(&s) == 3, "failed init changed value to %d", weft_sem_value(&s));
    CHECK_RC(weft_sem_trywait(&s), 0);
    CHECK_RC(weft_sem_wait(&s), 0);
    CHECK_RC(weft_sem_timedwait(&s, 1), 0);             /* past deadline, unit there */
    CHECK(weft_sem_value(&s) == 0, "value %d", weft_sem_value(&s));
    CHECK_RC(weft_sem_trywait(&s), EAGAIN);
    CHECK_RC(weft_sem_timedwait(&s, 1), ETIMEDOUT);
    uint64_t deadline = weft_now_ns() + MS(50);
    CHECK_RC(weft_sem_timedwait(&s, deadline), ETIMEDOUT);
    uint64_t now = weft_now_ns();
    CHECK(now >= deadline, "ETIMEDOUT %llu ns early", (unsigned long long)(deadline - now));

    CHECK_RC(weft_sem_post(&s), 0);
    CHECK_RC(weft_sem_timedwait(&s, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_sem_timedwait(&s, (uint64_t)1 << 63), EINVAL);
    CHECK(weft_sem_value(&s) == 1, "EINVAL timedwait took a unit (value %d)",
          weft_sem_value(&s));
    CHECK_RC(weft_sem_timedwait(&s, WEFT_FOREVER), 0);
    CHECK_RC(weft_sem_destroy(&s), 0);

    CHECK_RC(weft_sem_init(&s, WEFT_SEM_VALUE_MAX), 0);
    CHECK_RC(weft_sem_post(&s), EOVERFLOW);
    CHECK(weft_sem_value(&s) == WEFT_SEM_VALUE_MAX, "value after EOVERFLOW %d",
          weft_sem_value(&s));
    CHECK_RC(weft_sem_trywait(&s), 0);
    CHECK_RC(weft_sem_post(&s), 0);
    CHECK_RC(weft_sem_destroy(&s), 0);

    weft_sem_t st = WEFT_SEM_INIT(2);
    CHECK(weft_sem_value(&st) == 2, "static init value %d", weft_sem_value(&st));
    return (void *)1;
}

/* ---- conservation --------------------------------------------------------------- */

#define NPROD 4            /* + 1 pthread */
#define NCONS 6            /* + 1 pthread */
#define POSTS SCALE(6000, 1000)   /* per producer */
#define TOTAL ((NPROD + 1) * POSTS)

static weft_sem_t items = WEFT_SEM_INIT(0);
static atomic_long taken;
static atomic_long posted;

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < POSTS; i++) {
        atomic_fetch_add(&posted, 1);
        CHECK_RC(weft_sem_post(&items), 0);
        if (i % 64 == 0)
            weft_yield();
    }
    return NULL;
}

/* Takes units until TOTAL have been taken overall (claims before taking). */
static void *consumer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg + 11;
    long mine = 0;
    for (;;) {
        long claim = atomic_fetch_add(&taken, 1);
        if (claim >= TOTAL) {
            atomic_fetch_sub(&taken, 1);
            return (void *)mine;
        }
        int rc;
        switch (check_rand(&seed) % 3) {
        case 0:
            CHECK_RC(weft_sem_wait(&items), 0);
            break;
        case 1:
            for (unsigned i = 0; (rc = weft_sem_trywait(&items)) == EAGAIN; i++)
                check_nap(i % 200);
            CHECK_RC(rc, 0);
            break;
        default:
            CHECK_RC(weft_sem_timedwait(&items, weft_now_ns() + WAIT_BOUND_NS), 0);
            break;
        }
        mine++;
    }
}

static void check_conservation(void)
{
    check_phase("conservation under contention");
    weft_t p[NPROD], c[NCONS];
    for (uintptr_t i = 0; i < NCONS; i++)
        c[i] = spawn(consumer, (void *)i);
    pthread_t pc = start_pthread(consumer, (void *)99);
    for (int i = 0; i < NPROD; i++)
        p[i] = spawn(producer, NULL);
    pthread_t pp = start_pthread(producer, NULL);
    for (int i = 0; i < NPROD; i++)
        join(p[i]);
    join_pthread(pp);
    long sum = (long)(intptr_t)join_pthread(pc);
    for (int i = 0; i < NCONS; i++)
        sum += (long)(intptr_t)join(c[i]);
    CHECK(sum == TOTAL, "consumers took %ld units, %d were posted", sum, TOTAL);
    CHECK(weft_sem_value(&items) == 0, "%d units left over", weft_sem_value(&items));
    CHECK_RC(weft_sem_trywait(&items), EAGAIN);
}

/* ---- destroy with a waiter ---------------------------------------------------------- */

static weft_sem_t lone = WEFT_SEM_INIT(0);
static atomic_int lone_about_to_wait;

static void *lone_waiter(void *arg)
{
    (void)arg;
    atomic_store(&lone_about_to_wait, 1);
    CHECK_RC(weft_sem_wait(&lone), 0);
    return (void *)1;
}

/* Pinned to vcore 0 with the waiter: our sleep lets it run until it blocks. */
static void *destroy_busy(void *arg)
{
    (void)arg;
    weft_t w = spawn_ex(lone_waiter, NULL, WEFT_PINNED, 0, NULL);
    WAIT_UNTIL(atomic_load(&lone_about_to_wait), "waiter started");
    weft_sleep_ns(MS(20));
    CHECK_RC(weft_sem_destroy(&lone), EBUSY);
    CHECK_RC(weft_sem_post(&lone), 0);
    CHECK(join(w) == (void *)1, "waiter");
    CHECK(weft_sem_value(&lone) == 0, "the post was not handed to the waiter");
    CHECK_RC(weft_sem_destroy(&lone), 0);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_table(rows);
    check_conservation();
    check_phase("destroy with a waiter");
    join(spawn_ex(destroy_busy, NULL, WEFT_PINNED, 0, NULL));
    fprintf(stderr, "sem: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
