/*
 * stress — a bounded random mix of everything (stress tier).
 *
 * Proves: 3000 uthreads (fixed seeds) doing a random mix of mutex sections,
 * a mutex+cond bounded queue, semaphore post/wait, rwlock sections, random
 * sleeps, yields, joined and detached children and park/unpark hand-offs
 * finish without a hang, and at the end every invariant holds: the mutex
 * counter equals the increments made, the queue and semaphore are back to
 * their starting state with every token accounted for, writers' updates are
 * all there, every child's result came back and every detached child ran.
 * Every worker does "put then take" / "post then wait", so none can block
 * forever. Afterwards weft_shutdown returns.
 */
#include "check.h"

#define NWORKERS SCALE(3000, 800)
#define OPS SCALE(1000, 100)

static weft_mutex_t mu = WEFT_MUTEX_INIT;
static long mu_counter;                    /* guarded by mu */
static atomic_long mu_incs;

#define QCAP 16
static weft_mutex_t q_mu = WEFT_MUTEX_INIT;
static weft_cond_t q_not_full = WEFT_COND_INIT, q_not_empty = WEFT_COND_INIT;
static uint64_t q_ring[QCAP];
static unsigned q_head, q_len;             /* guarded by q_mu */
static atomic_ullong q_put_sum, q_take_sum;

static weft_sem_t sem = WEFT_SEM_INIT(3);
static weft_rwlock_t rw = WEFT_RWLOCK_INIT;
static long rw_a, rw_b;                    /* written together under the write lock */
static atomic_long rw_writes;

static weft_wg_t detached_wg = WEFT_WG_INIT;
static atomic_long detached_ran, children_ok;

static void op_mutex(uint32_t r)
{
    CHECK_RC(weft_mutex_lock(&mu), 0);
    long v = mu_counter;
    if (r & 1)
        weft_yield();
    mu_counter = v + 1;
    CHECK_RC(weft_mutex_unlock(&mu), 0);
    atomic_fetch_add(&mu_incs, 1);
}

static void q_put(uint64_t token)
{
    CHECK_RC(weft_mutex_lock(&q_mu), 0);
    while (q_len == QCAP)
        CHECK_RC(weft_cond_wait(&q_not_full, &q_mu), 0);
    q_ring[(q_head + q_len++) % QCAP] = token;
    CHECK_RC(weft_cond_signal(&q_not_empty), 0);
    CHECK_RC(weft_mutex_unlock(&q_mu), 0);
    atomic_fetch_add(&q_put_sum, token);
}

static uint64_t q_take(void)
{
    CHECK_RC(weft_mutex_lock(&q_mu), 0);
    while (q_len == 0)
        CHECK_RC(weft_cond_wait(&q_not_empty, &q_mu), 0);
    uint64_t token = q_ring[q_head];
    q_head = (q_head + 1) % QCAP;
    q_len--;
    CHECK_RC(weft_cond_signal(&q_not_full), 0);
    CHECK_RC(weft_mutex_unlock(&q_mu), 0);
    atomic_fetch_add(&q_take_sum, token);
    return token;
}

static void op_rwlock(uint32_t r)
{
    if (r % 4 == 0) {
        CHECK_RC(weft_rwlock_wrlock(&rw), 0);
        rw_a++;
        if (r & 16)
            weft_yield();
        rw_b++;
        CHECK_RC(weft_rwlock_unlock(&rw), 0);
        atomic_fetch_add(&rw_writes, 1);
    } else {
        CHECK_RC(weft_rwlock_rdlock(&rw), 0);
        long a = rw_a;
        if (r & 16)
            weft_yield();
        CHECK(a == rw_b, "reader saw a half-done write");
        CHECK_RC(weft_rwlock_unlock(&rw), 0);
    }
}

static void *child(void *arg)
{
    uintptr_t x = (uintptr_t)arg;
    for (unsigned i = 0; i < (x & 3); i++)
        weft_yield();
    if (x & 4)
        weft_sleep_ns(20000);
    return (void *)(x * 3 + 1);
}

