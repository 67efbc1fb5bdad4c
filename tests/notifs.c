/*
 * notifs — holding notifications off: weft_notifs_disable/enable/depth.
 *
 * Proves:
 *  (a) outside a uthread disable and enable are no-ops returning 0 (also an
 *      enable without a disable) and the depth is 0; in a uthread, enable
 *      without a disable is EPERM and changes nothing, and disabled regions
 *      nest (depth 0, 1, 2, 1, 0).
 *  (b) a uthread that has disabled twice and spins (no blocking) gets no
 *      handler run for messages sent to its vcore meanwhile — by main (an
 *      outside kernel thread), by itself, and by a uthread pinned to another
 *      vcore (2+ vcores) — not during 50 ms of spinning and not at the inner
 *      enable; when the outermost enable returns every message has been
 *      handled exactly once, in the order sent, on that vcore, in vcore
 *      context; no second delivery follows (20 ms more, with yields).
 *  (c) with notifications enabled, a message to the vcore of a uthread
 *      spinning in a loop without calls (under TSan: a loop calling
 *      weft_now_ns(), a weft safe point) is handled within 1 s while it
 *      keeps spinning: the signal interrupts it, the vcore's notifs counter
 *      grows (not under TSan) and the uthread resumes on the same vcore.
 *  (d) with a 1 ms preemption period, a uthread with notifications disabled
 *      that spins for 20 ms is not preempted: a yielding uthread on the same
 *      vcore does not run, the uthread stays on its vcore and the vcore's
 *      preempt_deferred grows; its outermost enable takes the pending
 *      preemption: the other uthread has run when it returns, and
 *      preempt_taken grows.
 *  (e) 2+ vcores: while disabled, a uthread that sleeps and yields 200 times
 *      (its vcore kept busy by a pinned yielder, the others idle and
 *      stealing) never changes vcore. (How often it moved with notifications
 *      enabled is printed, to show the check has teeth.)
 */
#include "check.h"

#include <weft/event.h>

#define T_NOTE (WEFT_EV_USER + 1)
#define PAYLOAD(k) ((uintptr_t)0x5eed0000u + (uintptr_t)(k))
#define MAXMSG 8
#define BOUND_NS SCALE(MS(10000), MS(60000))
#define PROMPT_NS SCALE(MS(1000), MS(5000))

static int note_cookie;
static atomic_int note_count, note_bad_arg, note_in_uthread;
static atomic_int note_vcore[MAXMSG];
static atomic_uintptr_t note_payload[MAXMSG];
static int pin_flags;   /* WEFT_PINNED with 2+ vcores */

static void note_handler(unsigned type, uintptr_t payload, void *arg)
{
    if (type != T_NOTE || arg != &note_cookie)
        atomic_store(&note_bad_arg, 1);
    if (weft_self() != NULL)
        atomic_store(&note_in_uthread, 1);
    int i = atomic_load(&note_count);
    if (i < MAXMSG) {
        atomic_store(&note_vcore[i], weft_vcore_id());
        atomic_store(&note_payload[i], payload);
    }
    atomic_fetch_add(&note_count, 1);
}

static void reset_notes(void)
{
    atomic_store(&note_count, 0);
    for (int i = 0; i < MAXMSG; i++) {
        atomic_store(&note_vcore[i], -2);
        atomic_store(&note_payload[i], 0);
    }
}

/* check_notes() checks that n messages PAYLOAD(0..n-1) were handled once each,
 * in order, on vcore vc, in vcore context. */
