/*
 * event.c — per-vcore events (<weft/event.h>): the handler table, each
 * vcore's message queue, weft__events_handle, notifications on and off, stats.
 *
 * A vcore's pending events are one word, ev.bits: bit t for each of weft's
 * own payload-less types (posted lock-free, also from signal handlers), and
 * WEFT__EV_SIGQ when its sigq holds application messages or work a signal
 * handler left (a bounded lock-free queue, see internal.h).
 * weft__chores_due() reads the word at every scheduling decision, so
 * weft__events_handle runs at the top of vcore context.
 *
 * Getting a vcore's attention, after posting:
 *   - parked: weft_vcore_wake() (its sleep also re-checks ev.bits: a post
 *     is an RMW, the parker's last check comes after its own full fence);
 *   - running a uthread: one notification signal at a time (ev.notif_sent),
 *     handled in preempt.c; weft__events_handle clears ev.notif_sent before it takes
 *     ev.bits, so a post it misses finds ev.notif_sent clear and signals again;
 *     a handler that finds no events (a decision took them after the post)
 *     clears it too, and one that lands in vcore context or unsafe code
 *     looks again soon (retry_later), since no other signal comes while
 *     ev.notif_sent is set;
 *   - the caller's own vcore, from a uthread: delivered right here, and the
 *     caller resumed on the spot (never paused or moved: it may be a signal
 *     handler that interrupted weft between two steps).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "internal.h"

static struct handler {
    _Atomic(weft_event_fn) fn;
    void *arg;                       /* written before fn is published */
} handlers[WEFT_EV_MAX];

static void install(unsigned type, weft_event_fn fn, void *arg)
{
    handlers[type].arg = arg;
    atomic_store_explicit(&handlers[type].fn, fn, memory_order_release);
}

int weft_event_register(unsigned type, weft_event_fn fn, void *arg)
{
    static uint32_t reg_lock;
    if (type < WEFT_EV_USER || type >= WEFT_EV_MAX || !fn)
        return EINVAL;
    weft__spin_lock(&reg_lock);
    int r = atomic_load_explicit(&handlers[type].fn, memory_order_relaxed) ? EEXIST : 0;
    if (!r)
        install(type, fn, arg);
    weft__spin_unlock(&reg_lock);
    return r;
}

/* ---- posting ---------------------------------------------------------------------- */

/* attention() makes vc look at its events soon (see the top of this file). */
static void attention(struct weft__vcore *vc)
{
    struct weft__vcore *me = weft__vc();
    if (me == vc) {
        struct weft_uthread *ut = vc->current;
        if (ut && ut->notif_depth == 0 && ut->in_sched == 0) {
            /* Handled now, and the caller resumed right here, never paused
             * or moved: it may be a signal handler that interrupted weft's
             * own code between two steps (not detectable), which must find
             * its vcore unchanged when it goes on. */
            vc->notif_here = true;
            weft__notif_deliver(vc, ut);
        }
        return; /* vcore context, or disabled: the next decision or enable sees it */
    }
    weft_vcore_wake(vc->id);
    if (weft_vcore_busy(vc->id))
        weft__notif_tell(vc);
}

int weft_vcore_notify(int vcore, unsigned type, uintptr_t payload)
{
    struct weft__runtime *rt = &weft__rt;
    bool outside = !weft__vc_at_entry();
    if (outside) {
        int r = weft__outside_enter(WEFT__GATE_USE);
        if (r)
            return EAGAIN;
    }
    int r = EINVAL;
    if (vcore >= 0 && vcore < atomic_load_explicit(&rt->nonline, memory_order_relaxed) &&
        type >= WEFT_EV_USER && type < WEFT_EV_MAX &&
        atomic_load_explicit(&handlers[type].fn, memory_order_acquire)) {
        struct weft__vcore *vc = &rt->vcores[vcore];
        /* The queue is lock-free and allocates nothing: any context, signal
         * handlers included. From a handler that may have interrupted weft,
         * the vcore is only told (never switched to from here). */
        struct weft__vcore *me = weft__vc_at_entry();
        if (WEFT__UNLIKELY(weft__reentered(me))) {
            r = weft__defer_msg(vc, type, payload) ? 0 : EAGAIN;
        } else {
            /* Full: wait for the vcore to handle some (FIFO per sender is
             * kept); vcore context cannot wait for a vcore. */
            bool put;
            while (!(put = weft__sigq_put_msg(vc, type, payload)) &&
                   !(me && !me->current) && !atomic_load_explicit(&rt->closing, memory_order_seq_cst)) {
                weft__event_post_bits(vc, 1ull << WEFT__EV_SIGQ);
                attention(vc);
                if (me)
                    weft_yield(); /* our own vcore may be the one to drain it */
                else
                    weft__sys.sched_yield();
                me = weft__vc(); /* a uthread may have moved: invariant 2, not the
                                    address of our TLS from before the yield */
            }
            r = put ? 0 : EAGAIN; /* EAGAIN: vcore context, or a shutdown waits for us */
            if (put) {
                weft__event_post_bits(vc, 1ull << WEFT__EV_SIGQ);
                attention(vc);
            }
        }
    }
    if (outside)
        weft__outside_leave();
    return r;
}

