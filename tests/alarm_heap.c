/*
 * alarm_heap.c — white-box test of a vcore's alarm heap (src/alarm.c,
 * struct weft__heap in src/internal.h), read under its lock while the
 * public calls change it: after every start, stop and reset the heap is a
 * min-heap on deadline, every alarm's idx is its slot, heap->min is the
 * root's deadline (UINT64_MAX when empty), and exactly the started, not
 * stopped alarms are on it; it grows past its first 64 slots; alarms due
 * fire once each, never early, in deadline order (one vcore).
 *
 * The uthread that does this is pinned to vcore 0, so every alarm it
 * starts goes to vcore 0's heap.
 */
#include "check.h"

#include "../src/internal.h"

#define N 2000

static struct weft_alarm al[N];
static bool on[N];                     /* started and not stopped (ours to know) */
static _Atomic uint64_t fired_at[N];   /* when its callback ran, 0 if never */
static _Atomic int fired_order[N];     /* alarm index by firing rank */
static atomic_int nfired;

static void cb(struct weft_alarm *a)
{
    int i = (int)(a - al);
    uint64_t was = atomic_exchange(&fired_at[i], weft_now_ns());
    CHECK(was == 0, "alarm %d fired twice", i);
    atomic_store(&fired_order[atomic_fetch_add(&nfired, 1)], i);
}

/* check_heap() checks vcore 0's heap against on[]. */
static void check_heap(const char *when)
{
    struct weft__heap *h = &weft__rt.vcores[0].heap;
    weft__spin_lock(&h->lock);
    int want = 0;
    for (int i = 0; i < N; i++)
        want += on[i];
    int n = h->n;
    bool ok_n = n == want, ok_cap = n <= h->cap, ok_min = true, ok_idx = true, ok_order = true,
         ok_members = true;
    for (int i = 0; i < n; i++) {
        struct weft_alarm *a = h->v[i];
        if (a->idx != i)
            ok_idx = false;
        if (i > 0 && h->v[(i - 1) / 2]->deadline > a->deadline)
            ok_order = false;
        int k = (int)(a - al);
        if (k < 0 || k >= N || !on[k])
            ok_members = false;
    }
    uint64_t min = atomic_load_explicit(&h->min, memory_order_relaxed);
    ok_min = n ? min == h->v[0]->deadline : min == UINT64_MAX;
    weft__spin_unlock(&h->lock);
    CHECK(ok_n, "%s: %d alarms on the heap, %d started", when, n, want);
    CHECK(ok_cap, "%s: n %d beyond capacity", when, n);
    CHECK(ok_idx, "%s: an alarm's idx is not its slot", when);
    CHECK(ok_order, "%s: a parent's deadline is later than its child's", when);
    CHECK(ok_members, "%s: an alarm on the heap that was not started (or was stopped)", when);
    CHECK(ok_min, "%s: heap->min %llu, not the root's deadline", when, (unsigned long long)min);
}

static void *body(void *unused)
{
    (void)unused;
    uint32_t seed = 7;
    uint64_t far = weft_now_ns() + 3600ull * 1000000000ull; /* never due in this test */

    check_phase("start N far alarms");
    for (int i = 0; i < N; i++) {
        weft_alarm_init(&al[i], cb);
        CHECK_RC(weft_alarm_set_abs(&al[i], far + check_rand(&seed) % 1000000000u), 0);
        CHECK_RC(weft_alarm_start(&al[i]), 0);
        on[i] = true;
        if (i % 97 == 0 || i == N - 1)
            check_heap("after a start");
    }
    CHECK(weft__rt.vcores[0].heap.cap >= N, "the heap did not grow");
    CHECK_RC(weft_alarm_start(&al[0]), EBUSY);

    check_phase("stop a random half");
    for (int k = 0; k < N / 2; k++) {
        int i = (int)(check_rand(&seed) % N);
        CHECK(weft_alarm_stop(&al[i]) == on[i], "stop of alarm %d: wrong answer", i);
        on[i] = false;
        if (k % 53 == 0)
            check_heap("after a stop");
    }
    check_heap("after the stops");

    check_phase("reset some to near deadlines");
    /* Every 4th alarm (on the heap or not) becomes due soon, each at a
     * distinct deadline, in an order unrelated to its index. */
    uint64_t base = weft_now_ns() + MS(SCALE(50, 500)); /* none due before the last reset */
    int due = 0;
    for (int i = 0; i < N; i += 4) {
        uint64_t d = base + (uint64_t)((i * 7919) % N) * 1000u; /* distinct: 7919 is prime */
        bool was = weft_alarm_reset_abs(&al[i], d);
        CHECK(was == on[i], "reset of alarm %d said %d", i, was);
        on[i] = true;
        due++;
    }
    check_heap("after the resets");

    check_phase("the due alarms fire");
    WAIT_UNTIL(atomic_load(&nfired) == due, "every due alarm fired");
    for (int i = 0; i < N; i += 4) {
        uint64_t at = atomic_load(&fired_at[i]);
        CHECK(at >= al[i].deadline, "alarm %d fired %llu ns early", i,
              (unsigned long long)(al[i].deadline - at));
        on[i] = false;
    }
    if (weft_num_vcores() == 1) /* with more, an idle vcore may run some at once */
        for (int r = 1; r < due; r++) {
            int a = atomic_load(&fired_order[r - 1]), b = atomic_load(&fired_order[r]);
            CHECK(al[a].deadline < al[b].deadline, "fired out of deadline order at rank %d", r);
        }
    check_heap("after the firing");

    check_phase("stop the rest");
    for (int i = 0; i < N; i++) {
        CHECK(weft_alarm_stop(&al[i]) == on[i], "final stop of alarm %d", i);
        on[i] = false;
    }
    check_heap("empty");
    CHECK(atomic_load(&nfired) == due, "%d alarms fired, %d were due", atomic_load(&nfired), due);
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    CHECK_RC(weft_init(NULL), 0);
    CHECK(join(spawn_ex(body, NULL, WEFT_PINNED, 0, "heap")) == (void *)1, "body");
    weft_shutdown();
    printf("alarm_heap: ok\n");
    return 0;
}