static void *detached_child(void *arg)
{
    child(arg);
    atomic_fetch_add(&detached_ran, 1);
    CHECK_RC(weft_wg_done(&detached_wg), 0);
    return NULL;
}

struct parkee {
    atomic_int go;
};

static void *park_child(void *arg)
{
    struct parkee *p = arg;
    while (!atomic_load(&p->go))
        CHECK_RC(weft_park(), 0);
    return (void *)1;
}

static void op_children(uint32_t r)
{
    uintptr_t x = r & 0xffff;
    switch ((r >> 16) % 3) {
    case 0:
        CHECK(join(spawn(child, (void *)x)) == (void *)(x * 3 + 1), "child result");
        atomic_fetch_add(&children_ok, 1);
        break;
    case 1: {
        CHECK_RC(weft_wg_add(&detached_wg, 1), 0);
        weft_attr_t a = { .flags = WEFT_DETACHED };
        CHECK_RC(weft_spawn(NULL, &a, detached_child, (void *)x), 0);
        break;
    }
    default: {
        struct parkee p = { 0 };
        weft_t t = spawn(park_child, &p);
        if (r & 1)
            weft_yield();
        atomic_store(&p.go, 1);
        CHECK_RC(weft_unpark(t), 0);
        CHECK(join(t) == (void *)1, "park child");
        break;
    }
    }
}

static void *worker(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 7;
    for (int i = 0; i < OPS; i++) {
        uint32_t r = check_rand(&seed);
        switch (r % 8) {
        case 0: op_mutex(r >> 3); break;
        case 1: q_put(r >> 3); q_take(); break;
        case 2:
            CHECK_RC(weft_sem_post(&sem), 0);
            CHECK_RC(weft_sem_wait(&sem), 0);
            break;
        case 3: op_rwlock(r >> 3); break;
        case 4: CHECK_RC(weft_sleep_ns((r >> 3) % 200000), 0); break;
        case 5: weft_yield(); break;
        default: op_children(r >> 3); break;
        }
    }
    return (void *)(uintptr_t)(seed | 1);
}

static void *run_all(void *arg)
{
    (void)arg;
    static weft_t t[NWORKERS];
    for (uintptr_t i = 0; i < NWORKERS; i++)
        t[i] = spawn(worker, (void *)i);
    for (int i = 0; i < NWORKERS; i++)
        CHECK(join(t[i]) != NULL, "worker %d", i);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("random mix");
    uint64_t t0 = weft_now_ns();
    in_uthread(run_all, NULL);
    CHECK_RC(weft_wg_wait(&detached_wg), 0);

    check_phase("invariants");
    CHECK(mu_counter == atomic_load(&mu_incs), "mutex counter %ld, increments %ld", mu_counter,
          atomic_load(&mu_incs));
    CHECK(q_len == 0, "%u tokens left in the queue", q_len);
    CHECK(atomic_load(&q_put_sum) == atomic_load(&q_take_sum), "queue sums %llu != %llu",
          atomic_load(&q_put_sum), atomic_load(&q_take_sum));
    CHECK(weft_sem_value(&sem) == 3, "semaphore at %d, started at 3", weft_sem_value(&sem));
    CHECK(rw_a == rw_b && rw_a == atomic_load(&rw_writes), "rwlock a %ld b %ld writes %ld",
          rw_a, rw_b, atomic_load(&rw_writes));
    long ops_seen = mu_counter + atomic_load(&rw_writes) + atomic_load(&children_ok) +
                    atomic_load(&detached_ran);
    CHECK(ops_seen > 0, "no operations counted");

    check_phase("shutdown");
    weft_shutdown();
    fprintf(stderr, "stress: ok (%d workers x %d ops, %llu ms, mutex %ld, rw writes %ld, "
                    "children %ld, detached %ld)\n",
            NWORKERS, OPS, (unsigned long long)((weft_now_ns() - t0) / 1000000), mu_counter,
            atomic_load(&rw_writes), atomic_load(&children_ok), atomic_load(&detached_ran));
    return 0;
}