void weft_vcore_preempt(int id)
{
    struct weft__runtime *rt = &weft__rt;
    struct weft__vcore *me = weft__vc_at_entry();
    if (!me && weft__outside_enter(WEFT__GATE_USE))
        return;
    if (id >= 0 && id < rt->nvcores) {
        struct weft__vcore *vc = &rt->vcores[id];
        weft__event_post_bits(vc, 1ull << WEFT__EV_RESCHED);
        /* Our own vcore: the uthread's next safe point, switch or tick
         * delivers it, or, from vcore context, notify_entry's check before
         * the interrupted uthread resumes (or the decision being made). A
         * parked or spinning vcore decides anyway when it has work. */
        if (vc != me && weft_vcore_busy(id)) {
            weft_sched_note_shared(1);
            weft__notif_tell(vc);
        }
    }
    if (!me)
        weft__outside_leave();
}

void weft_vcore_poke(int id)
{
    struct weft__runtime *rt = &weft__rt;
    bool outside = !weft__vc_at_entry();
    if (outside && weft__outside_enter(WEFT__GATE_USE))
        return;
    if (id >= 0 && id < rt->nvcores && rt->ops->poked) {
        struct weft__vcore *vc = &rt->vcores[id];
        weft__event_post_bits(vc, 1ull << WEFT__EV_SCHED);
        weft_sched_note_shared(1);
        attention(vc);
    }
    if (outside)
        weft__outside_leave();
}

/* ---- signal-safe deferral (see internal.h) ---------------------------------------- */

__thread unsigned weft__tls_crit __attribute__((tls_model("initial-exec")));

void weft__sigq_init(struct weft__vcore *vc)
{
    struct weft__sigq *q = &vc->sigq;
    atomic_init(&q->tail, 0);
    q->head = 0;
    atomic_init(&q->overflow, false);
    atomic_init(&q->unparks, NULL);
    for (uint64_t i = 0; i < WEFT__SIGQ_CAP; i++)
        atomic_init(&q->slot[i].seq, i);
}

/* sigq_put() claims a slot, fills it and publishes it; false when full. A
 * producer interrupted between claim and publish by a handler that puts too
 * only delays the consumer, which stops at the unpublished slot. */
static bool sigq_put(struct weft__sigq *q, unsigned kind, unsigned type, uintptr_t a, uintptr_t b)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    for (;;) {
        struct weft__sigmsg *m = &q->slot[pos % WEFT__SIGQ_CAP];
        uint64_t seq = atomic_load_explicit(&m->seq, memory_order_acquire);
        int64_t d = (int64_t)(seq - pos);
        if (d == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                m->kind = kind;
                m->type = type;
                m->a = a;
                m->b = b;
                atomic_store_explicit(&m->seq, pos + 1, memory_order_release);
                return true;
            }
        } else if (d < 0) {
            return false; /* full: the vcore has not drained the slot a lap ago */
        } else {
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        }
    }
}

/* sig_attention(): vc will see WEFT__EV_SIGQ at its next decision; wake it
 * if it is parked, signal it if it runs a uthread (not our own vcore: the
 * handler returns to it, and its next decision comes). Lock-free. */
static void sig_attention(struct weft__vcore *vc)
{
    weft__event_post_bits(vc, 1ull << WEFT__EV_SIGQ);
    if (vc == weft__vc())
        return;
    weft__vcore_wake_signal_safe(vc);
    if (weft_vcore_busy(vc->id))
        weft__notif_tell(vc);
}

static struct weft__vcore *defer_target(struct weft__vcore *vc, int hint)
{
    if (vc)
        return vc;
    int n = weft__rt.nvcores;
    return &weft__rt.vcores[hint >= 0 && hint < n ? hint : 0];
}

void weft__defer_unpark(struct weft__vcore *vc, struct weft_uthread *t)
{
    vc = defer_target(vc, t->link.vcore);
    struct weft_uthread *head = atomic_load_explicit(&vc->sigq.unparks, memory_order_relaxed);
    do
        t->sig_next = head;
    while (!atomic_compare_exchange_weak_explicit(&vc->sigq.unparks, &head, t, memory_order_release,
                                                  memory_order_relaxed));
    sig_attention(vc);
}

