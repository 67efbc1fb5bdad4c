/*
 * futex — weft_futex_wait / weft_futex_wake.
 *
 * Proves: wait returns EAGAIN at once when *addr != val (even with no
 * deadline), ETIMEDOUT for a past deadline and for a short one (never
 * early), EINVAL for NULL, misaligned addresses and top-bit deadlines; wake
 * with nobody waiting or n <= 0 returns 0; ping-pong through one word
 * between uthreads on different vcores and between a pthread and a uthread
 * loses no wake-up; wake(n) returns exactly how many it woke (every woken
 * waiter is accounted for, none twice); with all waiters parked on one
 * vcore, wake(2) wakes exactly 2 and wakes go oldest first; the timed-wait
 * checks of timed_wait.h.
 */
#include "check.h"
#include "timed_wait.h"

static void *rows(void *arg)
{
    (void)arg;
    static _Alignas(8) uint32_t words[2];
    uint32_t *w = &words[0];
    *w = 5;
    CHECK_RC(weft_futex_wait(w, 4, WEFT_FOREVER), EAGAIN);
    CHECK_RC(weft_futex_wait(w, 4, 1), EAGAIN);
    CHECK_RC(weft_futex_wait(w, 5, 1), ETIMEDOUT);
    uint64_t deadline = weft_now_ns() + MS(50);
    CHECK_RC(weft_futex_wait(w, 5, deadline), ETIMEDOUT);
    uint64_t now = weft_now_ns();
    CHECK(now >= deadline, "ETIMEDOUT %llu ns early", (unsigned long long)(deadline - now));

    CHECK_RC(weft_futex_wait(NULL, 0, 1), EINVAL);
    uint32_t *odd = (uint32_t *)(void *)((char *)words + 1);
    CHECK_RC(weft_futex_wait(odd, 0, 1), EINVAL);
    odd = (uint32_t *)(void *)((char *)words + 2);
    CHECK_RC(weft_futex_wait(odd, 0, 1), EINVAL);
    CHECK_RC(weft_futex_wait(w, 5, (uint64_t)-5), EINVAL);
    CHECK_RC(weft_futex_wait(w, 5, (uint64_t)1 << 63), EINVAL);

    CHECK_RC(weft_futex_wake(w, 1), 0);
    CHECK_RC(weft_futex_wake(w, 0), 0);
    CHECK_RC(weft_futex_wake(w, -3), 0);
    return (void *)1;
}

/* ---- ping-pong ------------------------------------------------------------------- */

#define ROUNDS SCALE(20000, 3000)
static _Alignas(4) uint32_t seq;

static void *player(void *arg)
{
    uint32_t me = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 0; i < ROUNDS; i++) {
        uint32_t want = 2 * i + me, v;
        while ((v = __atomic_load_n(&seq, __ATOMIC_ACQUIRE)) != want) {
            CHECK(v < want, "seq %u ran past %u", v, want);
            int rc = weft_futex_wait(&seq, v, WEFT_FOREVER);
            CHECK(rc == 0 || rc == EAGAIN, "futex_wait returned %d", rc);
        }
        __atomic_store_n(&seq, want + 1, __ATOMIC_RELEASE);
        int n = weft_futex_wake(&seq, 1);
        CHECK(n == 0 || n == 1, "wake(1) returned %d", n);
    }
    return NULL;
}

static void check_ping_pong(void)
{
    check_phase("ping-pong between uthreads on two vcores");
    int nv = weft_num_vcores();
    seq = 0;
    weft_t a = spawn_ex(player, (void *)0, WEFT_ON_VCORE, 0, "ping");
    weft_t b = spawn_ex(player, (void *)1, WEFT_ON_VCORE, nv - 1, "pong");
    join(a);
    join(b);
    CHECK(seq == 2 * ROUNDS, "seq %u", seq);

    check_phase("ping-pong between a pthread and a uthread");
    seq = 0;
    pthread_t p = start_pthread(player, (void *)0);
    weft_t u = spawn(player, (void *)1);
    join(u);
    join_pthread(p);
    CHECK(seq == 2 * ROUNDS, "seq %u", seq);
}

/* ---- wake counts --------------------------------------------------------------------- */

#define K 10
static _Alignas(4) uint32_t gate;
static atomic_int arrived, woken, order_next;
static int order[K];

static void *gate_waiter(void *arg)
{
    int idx = (int)(uintptr_t)arg;
    atomic_fetch_add(&arrived, 1);
    CHECK_RC(weft_futex_wait(&gate, 0, WEFT_FOREVER), 0);   /* gate stays 0: no EAGAIN */
    order[atomic_fetch_add(&order_next, 1)] = idx;
    atomic_fetch_add(&woken, 1);
    return NULL;
}

