/*
 * event.c — per-vcore events (<weft/event.h>): the handler table, each
 * vcore's message queue, handle_events, notifications on and off, stats.
 *
 * A vcore's pending events are one word, ev_bits: bit t for each of weft's
 * own payload-less types (posted lock-free, also from signal handlers), and
 * WEFT__EV_QUEUED when its message array ev_q (under ev_lock) holds
 * application messages. weft__chores_due() reads the word at every
 * scheduling decision, so handle_events runs at the top of vcore context.
 *
 * Getting a vcore's attention, after posting:
 *   - parked: weft_vcore_wake() (its sleep also re-checks ev_bits: a post
 *     is an RMW, the parker's last check comes after its own full fence);
 *   - running a uthread: one notification signal at a time (notif_sent),
 *     handled in preempt.c; handle_events clears notif_sent before it takes
 *     ev_bits, so a post it misses finds notif_sent clear and signals again;
 *   - the caller's own vcore, from a uthread: delivered right here.
 */
#define _GNU_SOURCE
#include <errno.h>
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

static int queue_push(struct weft__vcore *vc, unsigned type, uintptr_t payload)
{
    weft__spin_lock(&vc->ev_lock);
    if (vc->ev_n == vc->ev_cap) {
        unsigned cap = vc->ev_cap ? vc->ev_cap * 2 : 64;
        struct weft__msg *q = realloc(vc->ev_q, sizeof *q * cap);
        if (!q) {
            weft__spin_unlock(&vc->ev_lock);
            return ENOMEM;
        }
        vc->ev_q = q;
        vc->ev_cap = cap;
    }
    vc->ev_q[vc->ev_n++] = (struct weft__msg){ type, payload };
    weft__event_post_bits(vc, WEFT__EV_QUEUED); /* under the lock: see handle_events */
    weft__spin_unlock(&vc->ev_lock);
    return 0;
}

/* attention() makes vc look at its events soon (see the top of this file). */
static void attention(struct weft__vcore *vc)
{
    struct weft__vcore *me = weft__vc();
    if (me == vc) {
        struct weft_uthread *ut = vc->current;
        if (ut && ut->notif_depth == 0 && ut->in_sched == 0)
            weft__notif_deliver(vc, ut);
        return; /* vcore context, or disabled: the next decision or enable sees it */
    }
    weft_vcore_wake(vc->id);
    if (weft_vcore_busy(vc->id) &&
        !atomic_exchange_explicit(&vc->notif_sent, true, memory_order_seq_cst))
        weft__notif_signal(vc);
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
    if (vcore >= 0 && vcore < rt->nvcores && type >= WEFT_EV_USER && type < WEFT_EV_MAX &&
        atomic_load_explicit(&handlers[type].fn, memory_order_acquire)) {
        struct weft__vcore *vc = &rt->vcores[vcore];
        r = queue_push(vc, type, payload);
        if (!r)
            attention(vc);
    }
    if (outside)
        weft__outside_leave();
    return r;
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

/* ---- handling ---------------------------------------------------------------------- */

static void call(unsigned type, uintptr_t payload)
{
    struct handler *h = &handlers[type];
    weft_event_fn fn = atomic_load_explicit(&h->fn, memory_order_acquire);
    fn(type, payload, h->arg);
}

void weft__events_handle(struct weft__vcore *vc)
{
    atomic_store_explicit(&vc->notif_sent, false, memory_order_seq_cst);
    uint64_t bits = atomic_exchange_explicit(&vc->ev_bits, 0, memory_order_seq_cst);
    if (!bits)
        return;
    uint64_t n = 0;
    if (bits & (1ull << WEFT_EV_PREEMPT)) {
        vc->preempt_now = vc->preempt_for == atomic_load_explicit(&vc->nrun, memory_order_relaxed);
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
    if (bits & WEFT__EV_QUEUED) {
        /* Take the whole array; senders start a new one. Messages posted
         * after the exchange above set the bit again under the lock. */
        weft__spin_lock(&vc->ev_lock);
        struct weft__msg *q = vc->ev_q;
        unsigned len = vc->ev_n;
        vc->ev_q = NULL;
        vc->ev_n = vc->ev_cap = 0;
        weft__spin_unlock(&vc->ev_lock);
        for (unsigned i = 0; i < len; i++)
            call(q[i].type, q[i].payload);
        free(q);
        n += len;
    }
    atomic_store_explicit(&vc->st.events,
                          atomic_load_explicit(&vc->st.events, memory_order_relaxed) + n,
                          memory_order_relaxed);
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
        /* Stay here if it blocks: run_on() set link.vcore to this vcore. */
        ut->link.flags |= WEFT_PINNED;
        ut->notif_pinned = true;
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
    }
    atomic_signal_fence(memory_order_seq_cst);
    ut->notif_depth--;
    atomic_signal_fence(memory_order_seq_cst); /* depth 0 before we look */
    if (ut->notif_depth == 0 && atomic_load_explicit(&vc->ev_bits, memory_order_relaxed))
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
    if (vcore < 0 || vcore >= rt->nvcores) {
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
    };
    if (outside)
        weft__outside_leave();
    return 0;
}
