/*
 * spin_preempt — a uthread holding a weft_spinlock_t is not preempted.
 *
 * Proves: with preemption every millisecond, a uthread that holds a
 * weft_spinlock_t for 30 ms of computation keeps its vcore (the preemption
 * is deferred, and counted so), and a second uthread on the same vcore that
 * wants the lock gets it once the holder lets go. Before the fix the holder
 * was preempted, the waiter spun in weft's lock (where nothing preempts it)
 * and the vcore never ran the holder again: the check below timed out.
 */
#include "check.h"

#include <weft/event.h>
#include <weft/sched.h>

static weft_spinlock_t lock = WEFT_SPINLOCK_INIT;
static atomic_int held, waiter_in, released, waiter_done;

static void *holder(void *arg)
{
    (void)arg;
    weft_spin_lock(&lock);
    atomic_store(&held, 1);
    uint64_t until = weft_now_ns() + MS(30);
    while (weft_now_ns() < until) /* computation the clock would preempt */
        ;
    CHECK(atomic_load(&waiter_in) == 0, "the waiter ran on our vcore while we held the lock");
    atomic_store(&released, 1);
    weft_spin_unlock(&lock);
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    atomic_store(&waiter_in, 1);
    weft_spin_lock(&lock);
    CHECK(atomic_load(&released), "took the lock while the holder had it");
    weft_spin_unlock(&lock);
    atomic_store(&waiter_done, 1);
    return NULL;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    struct weft_config c = { .preempt_us = 1000 };
    CHECK_RC(weft_init(&c), 0);
    struct weft_vcore_stats s0, s1;
    CHECK_RC(weft_stats(0, &s0), 0);
    weft_t h = spawn_ex(holder, NULL, WEFT_PINNED, 0, "holder");
    uint64_t t0 = weft_now_ns();
    while (!atomic_load(&held))
        CHECK(weft_now_ns() - t0 < MS(5000), "the holder did not start");
    weft_t w = spawn_ex(waiter, NULL, WEFT_PINNED, 0, "waiter");
    t0 = weft_now_ns();
    while (!atomic_load(&waiter_done)) {
        CHECK(weft_now_ns() - t0 < SCALE(MS(5000), MS(20000)),
              "the waiter never got the lock (held %d, released %d, waiter in %d): the holder "
              "was preempted and the waiter spins on its vcore",
              atomic_load(&held), atomic_load(&released), atomic_load(&waiter_in));
        weft_sleep_ns(MS(1));
    }
    join(h);
    join(w);
    CHECK_RC(weft_stats(0, &s1), 0);
    CHECK(s1.preempt_deferred > s0.preempt_deferred,
          "no preemption was deferred in 30 ms of holding with a 1 ms period");
    fprintf(stderr, "spin_preempt: ok (%d vcores; %llu preemptions deferred while held)\n",
            weft_num_vcores(), (unsigned long long)(s1.preempt_deferred - s0.preempt_deferred));
    weft_shutdown();
    return 0;
}
