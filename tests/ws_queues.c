/*
 * ws_queues.c — white-box test of the ws scheduler's run queues
 * (src/sched/ws.c, compiled into this program): the owner's ring and its
 * spill keep FIFO order, a drained burst gives its spill back, a thief's
 * grab takes the oldest half, and an owner pushing and popping while a
 * thief grabs loses and duplicates nothing. With one vcore, a uthread that a
 * wake-up displaces from next runs right after next, ahead of older woken
 * uthreads, except every PREV_RUNS-th time, when it queues behind them.
 *
 * No runtime runs: the uthreads are bare scheduler links (all ws touches of
 * a uthread is weft_uthread_link(t)), and the queues are used from plain
 * threads, as vcores would use them. Run at 1 and all vcores like every
 * test; the vcore count does not matter here.
 */
#include "../src/sched/ws.c"

#include "check.h"

#include <sched.h>

static struct weft_sched_link *links;

static struct weft_uthread *U(size_t i)
{
    return (struct weft_uthread *)(void *)&links[i];
}

static size_t idx(struct weft_uthread *t)
{
    return (size_t)((struct weft_sched_link *)(void *)t - links);
}

/* FIFO through the ring and its spill, and the spill unmapped after a
 * burst larger than 4 * RING. */
static void case_fifo(void)
{
    check_phase("FIFO through ring and spill");
    const size_t n = 5 * RING + 17;
    struct vq *q = &vqs[0];
    for (size_t i = 0; i < n; i++)
        q_push(q, W, U(i));
    CHECK(ring_len(q, W) == RING, "ring holds %u, not %u", ring_len(q, W), RING);
    CHECK(q->spill[W].n == n - RING, "spill holds %u, not %zu", q->spill[W].n, n - RING);
    CHECK(q->spill[W].cap >= n - RING && (q->spill[W].cap & (q->spill[W].cap - 1)) == 0,
          "spill capacity %u", q->spill[W].cap);
    for (size_t i = 0; i < n; i++) {
        struct weft_uthread *t = q_pop(q, W);
        CHECK(t == U(i), "pop %zu gave %zd", i, t ? (ssize_t)idx(t) : (ssize_t)-1);
    }
    CHECK(q_pop(q, W) == NULL, "a drained queue gave a uthread");
    CHECK(q->spill[W].v == NULL && q->spill[W].cap == 0,
          "the spill of a drained burst of %zu is still mapped (capacity %u)", n, q->spill[W].cap);

    /* A small overflow keeps its array for the next one. */
    for (size_t i = 0; i < RING + 3; i++)
        q_push(q, P, U(i));
    for (size_t i = 0; i < RING + 3; i++)
        CHECK(q_pop(q, P) == U(i), "paused ring: pop %zu out of order", i);
    CHECK(q_pop(q, P) == NULL && q->spill[P].n == 0 && q->spill[P].v != NULL,
          "a small spill was not kept (n %u)", q->spill[P].n);
}

/* A thief's grab takes the oldest half (rounded up): the first returned,
 * the rest in its own ring; the victim keeps the newer half. */
static void case_grab(void)
{
    check_phase("a grab takes the oldest half");
    struct vq *v = &vqs[0], *q = &vqs[1];
    for (size_t i = 0; i < 10; i++)
        q_push(v, W, U(i));
    struct weft_uthread *first = ring_grab(v, q, W);
    CHECK(first == U(0), "the grab's first is %zd", first ? (ssize_t)idx(first) : (ssize_t)-1);
    CHECK(ring_len(q, W) == 4 && ring_len(v, W) == 5,
          "after a grab of 10: thief %u, victim %u (want 4 and 5)", ring_len(q, W),
          ring_len(v, W));
    for (size_t i = 1; i < 5; i++)
        CHECK(q_pop(q, W) == U(i), "thief's pop %zu", i);
    for (size_t i = 5; i < 10; i++)
        CHECK(q_pop(v, W) == U(i), "victim's pop %zu", i);
    CHECK(ring_grab(v, q, W) == NULL, "a grab from an empty ring");

    /* Thieves see only the ring: with a spill behind it they get the oldest
     * RING, and the victim's spill refills its ring in order. */
    const size_t n = 3 * RING;
    for (size_t i = 0; i < n; i++)
        q_push(v, W, U(i));
    first = ring_grab(v, q, W);
    CHECK(first == U(0), "grab with a spill: first %zd", first ? (ssize_t)idx(first) : (ssize_t)-1);
    size_t got = 1 + ring_len(q, W);
    CHECK(got == RING / 2, "grab with a spill took %zu, not %u", got, RING / 2);
    for (size_t i = 1; i < got; i++)
        CHECK(q_pop(q, W) == U(i), "thief's pop %zu", i);
    for (size_t i = got; i < n; i++)
        CHECK(q_pop(v, W) == U(i), "victim's pop %zu after a grab", i);
    CHECK(q_pop(v, W) == NULL, "victim not empty");
}