void weft__defer_futex_wake(struct weft__vcore *vc, uint32_t *addr, int n)
{
    vc = defer_target(vc, -1);
    if (!sigq_put(&vc->sigq, WEFT__SIG_WAKE, 0, (uintptr_t)addr, (uintptr_t)n))
        atomic_store_explicit(&vc->sigq.overflow, true, memory_order_release);
    sig_attention(vc);
}

bool weft__sigq_put_msg(struct weft__vcore *target, unsigned type, uintptr_t payload)
{
    return sigq_put(&target->sigq, WEFT__SIG_MSG, type, payload, 0);
}

bool weft__defer_msg(struct weft__vcore *target, unsigned type, uintptr_t payload)
{
    if (!weft__sigq_put_msg(target, type, payload))
        return false;
    sig_attention(target);
    return true;
}

static void call(unsigned type, uintptr_t payload);

uint64_t weft__sigq_drain(struct weft__vcore *vc, bool handle_msgs)
{
    struct weft__sigq *q = &vc->sigq;
    uint64_t n = 0;
    /* At shutdown (!handle_msgs) no unpark can be pending: its uthread
     * would not have finished. */
    struct weft_uthread *t =
        handle_msgs ? atomic_exchange_explicit(&q->unparks, NULL, memory_order_acquire) : NULL;
    while (t) {
        struct weft_uthread *next = t->sig_next; /* read before t can run */
        weft_uthread_runnable(t);
        t = next;
        n++;
    }
    if (atomic_exchange_explicit(&q->overflow, false, memory_order_acquire))
        weft__futex_wake_everyone();
    for (;;) {
        struct weft__sigmsg *m = &q->slot[q->head % WEFT__SIGQ_CAP];
        if (atomic_load_explicit(&m->seq, memory_order_acquire) != q->head + 1)
            break; /* empty, or a producer still filling it (it posts again) */
        unsigned kind = m->kind, type = m->type;
        uintptr_t a = m->a, b = m->b;
        atomic_store_explicit(&m->seq, q->head + WEFT__SIGQ_CAP, memory_order_release);
        q->head++;
        if (kind == WEFT__SIG_WAKE)
            weft__futex_wake_now((uint32_t *)a, (int)b);
        else if (kind == WEFT__SIG_MSG && handle_msgs)
            call(type, a);
        n++;
    }
    return n;
}

/* ---- handling ---------------------------------------------------------------------- */

static void call(unsigned type, uintptr_t payload)
{
    struct handler *h = &handlers[type];
    weft_event_fn fn = atomic_load_explicit(&h->fn, memory_order_acquire);
    fn(type, payload, h->arg);
}

