/*
 * cond — weft_cond_t: a bounded buffer, timeouts, broadcast, error rows.
 *
 * Proves: a bounded buffer with 4 uthread producers + 1 pthread producer and
 * 4 uthread consumers + 1 pthread consumer passes every numbered item exactly
 * once (nothing lost, nothing duplicated, checksum equal), each consumer
 * sees each producer's items in order; timedwait returns ETIMEDOUT no earlier
 * than its deadline and with the mutex held again, EINVAL for a top-bit
 * deadline (mutex still held); a timedwait woken before its deadline returns
 * 0; broadcast wakes every waiter (uthreads and a pthread); n signals to n
 * waiters wake them all; waiting without holding the mutex is EPERM;
 * destroy with a waiter is EBUSY; the timed-wait checks of timed_wait.h; a
 * condition variable destroyed and freed right after its broadcast's waiter
 * is joined is not touched by the wake-up (ASan); a timed wait on an outside
 * kernel thread leaves errno alone.
 */
#include "check.h"
#include "timed_wait.h"

/* ---- bounded buffer ------------------------------------------------------------ */

#define NPROD 5                 /* the last one is a pthread */
#define NCONS 5                 /* the last one is a pthread */
#define ITEMS SCALE(4000, 800)  /* per producer */
#define CAP 8
#define STOP UINT32_MAX

static weft_mutex_t bb_mu = WEFT_MUTEX_INIT;
static weft_cond_t bb_not_full = WEFT_COND_INIT, bb_not_empty = WEFT_COND_INIT;
static uint32_t bb_ring[CAP];
static unsigned bb_head, bb_len;             /* guarded by bb_mu */
static atomic_uchar seen[NPROD * ITEMS];
static atomic_ullong consumed_sum;

static void bb_put(uint32_t item)
{
    CHECK_RC(weft_mutex_lock(&bb_mu), 0);
    while (bb_len == CAP)
        CHECK_RC(weft_cond_wait(&bb_not_full, &bb_mu), 0);
    bb_ring[(bb_head + bb_len) % CAP] = item;
    bb_len++;
    CHECK_RC(weft_cond_signal(&bb_not_empty), 0);
    CHECK_RC(weft_mutex_unlock(&bb_mu), 0);
}

static uint32_t bb_get(void)
{
    CHECK_RC(weft_mutex_lock(&bb_mu), 0);
    while (bb_len == 0)
        CHECK_RC(weft_cond_wait(&bb_not_empty, &bb_mu), 0);
    uint32_t item = bb_ring[bb_head];
    bb_head = (bb_head + 1) % CAP;
    bb_len--;
    if (bb_len == CAP - 1)
        CHECK_RC(weft_cond_broadcast(&bb_not_full), 0);   /* mix broadcast in */
    else
        CHECK_RC(weft_cond_signal(&bb_not_full), 0);
    CHECK_RC(weft_mutex_unlock(&bb_mu), 0);
    return item;
}