/* Owner and thief at once: every uthread is taken exactly once. */
static size_t race_n;
static _Atomic unsigned char *taken;
static atomic_int owner_done;
static atomic_size_t thief_took;

static void take_one(struct weft_uthread *t, const char *who)
{
    size_t i = idx(t);
    CHECK(i < race_n, "%s took a uthread that was never queued", who);
    unsigned char was = atomic_fetch_add_explicit(&taken[i], 1, memory_order_relaxed);
    if (who[0] == 't')
        atomic_fetch_add_explicit(&thief_took, 1, memory_order_relaxed);
    CHECK(was == 0, "uthread %zu taken twice (the second by the %s)", i, who);
}

static atomic_int thief_running;

static void *thief(void *unused)
{
    (void)unused;
    struct vq *v = &vqs[0], *q = &vqs[1];
    atomic_store(&thief_running, 1);
    for (;;) {
        bool done = atomic_load(&owner_done);
        struct weft_uthread *t = ring_grab(v, q, W);
        if (t) {
            take_one(t, "thief");
            while ((t = q_pop(q, W)) != NULL)
                take_one(t, "thief");
        } else if (done) {
            return NULL;
        }
    }
}

static void case_race(void)
{
    check_phase("owner and thief at once");
    race_n = SCALE(400000, 40000);
    taken = calloc(race_n, 1);
    CHECK(taken != NULL, "calloc");
    pthread_t th = start_pthread(thief, NULL);
    while (!atomic_load(&thief_running))
        sched_yield();
    struct vq *q = &vqs[0];
    for (size_t i = 0; i < race_n; i++) {
        q_push(q, W, U(i));
        if (i & 1) { /* the owner runs every other one itself: the queue stays short */
            struct weft_uthread *t = q_pop(q, W);
            if (t)
                take_one(t, "owner");
        }
    }
    atomic_store(&owner_done, 1);
    struct weft_uthread *t;
    while ((t = q_pop(q, W)) != NULL)
        take_one(t, "owner");
    join_pthread(th);
    size_t missing = 0;
    for (size_t i = 0; i < race_n; i++)
        missing += atomic_load_explicit(&taken[i], memory_order_relaxed) == 0;
    CHECK(missing == 0, "%zu of %zu uthreads were never taken", missing, race_n);
    free((void *)taken);
}

static size_t idx_or(struct weft_uthread *t)
{
    return t ? idx(t) : (size_t)-1;
}

/* One vcore: the displaced uthread waits in prev, ahead of the woken ring,
 * and every PREV_RUNS-th run from there goes behind the woken ring. */
