/*
 * displaced — at one vcore, a uthread that a wake-up moves out of the
 * vcore's next slot runs right after the uthread now in next, ahead of
 * uthreads queued before it (ws: its prev slot; prio: the front of its
 * level), so a group of uthreads that keep waking each other runs on while
 * its state is in the cache.
 *
 * A uthread M at one vcore (forced: the order is the one-vcore policy; at
 * several vcores a displaced uthread with nothing else queued goes where a
 * thief can take it) spawns S1 (it lands in next) and S2 (queued behind:
 * next is full), then wakes parked A (A takes next, S1 is displaced) and
 * parked B (B takes next, A is displaced: the slot ahead of the queue is
 * taken, so A queues behind S2), and blocks. Proves the order B, S1, S2, A
 * (before prev: B, S2, S1, A). Run with ws and with prio (WEFT_SCHED).
 *
 * Then the same at two vcores, M pinned to vcore 0 and vcore 1 held by a
 * pinned uthread that spins without a scheduling point until M is done, so
 * that no thief takes anything: with S2 queued where a thief could take it,
 * the displaced S1 still runs second (ws: prev; prio: its front slot, where
 * before it queued behind S2 under the lock, and A behind it).
 */
#include "check.h"

enum { S1, S2, A, B, N };
static const char *const names[N] = { "S1", "S2", "A", "B" };

static atomic_int seq = 0;
static int order[N];
static atomic_int parked = 0;
static atomic_bool go[N];

static void *spawned(void *arg)
{
    int who = (int)(intptr_t)arg;
    order[who] = atomic_fetch_add(&seq, 1);
    return NULL;
}

static void *parker(void *arg)
{
    int who = (int)(intptr_t)arg;
    atomic_fetch_add(&parked, 1);
    while (!atomic_load(&go[who]))
        CHECK_RC(weft_park(), 0);
    order[who] = atomic_fetch_add(&seq, 1);
    return NULL;
}

static atomic_bool holding, released;

/* holder() keeps its vcore from making any decision until released. */
static void *holder(void *arg)
{
    (void)arg;
    atomic_store(&holding, true);
    while (!atomic_load_explicit(&released, memory_order_relaxed))
        spin_work(16);
    return NULL;
}

static void *m_main(void *arg)
{
    (void)arg;
    weft_t t[N];
    CHECK_RC(weft_spawn(&t[A], NULL, parker, (void *)(intptr_t)A), 0);
    CHECK_RC(weft_spawn(&t[B], NULL, parker, (void *)(intptr_t)B), 0);
    while (atomic_load(&parked) < 2) /* A and B run once and park */
        weft_yield();
    for (int i = 0; i < 100; i++) /* and are parked, not on their way */
        weft_yield();
    CHECK_RC(weft_spawn(&t[S1], NULL, spawned, (void *)(intptr_t)S1), 0);
    CHECK_RC(weft_spawn(&t[S2], NULL, spawned, (void *)(intptr_t)S2), 0);
    CHECK(atomic_load(&seq) == 0, "a uthread ran before M blocked");
    atomic_store(&go[A], true);
    CHECK_RC(weft_unpark(t[A]), 0);
    atomic_store(&go[B], true);
    CHECK_RC(weft_unpark(t[B]), 0);
    for (int i = 0; i < N; i++)
        CHECK_RC(weft_join(t[i], NULL), 0);
    return NULL;
}

static void check_order(void)
{
    const int want[N] = { [B] = 0, [S1] = 1, [S2] = 2, [A] = 3 };
    for (int i = 0; i < N; i++)
        CHECK(order[i] == want[i], "%s ran %d-th (want %d-th): order S1 %d, S2 %d, A %d, B %d",
              names[i], order[i] + 1, want[i] + 1, order[S1] + 1, order[S2] + 1, order[A] + 1,
              order[B] + 1);
}

static void reset(void)
{
    atomic_store(&seq, 0);
    atomic_store(&parked, 0);
    for (int i = 0; i < N; i++) {
        order[i] = -1;
        atomic_store(&go[i], false);
    }
}

int main(void)
{
    check_watchdog(60);
    struct weft_config c = { .vcores = 1 };
    CHECK_RC(weft_init(&c), 0);
    check_phase("the displaced uthread runs second");
    reset();
    weft_t m;
    CHECK_RC(weft_spawn(&m, NULL, m_main, NULL), 0);
    CHECK_RC(weft_join(m, NULL), 0);
    check_order();
    weft_shutdown();

    check_phase("two vcores, no thief: the displaced uthread runs second");
    c.vcores = 2;
    CHECK_RC(weft_init(&c), 0);
    reset();
    weft_t h;
    weft_attr_t on1 = { .flags = WEFT_PINNED, .vcore = 1 }, on0 = { .flags = WEFT_PINNED, .vcore = 0 };
    CHECK_RC(weft_spawn(&h, &on1, holder, NULL), 0);
    while (!atomic_load(&holding))
        spin_work(16);
    CHECK_RC(weft_spawn(&m, &on0, m_main, NULL), 0);
    CHECK_RC(weft_join(m, NULL), 0);
    atomic_store(&released, true);
    CHECK_RC(weft_join(h, NULL), 0);
    check_order();
    weft_shutdown();
    printf("displaced: ok (B, S1, S2, A, at one vcore and at two)\n");
    return 0;
}