static void check_notes(int n, int vc, const char *who)
{
    CHECK(atomic_load(&note_count) == n, "%s: %d deliveries, expected %d", who,
          atomic_load(&note_count), n);
    CHECK(!atomic_load(&note_bad_arg), "the handler got a wrong type or arg");
    CHECK(!atomic_load(&note_in_uthread), "a handler ran inside a uthread");
    for (int i = 0; i < n && i < MAXMSG; i++) {
        CHECK(atomic_load(&note_payload[i]) == PAYLOAD(i),
              "%s: delivery %d carried payload %#lx, expected %#lx (order or payload)", who, i,
              (unsigned long)atomic_load(&note_payload[i]), (unsigned long)PAYLOAD(i));
        CHECK(atomic_load(&note_vcore[i]) == vc,
              "%s: delivery %d ran on vcore %d, the message was for vcore %d", who, i,
              atomic_load(&note_vcore[i]), vc);
    }
}

/* own_code() burns about a microsecond in the program's own code, where a
 * signal finds a safe point: spin loops spend most of their time here, not in
 * weft_now_ns(), so a notification that ignored the disable would be taken. */
static void own_code(void)
{
    (void)spin_work(1000);
}

/* spin_for() spins ns without blocking; fails if the note count changes. */
static void spin_for(uint64_t ns, int want_count, const char *when)
{
    uint64_t end = weft_now_ns() + ns;
    while (weft_now_ns() < end) {
        own_code();
        CHECK(atomic_load(&note_count) == want_count, "%s: count became %d (expected %d)", when,
              atomic_load(&note_count), want_count);
    }
}

/* ---- (a) --------------------------------------------------------------------------- */

static void *nesting(void *arg)
{
    (void)arg;
    CHECK(weft_notifs_depth() == 0, "depth %d at start", weft_notifs_depth());
    CHECK_RC(weft_notifs_enable(), EPERM);
    CHECK(weft_notifs_depth() == 0, "depth %d after a refused enable", weft_notifs_depth());
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK(weft_notifs_depth() == 1, "depth %d", weft_notifs_depth());
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK(weft_notifs_depth() == 2, "depth %d", weft_notifs_depth());
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK(weft_notifs_depth() == 1, "depth %d", weft_notifs_depth());
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK(weft_notifs_depth() == 0, "depth %d", weft_notifs_depth());
    CHECK_RC(weft_notifs_enable(), EPERM);
    CHECK(weft_notifs_depth() == 0, "depth %d after a refused enable", weft_notifs_depth());
    return (void *)1;
}

static void check_api(void)
{
    check_phase("outside a uthread: no-ops");
    CHECK(weft_notifs_depth() == 0, "depth %d in main", weft_notifs_depth());
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK(weft_notifs_depth() == 0, "depth %d in main after disable", weft_notifs_depth());
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK_RC(weft_notifs_enable(), 0);
    CHECK(weft_notifs_depth() == 0, "depth %d in main", weft_notifs_depth());
    check_phase("nesting and EPERM in a uthread");
    CHECK(in_uthread(nesting, NULL) == (void *)1, "nesting");
}

/* ---- (b) --------------------------------------------------------------------------- */

enum { BY_MAIN, BY_SELF, BY_UTHREAD };

struct dcase {
    int by, nmsg;
    atomic_int ready, sent, vcore;
};