void weft__events_handle(struct weft__vcore *vc)
{
    atomic_store_explicit(&vc->ev.notif_sent, false, memory_order_seq_cst);
    uint64_t bits = atomic_exchange_explicit(&vc->ev.bits, 0, memory_order_seq_cst);
    if (!bits)
        return;
    uint64_t n = 0;
    if (bits & (1ull << WEFT_EV_PREEMPT)) {
        vc->preempt_now = vc->tick.preempt_for == atomic_load_explicit(&vc->nrun, memory_order_relaxed);
        n++;
    }
    /* Alarms and I/O found by a tick: whoever they wake should not wait
     * for the running uthread's period to end (wakeup preemption). */
    if (bits & (1ull << WEFT_EV_TIMER)) {
        if (weft__timers_run(vc, weft__now_ns()))
            vc->preempt_now = true;
        n++;
    }
    if (bits & (1ull << WEFT_EV_IO)) {
        if (weft__io_stale(weft__now_ns()) && weft__io_poll(0) > 0)
            vc->preempt_now = true;
        n++;
    }
    if (bits & (1ull << WEFT__EV_SCHED)) {
        weft__rt.ops->poked();
        n++;
    }
    if (bits & (1ull << WEFT__EV_SIGQ))
        n += weft__sigq_drain(vc, true);
    /* A scheduler's weft_vcore_preempt(), maybe by a wake-up just above. */
    if ((bits & (1ull << WEFT__EV_RESCHED)) ||
        (atomic_load_explicit(&vc->ev.bits, memory_order_relaxed) & (1ull << WEFT__EV_RESCHED) &&
         atomic_fetch_and_explicit(&vc->ev.bits, ~(1ull << WEFT__EV_RESCHED), memory_order_seq_cst) & (1ull << WEFT__EV_RESCHED))) {
        vc->resched = true;
        n++;
    }
    atomic_store_explicit(&vc->st.events,
                          atomic_load_explicit(&vc->st.events, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

void weft__resched_check(struct weft__vcore *vc, struct weft_uthread *ut, bool here)
{
    if (!vc->resched)
        return;
    vc->resched = false;
    if (here) { /* resumed on the spot: its next safe point takes it */
        weft__event_post_bits(vc, 1ull << WEFT__EV_RESCHED);
        return;
    }
    if (atomic_load_explicit(&vc->online, memory_order_relaxed) != 1) {
        vc->preempt_now = true; /* going offline (weft_vcores_release): ut moves on */
        return;
    }
    int (*check)(struct weft_uthread *) = weft__rt.ops->should_preempt;
    if (!check || check(ut))
        vc->preempt_now = true;
}

/* ---- notifications on and off ------------------------------------------------------- */

static struct weft_uthread *self_on(struct weft__vcore **vcp)
{
    struct weft__vcore *vc = weft__vc();
    *vcp = vc;
    return vc ? vc->current : NULL;
}

int weft_notifs_disable(void)
{
    struct weft__vcore *vc;
    struct weft_uthread *ut = self_on(&vc);
    if (!ut)
        return 0;
    if (ut->notif_depth == 0 && !(ut->link.flags & WEFT_PINNED)) {
        /* Stay here if it blocks: start_on() set link.vcore to this vcore.
         * Counted like any pin, so weft_vcores_release refuses this vcore
         * while we may block here (a release already under way may still
         * take it: start_on() then lets us move). */
        ut->link.flags |= WEFT_PINNED;
        ut->notif_pinned = true;
        atomic_fetch_add_explicit(&vc->npinned, 1, memory_order_relaxed);
    }
    ut->notif_depth++;
    atomic_signal_fence(memory_order_seq_cst); /* the handler reads the depth */
    return 0;
}

int weft_notifs_enable(void)
{
    struct weft__vcore *vc;
    struct weft_uthread *ut = self_on(&vc);
    if (!ut)
        return 0;
    if (ut->notif_depth == 0)
        return EPERM;
    if (ut->notif_depth == 1 && ut->notif_pinned) {
        ut->link.flags &= ~(unsigned)WEFT_PINNED;
        ut->notif_pinned = false;
        atomic_fetch_sub_explicit(&vc->npinned, 1, memory_order_relaxed);
    }
    atomic_signal_fence(memory_order_seq_cst);
    ut->notif_depth--;
    atomic_signal_fence(memory_order_seq_cst); /* depth 0 before we look */
    if (ut->notif_depth == 0 && atomic_load_explicit(&vc->ev.bits, memory_order_relaxed))
        weft__notif_deliver(vc, ut);
    return 0;
}

int weft_notifs_depth(void)
{
    struct weft__vcore *vc;
    struct weft_uthread *ut = self_on(&vc);
    return ut ? ut->notif_depth : 0;
}

void weft__safe_point_slow(struct weft__vcore *vc)
{
    struct weft_uthread *ut = vc->current;
    if (ut && ut->notif_depth == 0 && ut->in_sched == 0)
        weft__notif_deliver(vc, ut);
}

/* ---- statistics --------------------------------------------------------------------- */

int weft_stats(int vcore, struct weft_vcore_stats *out)
{
    struct weft__runtime *rt = &weft__rt;
    if (!out)
        return EINVAL;
    bool outside = !weft__vc_at_entry();
    if (outside && weft__outside_enter(WEFT__GATE_USE))
        return EINVAL;
    if (vcore < 0 || vcore >= atomic_load_explicit(&rt->nonline, memory_order_relaxed)) {
        if (outside)
            weft__outside_leave();
        return EINVAL;
    }
    struct weft__vcore *vc = &rt->vcores[vcore];
    *out = (struct weft_vcore_stats){
        .decisions = atomic_load_explicit(&vc->nrun, memory_order_relaxed),
        .notifs = atomic_load_explicit(&vc->st.notifs, memory_order_relaxed),
        .events = atomic_load_explicit(&vc->st.events, memory_order_relaxed),
        .preempt_taken = atomic_load_explicit(&vc->st.taken, memory_order_relaxed),
        .preempt_deferred = atomic_load_explicit(&vc->st.deferred, memory_order_relaxed),
        .longest_stretch_ns = atomic_load_explicit(&vc->st.longest, memory_order_relaxed),
        .handoffs = atomic_load_explicit(&vc->nrun, memory_order_relaxed) -
                    atomic_load_explicit(&vc->st.vcruns, memory_order_relaxed),
        .kicks = atomic_load_explicit(&vc->st.kicks, memory_order_relaxed),
        .parks = atomic_load_explicit(&vc->st.parks, memory_order_relaxed),
        .shared_rmw = atomic_load_explicit(&vc->st.shared_rmw, memory_order_relaxed),
        .stack_copies = atomic_load_explicit(&vc->st.sc_copies, memory_order_relaxed),
        .stack_copy_bytes = atomic_load_explicit(&vc->st.sc_bytes, memory_order_relaxed),
        .stack_forwards = atomic_load_explicit(&vc->st.sc_forwards, memory_order_relaxed),
    };
    if (outside)
        weft__outside_leave();
    return 0;
}