static void *producer(void *arg)
{
    uint32_t p = (uint32_t)(uintptr_t)arg;
    for (uint32_t k = 0; k < ITEMS; k++) {
        bb_put(p * ITEMS + k);
        if (k % 97 == 0)
            weft_yield();
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    long last[NPROD];
    for (int p = 0; p < NPROD; p++)
        last[p] = -1;
    for (;;) {
        uint32_t item = bb_get();
        if (item == STOP)
            return NULL;
        CHECK(item < NPROD * ITEMS, "garbage item %u", item);
        unsigned p = item / ITEMS;
        long k = item % ITEMS;
        CHECK(k > last[p], "producer %u's item %ld after %ld: out of order", p, k, last[p]);
        last[p] = k;
        unsigned char before = atomic_fetch_add(&seen[item], 1);
        CHECK(before == 0, "item %u consumed twice", item);
        atomic_fetch_add(&consumed_sum, (unsigned long long)item * 3 + 1);
    }
}

static void check_bounded_buffer(void)
{
    check_phase("bounded buffer");
    weft_t prod[NPROD - 1], cons[NCONS - 1];
    for (uintptr_t i = 0; i < NCONS - 1; i++)
        cons[i] = spawn(consumer, NULL);
    pthread_t pcons = start_pthread(consumer, NULL);
    for (uintptr_t i = 0; i < NPROD - 1; i++)
        prod[i] = spawn(producer, (void *)i);
    pthread_t pprod = start_pthread(producer, (void *)(uintptr_t)(NPROD - 1));
    for (int i = 0; i < NPROD - 1; i++)
        join(prod[i]);
    join_pthread(pprod);
    for (int i = 0; i < NCONS; i++)
        bb_put(STOP);
    for (int i = 0; i < NCONS - 1; i++)
        join(cons[i]);
    join_pthread(pcons);

    unsigned long long want = 0;
    for (uint32_t item = 0; item < NPROD * ITEMS; item++) {
        CHECK(atomic_load(&seen[item]) == 1, "item %u consumed %d times", item,
              atomic_load(&seen[item]));
        want += (unsigned long long)item * 3 + 1;
    }
    CHECK(atomic_load(&consumed_sum) == want, "checksum %llu, expected %llu",
          atomic_load(&consumed_sum), want);
    CHECK(bb_len == 0, "%u items left in the buffer", bb_len);
}

/* ---- timeouts and error rows (run from main and from a uthread) --------------- */

static void *timed_rows(void *arg)
{
    (void)arg;
    weft_mutex_t m = WEFT_MUTEX_INIT;
    weft_cond_t c;
    CHECK_RC(weft_cond_init(&c), 0);

    CHECK_RC(weft_cond_wait(&c, &m), EPERM);                 /* not held */
    CHECK_RC(weft_cond_timedwait(&c, &m, WEFT_FOREVER), EPERM);

    CHECK_RC(weft_mutex_lock(&m), 0);
    uint64_t deadline = weft_now_ns() + MS(50);
    CHECK_RC(weft_cond_timedwait(&c, &m, deadline), ETIMEDOUT);
    uint64_t now = weft_now_ns();
    CHECK(now >= deadline, "ETIMEDOUT %llu ns before the deadline",
          (unsigned long long)(deadline - now));
    CHECK_RC(weft_cond_timedwait(&c, &m, 1), ETIMEDOUT);     /* past */
    CHECK_RC(weft_cond_timedwait(&c, &m, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_mutex_unlock(&m), 0);                      /* held again after all */
    CHECK_RC(weft_mutex_unlock(&m), EPERM);

    weft_mutex_t r = WEFT_MUTEX_RECURSIVE_INIT;
    CHECK_RC(weft_mutex_lock(&r), 0);
    CHECK_RC(weft_cond_timedwait(&c, &r, 1), ETIMEDOUT);
    CHECK_RC(weft_mutex_unlock(&r), 0);
    CHECK_RC(weft_mutex_unlock(&r), EPERM);

    CHECK_RC(weft_cond_signal(&c), 0);                       /* no waiters: fine */
    CHECK_RC(weft_cond_broadcast(&c), 0);
    CHECK_RC(weft_cond_destroy(&c), 0);
    return (void *)1;
}

/* ---- waking: a shared "room" of waiters ----------------------------------------- */

static weft_mutex_t room_mu = WEFT_MUTEX_INIT;
static weft_cond_t room_cv = WEFT_COND_INIT;
static int room_waiting;      /* guarded by room_mu: inside cond_wait (mutex released) */
static int room_go;           /* guarded by room_mu */
static int room_tokens;       /* guarded by room_mu */
static atomic_int room_woken;

/* Waits for room_go (broadcast test) or a token (signal test). */
static void *room_waiter(void *arg)
{
    int use_tokens = (int)(uintptr_t)arg;
    CHECK_RC(weft_mutex_lock(&room_mu), 0);
    room_waiting++;
    if (use_tokens) {
        while (room_tokens == 0)
            CHECK_RC(weft_cond_wait(&room_cv, &room_mu), 0);
        room_tokens--;
    } else {
        while (!room_go)
            CHECK_RC(weft_cond_wait(&room_cv, &room_mu), 0);
    }
    room_waiting--;
    CHECK_RC(weft_mutex_unlock(&room_mu), 0);
    atomic_fetch_add(&room_woken, 1);
    return NULL;
}

static int room_count(void)
{
    CHECK_RC(weft_mutex_lock(&room_mu), 0);
    int n = room_waiting;
    CHECK_RC(weft_mutex_unlock(&room_mu), 0);
    return n;
}

#define NROOM 20   /* the last one is a pthread */

static void check_wakeups(int use_tokens)
{
    check_phase(use_tokens ? "n signals wake n waiters" : "broadcast wakes all");
    room_go = 0, room_tokens = 0;
    atomic_store(&room_woken, 0);
    weft_t u[NROOM - 1];
    for (int i = 0; i < NROOM - 1; i++)
        u[i] = spawn(room_waiter, (void *)(uintptr_t)use_tokens);
    pthread_t p = start_pthread(room_waiter, (void *)(uintptr_t)use_tokens);
    /* A waiter counted under the mutex has released it only inside cond_wait. */
    WAIT_UNTIL(room_count() == NROOM, "all waiters waiting");

    if (use_tokens) {
        for (int i = 0; i < NROOM; i++) {
            CHECK_RC(weft_mutex_lock(&room_mu), 0);
            room_tokens++;
            CHECK_RC(weft_cond_signal(&room_cv), 0);
            CHECK_RC(weft_mutex_unlock(&room_mu), 0);
        }
    } else {
        CHECK_RC(weft_mutex_lock(&room_mu), 0);
        room_go = 1;
        CHECK_RC(weft_cond_broadcast(&room_cv), 0);   /* one broadcast, never repeated */
        CHECK_RC(weft_mutex_unlock(&room_mu), 0);
    }
    WAIT_UNTIL(atomic_load(&room_woken) == NROOM, "every waiter woken");
    for (int i = 0; i < NROOM - 1; i++)
        join(u[i]);
    join_pthread(p);
    CHECK(room_tokens == 0, "%d tokens left", room_tokens);
}

/* destroy while a uthread waits, and a timedwait woken in time */
static void check_destroy_busy_and_early_wake(void)
{
    check_phase("destroy with a waiter / timedwait woken early");
    atomic_store(&room_woken, 0);
    room_tokens = 0;
    weft_t u = spawn(room_waiter, (void *)1);
    WAIT_UNTIL(room_count() == 1, "waiter waiting");
    CHECK_RC(weft_cond_destroy(&room_cv), EBUSY);
    CHECK_RC(weft_mutex_lock(&room_mu), 0);
    room_tokens = 1;
    CHECK_RC(weft_cond_signal(&room_cv), 0);
    CHECK_RC(weft_mutex_unlock(&room_mu), 0);
    join(u);
    CHECK(atomic_load(&room_woken) == 1, "waiter not woken");
}

static void *timed_waiter(void *arg)
{
    (void)arg;
    CHECK_RC(weft_mutex_lock(&room_mu), 0);
    room_waiting++;
    uint64_t deadline = weft_now_ns() + WAIT_BOUND_NS;
    int rc = 0;
    while (room_tokens == 0 && rc == 0)
        rc = weft_cond_timedwait(&room_cv, &room_mu, deadline);
    CHECK_RC(rc, 0);
    room_tokens--;
    room_waiting--;
    CHECK_RC(weft_mutex_unlock(&room_mu), 0);
    return NULL;
}

static void check_timedwait_woken(void)
{
    check_phase("timedwait woken before its deadline");
    weft_t u = spawn(timed_waiter, NULL);
    WAIT_UNTIL(room_count() == 1, "timed waiter waiting");
    CHECK_RC(weft_mutex_lock(&room_mu), 0);
    room_tokens = 1;
    CHECK_RC(weft_cond_signal(&room_cv), 0);
    CHECK_RC(weft_mutex_unlock(&room_mu), 0);
    join(u);
}

/* ---- timed waits (timed_wait.h) ------------------------------------------------- */

static weft_mutex_t tw_mu = WEFT_MUTEX_INIT;
static weft_cond_t tw_cv = WEFT_COND_INIT;
static int tw_flag; /* guarded by tw_mu */

static void tw_cond_hold(void)
{
    CHECK_RC(weft_mutex_lock(&tw_mu), 0);
    tw_flag = 0;
    CHECK_RC(weft_mutex_unlock(&tw_mu), 0);
}
static void tw_cond_release(void)
{
    CHECK_RC(weft_mutex_lock(&tw_mu), 0);
    tw_flag = 1;
    CHECK_RC(weft_cond_broadcast(&tw_cv), 0);
    CHECK_RC(weft_mutex_unlock(&tw_mu), 0);
}
static int tw_cond_timed(uint64_t dl)
{
    CHECK_RC(weft_mutex_lock(&tw_mu), 0);
    int rc = 0;
    while (!tw_flag && rc == 0)
        rc = weft_cond_timedwait(&tw_cv, &tw_mu, dl);
    if (rc == ETIMEDOUT && tw_flag)
        rc = 0; /* released at the deadline: fine either way */
    /* The mutex is held again, also after a timeout or EINVAL. */
    CHECK_RC(weft_mutex_trylock(&tw_mu), EBUSY);
    CHECK_RC(weft_mutex_unlock(&tw_mu), 0);
    return rc;
}

static const struct tw_prim tw_prims[] = {
    { "cond_timedwait", tw_cond_hold, tw_cond_release, tw_cond_timed },
};

/* ---- destroyed right after a broadcast; errno outside ----------------------------- */

/* Each once a real bug. The broadcaster destroys and frees the condition
 * variable (and its mutex) as soon as the waiter is joined: the waiter's
 * wake-up must not touch either after its wait returned (ASan). */
struct cv_pair {
    weft_mutex_t m;
    weft_cond_t c;
    int ready; /* guarded by m */
};

static void *pair_waiter(void *arg)
{
    struct cv_pair *p = arg;
    CHECK_RC(weft_mutex_lock(&p->m), 0);
    p->ready = 1;
    while (p->ready != 2)
        CHECK_RC(weft_cond_wait(&p->c, &p->m), 0);
    CHECK_RC(weft_mutex_unlock(&p->m), 0);
    return NULL;
}

static void *freed_after_broadcast(void *arg)
{
    (void)arg;
    for (int i = 0; i < SCALE(2000, 300); i++) {
        struct cv_pair *p = calloc(1, sizeof *p);
        CHECK(p != NULL, "calloc");
        weft_mutex_init(&p->m, WEFT_MUTEX_PLAIN);
        weft_cond_init(&p->c);
        weft_t t = spawn(pair_waiter, p);
        for (;;) {
            CHECK_RC(weft_mutex_lock(&p->m), 0);
            if (p->ready == 1)
                break;
            CHECK_RC(weft_mutex_unlock(&p->m), 0);
            weft_yield();
        }
        p->ready = 2;
        CHECK_RC(weft_cond_broadcast(&p->c), 0);
        CHECK_RC(weft_mutex_unlock(&p->m), 0);
        join(t);
        CHECK_RC(weft_cond_destroy(&p->c), 0);
        free(p);
    }
    return (void *)1;
}

/* A timed wait on an outside kernel thread leaves errno alone. */
static void check_errno_outside(void)
{
    check_phase("errno outside");
    weft_mutex_t m = WEFT_MUTEX_INIT;
    weft_cond_t c = WEFT_COND_INIT;
    errno = 4242;
    CHECK_RC(weft_mutex_lock(&m), 0);
    CHECK_RC(weft_cond_timedwait(&c, &m, weft_now_ns() + MS(2)), ETIMEDOUT);
    CHECK_RC(weft_mutex_unlock(&m), 0);
    CHECK(errno == 4242, "cond_timedwait changed errno to %d", errno);
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("timeouts and EPERM from main");
    timed_rows(NULL);
    check_phase("timeouts and EPERM from a uthread");
    CHECK(in_uthread(timed_rows, NULL) == (void *)1, "timed_rows");
    check_wakeups(0);
    check_wakeups(1);
    check_destroy_busy_and_early_wake();
    check_timedwait_woken();
    check_bounded_buffer();
    tw_check(tw_prims, 1);
    check_phase("destroyed right after a broadcast, from a uthread");
    CHECK(in_uthread(freed_after_broadcast, NULL) == (void *)1, "freed_after_broadcast");
    check_phase("destroyed right after a broadcast, from main");
    freed_after_broadcast(NULL);
    check_errno_outside();
    fprintf(stderr, "cond: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