static void reset_gate(void)
{
    gate = 0;
    atomic_store(&arrived, 0);
    atomic_store(&woken, 0);
    atomic_store(&order_next, 0);
}

/* Unpinned waiters: one may not be queued yet when we wake, so retry, but
 * every return value must be matched by a waiter that really woke. */
static void check_wake_counts(void)
{
    check_phase("wake(n) counts, unpinned waiters");
    reset_gate();
    weft_t t[K];
    for (int i = 0; i < K; i++)
        t[i] = spawn(gate_waiter, (void *)(uintptr_t)i);
    WAIT_UNTIL(atomic_load(&arrived) == K, "waiters arrived");
    CHECK_RC(weft_futex_wake(&gate, 0), 0);
    CHECK_RC(weft_futex_wake(&gate, -1), 0);
    int total = 0;
    uint64_t end = weft_now_ns() + WAIT_BOUND_NS;
    for (unsigned i = 0; total < K; i++) {
        int r = weft_futex_wake(&gate, 3);
        CHECK(r >= 0 && r <= 3, "wake(3) returned %d", r);
        total += r;
        if (atomic_load(&woken) == K && total < K)
            break;   /* everyone is up, but the returns do not add up */
        CHECK(weft_now_ns() < end, "only %d of %d woken", total, K);
        if (total < K)
            check_nap(i);
    }
    for (int i = 0; i < K; i++)
        join(t[i]);
    CHECK(total == K && atomic_load(&woken) == K,
          "wake returns add up to %d, %d waiters woke", total, atomic_load(&woken));
    CHECK_RC(weft_futex_wake(&gate, K), 0);
}

/* Everything on vcore 0: our sleep lets every waiter run until it blocks. */
static void *exact_wakes(void *arg)
{
    (void)arg;
    reset_gate();
    weft_t t[K];
    for (int i = 0; i < K; i++)
        t[i] = spawn_ex(gate_waiter, (void *)(uintptr_t)i, WEFT_PINNED, 0, NULL);
    WAIT_UNTIL(atomic_load(&arrived) == K, "waiters arrived");
    weft_sleep_ns(MS(20));
    CHECK_RC(weft_futex_wake(&gate, 2), 2);
    WAIT_UNTIL(atomic_load(&woken) == 2, "two woken");
    for (int i = 2; i < K; i++) {
        CHECK_RC(weft_futex_wake(&gate, 1), 1);
        WAIT_UNTIL(atomic_load(&woken) == i + 1, "next woken");
    }
    CHECK_RC(weft_futex_wake(&gate, 5), 0);
    for (int i = 0; i < K; i++)
        join(t[i]);
    /* the first two may log in either order; the rest come oldest first */
    CHECK((order[0] == 0 && order[1] == 1) || (order[0] == 1 && order[1] == 0),
          "first wake(2) woke %d and %d, not the two oldest", order[0], order[1]);
    for (int i = 2; i < K; i++)
        CHECK(order[i] == i, "wake %d woke waiter %d: not oldest first", i, order[i]);
    return NULL;
}

/* ---- timed waits (timed_wait.h) ------------------------------------------------- */

static uint32_t tw_word;

static void tw_futex_hold(void) { __atomic_store_n(&tw_word, 0, __ATOMIC_SEQ_CST); }
static void tw_futex_release(void)
{
    __atomic_store_n(&tw_word, 1, __ATOMIC_SEQ_CST);
    weft_futex_wake(&tw_word, 1 << 30);
}
static int tw_futex_timed(uint64_t dl)
{
    for (;;) {
        int rc = weft_futex_wait(&tw_word, 0, dl);
        if (rc == EAGAIN || __atomic_load_n(&tw_word, __ATOMIC_SEQ_CST) != 0)
            return 0;
        if (rc != 0)
            return rc;
    }
}

static const struct tw_prim tw_prims[] = {
    { "futex_wait", tw_futex_hold, tw_futex_release, tw_futex_timed },
};

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_table(rows);
    check_ping_pong();
    check_wake_counts();
    check_phase("exact wake counts on one vcore");
    join(spawn_ex(exact_wakes, NULL, WEFT_PINNED, 0, NULL));
    tw_check(tw_prims, 1);
    fprintf(stderr, "futex: ok (%d vcores)\n", weft_num_vcores());
    weft_shutdown();
    return 0;
}