static void *disabled_receiver(void *arg)
{
    struct dcase *c = arg;
    CHECK(weft_notifs_depth() == 0, "depth %d", weft_notifs_depth());
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK_RC(weft_notifs_disable(), 0);
    CHECK(weft_notifs_depth() == 2, "depth %d after two disables", weft_notifs_depth());
    int vc = weft_vcore_id();
    CHECK(vc >= 0, "weft_vcore_id() %d in a uthread", vc);
    atomic_store(&c->vcore, vc);
    atomic_store(&c->ready, 1);
    if (c->by == BY_SELF) {
        for (int k = 0; k < c->nmsg; k++)
            CHECK_RC(weft_vcore_notify(vc, T_NOTE, PAYLOAD(k)), 0);
        atomic_store(&c->sent, 1);
    }
    uint64_t t0 = weft_now_ns();
    while (!atomic_load(&c->sent)) {   /* spin: no blocking while disabled */
        CHECK(weft_now_ns() - t0 < BOUND_NS, "the sender never sent");
        own_code();
        CHECK(atomic_load(&note_count) == 0, "delivered while disabled (depth 2)");
    }
    spin_for(MS(50), 0, "50 ms at depth 2 after the send");
    CHECK(weft_vcore_id() == vc, "moved from vcore %d to %d while disabled", vc,
          weft_vcore_id());
    CHECK(weft_notifs_depth() == 2, "depth %d", weft_notifs_depth());

    CHECK_RC(weft_notifs_enable(), 0);
    CHECK(weft_notifs_depth() == 1, "depth %d after the inner enable", weft_notifs_depth());
    CHECK(atomic_load(&note_count) == 0, "delivered at the inner enable (depth 1)");
    spin_for(MS(5), 0, "5 ms at depth 1");

    CHECK_RC(weft_notifs_enable(), 0);
    int got = atomic_load(&note_count);   /* right after the outermost enable */
    CHECK(got == c->nmsg, "after the outermost enable %d of %d messages were handled", got,
          c->nmsg);
    CHECK(weft_notifs_depth() == 0, "depth %d after the outermost enable", weft_notifs_depth());
    check_notes(c->nmsg, vc, "at the outermost enable");

    /* No second delivery, also across scheduling decisions. */
    uint64_t end = weft_now_ns() + MS(20);
    while (weft_now_ns() < end) {
        weft_yield();
        CHECK(atomic_load(&note_count) == c->nmsg, "a second delivery: count %d",
              atomic_load(&note_count));
    }
    return (void *)1;
}

static void *uthread_sender(void *arg)
{
    struct dcase *c = arg;
    WAIT_UNTIL(atomic_load(&c->ready), "receiver disabled");
    int vc = atomic_load(&c->vcore);
    CHECK(weft_vcore_id() != vc, "sender on the receiver's vcore %d", vc);
    for (int k = 0; k < c->nmsg; k++)
        CHECK_RC(weft_vcore_notify(vc, T_NOTE, PAYLOAD(k)), 0);
    atomic_store(&c->sent, 1);
    return NULL;
}

static void check_disabled(int by, int nmsg)
{
    static const char *names[] = { "sent by main", "sent by itself", "sent by a uthread" };
    check_phase(names[by]);
    reset_notes();
    struct dcase c = { .by = by, .nmsg = nmsg };
    weft_t r, s = NULL;
    if (by == BY_UTHREAD) {
        r = spawn_ex(disabled_receiver, &c, WEFT_PINNED, 0, "receiver");
        s = spawn_ex(uthread_sender, &c, WEFT_PINNED, 1, "sender");
    } else {
        r = spawn_ex(disabled_receiver, &c, 0, 0, "receiver");
    }
    if (by == BY_MAIN) {
        WAIT_UNTIL(atomic_load(&c.ready), "receiver disabled");
        int vc = atomic_load(&c.vcore);
        for (int k = 0; k < nmsg; k++)
            CHECK_RC(weft_vcore_notify(vc, T_NOTE, PAYLOAD(k)), 0);
        atomic_store(&c.sent, 1);
    }
    CHECK(join(r) == (void *)1, "receiver");
    if (s)
        join(s);
    check_notes(nmsg, atomic_load(&c.vcore), names[by]);
}

/* ---- (c) --------------------------------------------------------------------------- */

struct spin {
    atomic_int stop, running, vcore, vcore_end;
    atomic_ullong count;
};

#if TEST_TSAN
static volatile uint64_t sink;
#endif

static void *enabled_spinner(void *arg)
{
    struct spin *s = arg;
    unsigned long long n = 0;
    atomic_store(&s->vcore, weft_vcore_id());
    atomic_store(&s->running, 1);
#if TEST_TSAN
    uint64_t acc = 0;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        acc += weft_now_ns();
        atomic_store_explicit(&s->count, ++n, memory_order_relaxed);
    }
    sink = acc;
#else
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed))
        atomic_store_explicit(&s->count, ++n, memory_order_relaxed);
