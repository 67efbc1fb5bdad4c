/*
 * rwlock — weft_rwlock_t invariants, writer progress, error rows.
 *
 * Proves: with uthread and pthread readers and writers (blocking, try and
 * timed variants) there is never a writer together with readers nor two
 * writers, and readers never see a half-done write; a writer gets in while
 * many readers keep re-taking the lock (bounded by iterations, not time);
 * unlock when not held is EPERM, as is unlocking someone else's write lock;
 * trywrlock is EBUSY while read-held and tryrdlock EBUSY while write-held;
 * timed variants time out no earlier than the deadline and a timed-out
 * writer does not keep blocking readers; relocking a write-held lock is
 * EDEADLK; destroy while held is EBUSY; WEFT_RWLOCK_INIT works; the
 * timed-wait checks of timed_wait.h for a reader against a writer and a
 * writer against a reader and against a writer.
 */
#include "check.h"
#include "timed_wait.h"

/* ---- invariants ---------------------------------------------------------------- */

#define NREAD 12     /* uthreads; + 1 pthread */
#define NWRITE 4     /* uthreads; + 1 pthread */
#define ITERS SCALE(3000, 500)

static weft_rwlock_t inv = WEFT_RWLOCK_INIT;
static atomic_int n_readers, n_writers;
static long shared_a, shared_b;    /* written together under the write lock */
static atomic_long writes_done;

static void take(int write, unsigned how)
{
    int rc;
    switch (how % 3) {
    case 0:
        CHECK_RC(write ? weft_rwlock_wrlock(&inv) : weft_rwlock_rdlock(&inv), 0);
        break;
    case 1:
        for (unsigned i = 0;
             (rc = write ? weft_rwlock_trywrlock(&inv) : weft_rwlock_tryrdlock(&inv)) == EBUSY;
             i++)
            check_nap(i % 200);
        CHECK_RC(rc, 0);
        break;
    default: {
        uint64_t d = weft_now_ns() + WAIT_BOUND_NS;
        CHECK_RC(write ? weft_rwlock_timedwrlock(&inv, d) : weft_rwlock_timedrdlock(&inv, d), 0);
        break;
    }
    }
}

static void read_section(unsigned r)
{
    take(0, r);
    atomic_fetch_add(&n_readers, 1);
    CHECK(atomic_load(&n_writers) == 0, "a writer is inside with a reader");
    long a = shared_a;
    if (r & 0x10)
        weft_yield();
    long b = shared_b;
    CHECK(a == b, "reader saw a half-done write (%ld, %ld)", a, b);
    atomic_fetch_sub(&n_readers, 1);
    CHECK_RC(weft_rwlock_unlock(&inv), 0);
}

static void write_section(unsigned r)
{
    take(1, r);
    CHECK(atomic_fetch_add(&n_writers, 1) == 0, "two writers inside");
    CHECK(atomic_load(&n_readers) == 0, "writer inside with %d readers",
          atomic_load(&n_readers));
    shared_a++;
    if (r & 0x10)
        weft_yield();
    shared_b++;
    atomic_fetch_add(&writes_done, 1);
    atomic_fetch_sub(&n_writers, 1);
    CHECK_RC(weft_rwlock_unlock(&inv), 0);
}

static void *rw_worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    int writer = (id & 1) != 0;
    unsigned seed = (unsigned)id * 2654435761u + 1;
    for (int i = 0; i < ITERS; i++) {
        unsigned r = check_rand(&seed);
        if (writer)
            write_section(r >> 4);
        else
            read_section(r >> 4);
        if ((r & 7) == 0)
            weft_yield();
    }
    return NULL;
}

static void check_invariants(void)
{
    check_phase("invariants");
    weft_t u[NREAD + NWRITE];
    int n = 0;
    for (uintptr_t i = 0; i < NREAD; i++)
        u[n++] = spawn(rw_worker, (void *)(i * 2));
    for (uintptr_t i = 0; i < NWRITE; i++)
        u[n++] = spawn(rw_worker, (void *)(i * 2 + 1));
    pthread_t pr = start_pthread(rw_worker, (void *)1000);
    pthread_t pw = start_pthread(rw_worker, (void *)1001);
    for (int i = 0; i < n; i++)
        join(u[i]);
    join_pthread(pr);
    join_pthread(pw);
    long want = (long)(NWRITE + 1) * ITERS;
    CHECK(atomic_load(&writes_done) == want && shared_a == want && shared_b == want,
          "writes %ld, a %ld, b %ld, expected %ld", atomic_load(&writes_done), shared_a,
          shared_b, want);
}

/* ---- writer progress under continuous readers ---------------------------------- */

#define STARVE_READERS 8
#define READER_BUDGET SCALE(20000, 5000)

static weft_rwlock_t busy = WEFT_RWLOCK_INIT;
static atomic_int readers_started, readers_exhausted, writer_trying, writer_in;
static atomic_int exhausted_when_writer_in = -1;