static void case_prev(void)
{
    check_phase("one vcore: a displaced next runs next, within its bound");
    fini_ws();
    CHECK_RC(init_ws(1), 0);
    CHECK(solo, "one queue: solo");
    struct vq *q = &vqs[0];
    const size_t a = 0, b = 1, old0 = 100, old1 = 101;
    size_t ids[] = { a, b, old0, old1 };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        links[ids[i]] = (struct weft_sched_link){ .vcore = 0, .waker = 0, .by_uthread = 1,
                                                  .sched_flags = WS_RAN };
    q_push(q, W, U(old0)); /* woken earlier from vcore context */
    q_push(q, W, U(old1));
    for (unsigned r = 0; r < PREV_RUNS; r++) {
        thread_runnable_ws(U(a)); /* a uthread wakes a, then b, and blocks */
        thread_runnable_ws(U(b));
        size_t first = idx_or(take_local_ws(0)), second = idx_or(take_local_ws(0));
        CHECK(first == b, "round %u: %zd ran first, not the last woken", r, (ssize_t)first);
        if (r + 1 < PREV_RUNS) {
            CHECK(second == a, "round %u: %zd ran second, not the displaced uthread", r,
                  (ssize_t)second);
            continue;
        }
        CHECK(second == old0, "run %u from prev (%zd ran) did not go behind the woken ring",
              PREV_RUNS, (ssize_t)second);
        size_t third = idx_or(take_local_ws(0)), fourth = idx_or(take_local_ws(0));
        CHECK(third == old1 && fourth == a, "then %zd and %zd ran (want %zu, %zu)",
              (ssize_t)third, (ssize_t)fourth, old1, a);
    }
    CHECK(take_local_ws(0) == NULL && prev_of(q) == NULL, "the queues are not empty");
    /* The bound restarts: the next displaced one runs second again. */
    thread_runnable_ws(U(a));
    thread_runnable_ws(U(b));
    CHECK(take_local_ws(0) == U(b) && take_local_ws(0) == U(a), "after the bound: not b, a");
}

/* Two vcores: prev only while the woken ring holds others a thief can take
 * (else the displaced uthread itself must be stealable), and thieves count
 * it as hidden work. */
static void case_prev_thieves(void)
{
    check_phase("two vcores: prev only beside stealable work");
    fini_ws();
    CHECK_RC(init_ws(2), 0);
    struct vq *q = &vqs[0], *thief = &vqs[1];
    const size_t a = 0, b = 1, old0 = 100;
    size_t ids[] = { a, b, old0 };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        links[ids[i]] = (struct weft_sched_link){ .vcore = 0, .waker = 0, .by_uthread = 1,
                                                  .sched_flags = WS_RAN };
    thread_runnable_ws(U(a));
    thread_runnable_ws(U(b)); /* the woken ring is empty: a goes there */
    CHECK(prev_of(q) == NULL && ring_len(q, W) == 1, "with nothing else queued, a went to "
          "prev (%zd) or not to the woken ring (%u)", (ssize_t)idx_or(prev_of(q)), ring_len(q, W));
    CHECK(ring_grab(q, thief, W) == U(a), "a thief could not take the displaced uthread");
    CHECK(take_local_ws(0) == U(b) && take_local_ws(0) == NULL, "the owner's queue: not b alone");
    q_push(q, W, U(old0));
    thread_runnable_ws(U(a));
    thread_runnable_ws(U(b)); /* old0 is there for thieves: a waits in prev */
    CHECK(prev_of(q) == U(a) && hidden(q), "beside stealable work, a is not in prev (%zd)",
          (ssize_t)idx_or(prev_of(q)));
    size_t r1 = idx_or(take_local_ws(0)), r2 = idx_or(take_local_ws(0)), r3 = idx_or(take_local_ws(0));
    CHECK(r1 == b && r2 == a && r3 == old0, "ran %zd, %zd, %zd (want b, a, the older one)",
          (ssize_t)r1, (ssize_t)r2, (ssize_t)r3);
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    links = calloc(5 * RING + 17 > 400000 ? 5 * RING + 17 : 400000, sizeof *links);
    CHECK(links != NULL, "calloc");
    CHECK_RC(init_ws(2), 0);
    CHECK(!solo, "two queues: thieves possible");
    case_fifo();
    case_grab();
    case_race();
    case_prev();
    case_prev_thieves();
    fini_ws();
    free(links);
    printf("ws_queues: ok (the thief took %zu of %zu in the race)\n", atomic_load(&thief_took),
           race_n);
    return 0;
}