#endif
    atomic_store(&s->vcore_end, weft_vcore_id());
    return NULL;
}

static void check_interrupt(void)
{
    check_phase(TEST_TSAN ? "a spinner calling weft_now_ns is interrupted"
                          : "a tight spinner is interrupted");
    CHECK_RC(weft_set_preempt_period(0), 0);
    reset_notes();
    struct spin s = { 0 };
    weft_t t = spawn_ex(enabled_spinner, &s, (unsigned)pin_flags, 0, "spinner");
    WAIT_UNTIL(atomic_load(&s.running), "spinner running");
    int vc = atomic_load(&s.vcore);
    struct weft_vcore_stats s0, s1;
    CHECK_RC(weft_stats(vc, &s0), 0);
    uint64_t t0 = weft_now_ns();
    CHECK_RC(weft_vcore_notify(vc, T_NOTE, PAYLOAD(0)), 0);
    while (atomic_load(&note_count) == 0) {
        CHECK(weft_now_ns() - t0 < PROMPT_NS,
              "a message to the vcore of a spinning uthread (notifications enabled) was not "
              "handled within %.0f ms",
              (double)PROMPT_NS / 1e6);
        CHECK_RC(weft_sleep_ns(50000), 0);
    }
    uint64_t took = weft_now_ns() - t0;
    unsigned long long c = atomic_load(&s.count);
    while (atomic_load(&s.count) == c) {
        CHECK(weft_now_ns() - t0 < BOUND_NS, "the interrupted spinner never resumed");
        CHECK_RC(weft_sleep_ns(50000), 0);
    }
    CHECK_RC(weft_stats(vc, &s1), 0);
    atomic_store(&s.stop, 1);
    join(t);
    check_notes(1, vc, "interrupt");
    CHECK(atomic_load(&s.vcore_end) == vc, "the spinner moved from vcore %d to %d", vc,
          atomic_load(&s.vcore_end));
    CHECK(s1.events > s0.events, "the vcore's events counter did not grow");
    if (!TEST_TSAN)
        CHECK(s1.notifs > s0.notifs, "handled without a notification signal?");
    fprintf(stderr, "  handled %.3f ms after the send; notifs %llu -> %llu\n",
            (double)took / 1e6, (unsigned long long)s0.notifs, (unsigned long long)s1.notifs);
}

/* ---- (d) --------------------------------------------------------------------------- */

struct held {
    atomic_int stop;
    atomic_ullong wcount;
};

static void *yielder(void *arg)
{
    struct held *h = arg;
    while (!atomic_load(&h->stop)) {
        atomic_fetch_add(&h->wcount, 1);
        weft_yield();
    }
    return NULL;
}

static void *held_spinner(void *arg)
{
    struct held *h = arg;
    WAIT_UNTIL(atomic_load(&h->wcount) > 0, "yielder ran");
    CHECK_RC(weft_notifs_disable(), 0);
    int vc = weft_vcore_id();
    struct weft_vcore_stats s0, s1, s2;
    CHECK_RC(weft_stats(vc, &s0), 0);
    unsigned long long w0 = atomic_load(&h->wcount);
    uint64_t end = weft_now_ns() + MS(20);
    while (weft_now_ns() < end) {
        own_code();
        CHECK(weft_vcore_id() == vc, "moved from vcore %d to %d while disabled", vc,
              weft_vcore_id());
    }
    unsigned long long w1 = atomic_load(&h->wcount);
    CHECK_RC(weft_stats(vc, &s1), 0);
    CHECK(w1 == w0, "the yielder on the same vcore ran %llu times while this uthread spun "
          "with notifications disabled: it was preempted", w1 - w0);
    CHECK(s1.preempt_deferred > s0.preempt_deferred,
          "preempt_deferred %llu -> %llu after 20 ms disabled at a 1 ms period",
          (unsigned long long)s0.preempt_deferred, (unsigned long long)s1.preempt_deferred);
    CHECK_RC(weft_notifs_enable(), 0);
    unsigned long long w2 = atomic_load(&h->wcount);
    CHECK_RC(weft_stats(vc, &s2), 0);
    CHECK(w2 > w1, "the yielder has not run when the outermost enable returned: the pending "
          "preemption was not taken");
    CHECK(s2.preempt_taken > s1.preempt_taken, "preempt_taken %llu -> %llu at the enable",
          (unsigned long long)s1.preempt_taken, (unsigned long long)s2.preempt_taken);
    fprintf(stderr, "  disabled 20 ms: preempt_deferred +%llu; at enable preempt_taken +%llu\n",
            (unsigned long long)(s1.preempt_deferred - s0.preempt_deferred),
            (unsigned long long)(s2.preempt_taken - s1.preempt_taken));
    return (void *)1;
}