/* Re-takes the read lock in a loop, holding it across a yield so that the
 * lock is never free. Its iteration budget only counts while the writer
 * waits for the lock. */
static void *greedy_reader(void *arg)
{
    (void)arg;
    atomic_fetch_add(&readers_started, 1);
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    for (int i = 0; i < READER_BUDGET;) {
        if (atomic_load(&writer_in))
            return NULL;
        CHECK_RC(weft_rwlock_rdlock(&busy), 0);
        weft_yield();
        CHECK_RC(weft_rwlock_unlock(&busy), 0);
        /* Counted only while the writer is queued on the lock (wq.n may be
         * peeked): the writer's vcore thread may lose its CPU for a while
         * between saying it tries and asking, and a budget spent then
         * proves nothing. */
        if (__atomic_load_n(&busy.wq.n, __ATOMIC_RELAXED))
            i++;
        else if (!atomic_load(&writer_trying))
            CHECK(weft_now_ns() < end, "the writer never started");
    }
    atomic_fetch_add(&readers_exhausted, 1);
    return NULL;
}

static void *patient_writer(void *arg)
{
    int timed = (int)(uintptr_t)arg;
    atomic_store(&writer_trying, 1);
    if (timed)
        CHECK_RC(weft_rwlock_timedwrlock(&busy, weft_now_ns() + WAIT_BOUND_NS), 0);
    else
        CHECK_RC(weft_rwlock_wrlock(&busy), 0);
    atomic_store(&exhausted_when_writer_in, atomic_load(&readers_exhausted));
    atomic_store(&writer_in, 1);
    CHECK_RC(weft_rwlock_unlock(&busy), 0);
    return NULL;
}

static void check_writer_progress(int timed)
{
    check_phase(timed ? "timed writer vs continuous readers" : "writer vs continuous readers");
    atomic_store(&readers_started, 0);
    atomic_store(&readers_exhausted, 0);
    atomic_store(&writer_trying, 0);
    atomic_store(&writer_in, 0);
    weft_t r[STARVE_READERS];
    for (int i = 0; i < STARVE_READERS; i++)
        r[i] = spawn(greedy_reader, NULL);
    WAIT_UNTIL(atomic_load(&readers_started) == STARVE_READERS, "readers started");
    weft_t w = spawn(patient_writer, (void *)(uintptr_t)timed);
    join(w);
    for (int i = 0; i < STARVE_READERS; i++)
        join(r[i]);
    CHECK(atomic_load(&exhausted_when_writer_in) == 0,
          "the writer only got in after %d readers used up %d iterations each (starved)",
          atomic_load(&exhausted_when_writer_in), READER_BUDGET);
}

/* ---- error rows ---------------------------------------------------------------------- */

struct holding {
    weft_rwlock_t *l;
    int write;
    atomic_int held, release;
};

static void *holder(void *arg)
{
    struct holding *h = arg;
    CHECK_RC(h->write ? weft_rwlock_wrlock(h->l) : weft_rwlock_rdlock(h->l), 0);
    atomic_store(&h->held, 1);
    WAIT_UNTIL(atomic_load(&h->release), "tester releases the holder");
    CHECK_RC(weft_rwlock_unlock(h->l), 0);
    return NULL;
}

static void expect_timeout(int write, weft_rwlock_t *l)
{
    uint64_t deadline = weft_now_ns() + MS(50);
    CHECK_RC(write ? weft_rwlock_timedwrlock(l, deadline) : weft_rwlock_timedrdlock(l, deadline),
             ETIMEDOUT);
    uint64_t now = weft_now_ns();
    CHECK(now >= deadline, "ETIMEDOUT %llu ns early", (unsigned long long)(deadline - now));
}

static void against_writer(weft_rwlock_t *l)
{
    CHECK_RC(weft_rwlock_tryrdlock(l), EBUSY);
    CHECK_RC(weft_rwlock_trywrlock(l), EBUSY);
    CHECK_RC(weft_rwlock_timedrdlock(l, 1), ETIMEDOUT);
    CHECK_RC(weft_rwlock_timedwrlock(l, 1), ETIMEDOUT);
    expect_timeout(0, l);
    expect_timeout(1, l);
    CHECK_RC(weft_rwlock_unlock(l), EPERM);   /* someone else's write lock */
    CHECK_RC(weft_rwlock_destroy(l), EBUSY);
}

static void against_reader(weft_rwlock_t *l)
{
    CHECK_RC(weft_rwlock_trywrlock(l), EBUSY);
    CHECK_RC(weft_rwlock_timedwrlock(l, 1), ETIMEDOUT);
    expect_timeout(1, l);
    /* the timed-out writer must not be left queued, blocking readers */
    CHECK_RC(weft_rwlock_tryrdlock(l), 0);
    CHECK_RC(weft_rwlock_unlock(l), 0);
    CHECK_RC(weft_rwlock_timedrdlock(l, 1), 0);
    CHECK_RC(weft_rwlock_unlock(l), 0);
    CHECK_RC(weft_rwlock_destroy(l), EBUSY);
}