static void check_preempt_held(void)
{
    check_phase("preemption held off while disabled");
    CHECK_RC(weft_set_preempt_period(1000), 0);
    struct held h = { 0 };
    weft_t w = spawn_ex(yielder, &h, (unsigned)pin_flags, 0, "yielder");
    weft_t u = spawn_ex(held_spinner, &h, (unsigned)pin_flags, 0, "held");
    CHECK(join(u) == (void *)1, "held_spinner");
    atomic_store(&h.stop, 1);
    join(w);
    CHECK_RC(weft_set_preempt_period(0), 0);
}

/* ---- (e) --------------------------------------------------------------------------- */

static void *pinned_yielder(void *arg)
{
    atomic_int *stop = arg;
    while (!atomic_load(stop))
        weft_yield();
    return NULL;
}

static int sleep_yield_rounds(int vc, int must_stay)
{
    int moves = 0;
    for (int i = 0; i < 200; i++) {
        if (i & 1)
            weft_yield();
        else
            CHECK_RC(weft_sleep_ns(50000), 0);
        int now = weft_vcore_id();
        if (now != vc) {
            CHECK(!must_stay, "round %d: moved from vcore %d to %d while disabled", i, vc, now);
            moves++;
            vc = now;
        }
    }
    return moves;
}

static void *stays_put(void *arg)
{
    (void)arg;
    atomic_int stop = 0;
    int vc = weft_vcore_id();
    weft_t y = spawn_ex(pinned_yielder, &stop, WEFT_PINNED, vc, "busy");
    int moves = sleep_yield_rounds(weft_vcore_id(), 0);
    CHECK_RC(weft_notifs_disable(), 0);
    vc = weft_vcore_id();
    sleep_yield_rounds(vc, 1);
    CHECK(weft_notifs_depth() == 1, "depth %d", weft_notifs_depth());
    CHECK_RC(weft_notifs_enable(), 0);
    atomic_store(&stop, 1);
    join(y);
    fprintf(stderr, "  enabled, the uthread changed vcore %d times in 200 rounds; "
                    "disabled, 0\n", moves);
    return (void *)1;
}

int main(void)
{
    check_watchdog(WATCHDOG_SECS);
    check_phase("register before start");
    CHECK_RC(weft_event_register(T_NOTE, note_handler, &note_cookie), 0);
    check_api();   /* starts the runtime lazily (in_uthread) */
    int nv = weft_num_vcores();
    pin_flags = nv >= 2 ? WEFT_PINNED : 0;

    check_disabled(BY_MAIN, 1);
    check_disabled(BY_SELF, 2);
    if (nv >= 2)
        check_disabled(BY_UTHREAD, 3);
    else
        fprintf(stderr, "  one vcore: no sender uthread on another vcore\n");
    check_interrupt();
    check_preempt_held();
    if (nv >= 2) {
        check_phase("stays on its vcore while disabled");
        CHECK(in_uthread(stays_put, NULL) == (void *)1, "stays_put");
    }
    fprintf(stderr, "notifs: ok (%d vcores)\n", nv);
    weft_shutdown();
    return 0;
}