static void own_rows(void)
{
    weft_rwlock_t l;
    CHECK_RC(weft_rwlock_init(&l), 0);
    CHECK_RC(weft_rwlock_unlock(&l), EPERM);
    CHECK_RC(weft_rwlock_timedrdlock(&l, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_rwlock_timedwrlock(&l, (uint64_t)-5), EINVAL);

    CHECK_RC(weft_rwlock_wrlock(&l), 0);
    CHECK_RC(weft_rwlock_wrlock(&l), EDEADLK);
    CHECK_RC(weft_rwlock_rdlock(&l), EDEADLK);
    CHECK_RC(weft_rwlock_timedwrlock(&l, WEFT_FOREVER), EDEADLK);
    int rc = weft_rwlock_trywrlock(&l);
    CHECK(rc == EDEADLK || rc == EBUSY, "trywrlock by the writer returned %d", rc);
    rc = weft_rwlock_tryrdlock(&l);
    CHECK(rc == EDEADLK || rc == EBUSY, "tryrdlock by the writer returned %d", rc);
    CHECK_RC(weft_rwlock_destroy(&l), EBUSY);
    CHECK_RC(weft_rwlock_unlock(&l), 0);
    CHECK_RC(weft_rwlock_unlock(&l), EPERM);

    CHECK_RC(weft_rwlock_rdlock(&l), 0);
    CHECK_RC(weft_rwlock_rdlock(&l), 0);      /* readers may nest */
    CHECK_RC(weft_rwlock_destroy(&l), EBUSY);
    CHECK_RC(weft_rwlock_unlock(&l), 0);
    CHECK_RC(weft_rwlock_unlock(&l), 0);
    CHECK_RC(weft_rwlock_unlock(&l), EPERM);
    CHECK_RC(weft_rwlock_trywrlock(&l), 0);
    CHECK_RC(weft_rwlock_unlock(&l), 0);
    CHECK_RC(weft_rwlock_destroy(&l), 0);
}

static void *rows(void *arg)
{
    (void)arg;
    own_rows();
    for (int write = 0; write < 2; write++) {
        for (int in_pthread = 0; in_pthread < 2; in_pthread++) {
            weft_rwlock_t l = WEFT_RWLOCK_INIT;
            struct holding h = { .l = &l, .write = write };
            pthread_t p;
            weft_t u = NULL;
            if (in_pthread)
                p = start_pthread(holder, &h);
            else
                u = spawn(holder, &h);
            WAIT_UNTIL(atomic_load(&h.held), "holder took the lock");
            if (write)
                against_writer(&l);
            else
                against_reader(&l);
            atomic_store(&h.release, 1);
            CHECK_RC(write ? weft_rwlock_rdlock(&l) : weft_rwlock_wrlock(&l), 0);
            CHECK_RC(weft_rwlock_unlock(&l), 0);
            if (in_pthread)
                join_pthread(p);
            else
                join(u);
            CHECK_RC(weft_rwlock_destroy(&l), 0);
        }
    }
    return (void *)1;
}

/* ---- timed waits (timed_wait.h) ------------------------------------------------- */

static weft_rwlock_t tw_rw = WEFT_RWLOCK_INIT;

static void tw_hold_w(void) { CHECK_RC(weft_rwlock_wrlock(&tw_rw), 0); }
static void tw_hold_r(void) { CHECK_RC(weft_rwlock_rdlock(&tw_rw), 0); }
static void tw_release(void) { CHECK_RC(weft_rwlock_unlock(&tw_rw), 0); }
static int tw_timed_r(uint64_t dl)
{
    int rc = weft_rwlock_timedrdlock(&tw_rw, dl);
    if (rc == 0)
        CHECK_RC(weft_rwlock_unlock(&tw_rw), 0);
    return rc;
}
static int tw_timed_w(uint64_t dl)
{
    int rc = weft_rwlock_timedwrlock(&tw_rw, dl);
    if (rc == 0)
        CHECK_RC(weft_rwlock_unlock(&tw_rw), 0);
    return rc;
}

static const struct tw_prim tw_prims[] = {
    { "rwlock_timedrdlock vs writer", tw_hold_w, tw_release, tw_timed_r },
    { "rwlock_timedwrlock vs reader", tw_hold_r, tw_release, tw_timed_w },
    { "rwlock_timedwrlock vs writer", tw_hold_w, tw_release, tw_timed_w },
};

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_table(rows);
    check_writer_progress(0);
    check_writer_progress(1);
    check_invariants();
    tw_check(tw_prims, (int)(sizeof tw_prims / sizeof tw_prims[0]));
    fprintf(stderr, "rwlock: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
