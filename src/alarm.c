/*
 * alarm.c — the alarm service: one-shot timers whose callbacks run in vcore
 * context (<weft/time.h>), and the sleeps built on them.
 *
 * Each vcore owns a binary min-heap of the alarms started on it, guarded by
 * a spinlock, with its earliest deadline published lock-free (heap->min).
 * Nobody needs a thread for timers:
 *  - a busy vcore runs its own due alarms every 16th scheduling decision
 *    (weft__chores_due reads its heap->min then, one load, and the clock
 *    when an alarm is pending), and a tick that finds one due posts
 *    WEFT_EV_TIMER in between;
 *  - the one idle vcore that has the timer duty (it sleeps in the poller, or
 *    on its futex before any I/O) sleeps until the earliest deadline of all
 *    heaps and runs whatever is due on any heap when it wakes
 *    (weft__timers_run_all). An alarm that becomes the earliest of its heap
 *    wakes that sleeper if it sleeps for longer, or the heap's vcore if it
 *    is offline (weft__vcore_heap_armed).
 * Alarms started outside a vcore go to the heaps round robin.
 *
 * An alarm is IDLE, ARMING (being put on a heap), ARMED (on a heap), FIRING
 * (its callback runs) or REARM (its callback runs and it was started again
 * meanwhile). Only the vcore
 * running the callback leaves FIRING/REARM: CAS FIRING -> IDLE, or, from
 * REARM, back onto a heap. So one alarm's callbacks never overlap, and a
 * start during a callback (a periodic alarm) takes effect when it returns.
 * Stop removes an ARMED alarm under its heap's lock; turns REARM into FIRING
 * (that arming will not fire: true); and, from a uthread or an outside
 * thread, waits for a running callback to return, so the caller may free
 * the alarm afterwards: it spins a little, then sets A_WAITED and sleeps on
 * the state word, which the runner wakes by address after it leaves FIRING
 * (the one CAS it does anyway fails only then). Vcore context never waits
 * (its own callback, or another's: two callbacks that stop each other's
 * alarms would deadlock), nor for a start in progress (ARMING: that start
 * wins); a uthread waits that out spinning, then yielding.
 *
 * Lock order: a wait queue's lock may be held while starting an alarm (queue
 * -> heap); callbacks run with the heap lock released, so they may take
 * queue locks and start alarms.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

enum { A_IDLE = 0, A_ARMED, A_FIRING, A_REARM, A_ARMING };
/* Added to FIRING or REARM: a stopper sleeps on the state word until the
 * callback's runner leaves FIRING (and wakes it by address). */
#define A_WAITED 8
#define BASE(s) ((s) & ~A_WAITED)

#define STATE(a) ((_Atomic int *)&(a)->state)

static _Atomic unsigned start_rr; /* heap for alarms started outside a vcore */

static void put(struct weft__heap *h, int i, struct weft_alarm *a)
{
    h->v[i] = a;
    a->idx = i;
}

static void sift_up(struct weft__heap *h, int i)
{
    struct weft_alarm *a = h->v[i];
    while (i > 0) {
        int p = (i - 1) / 2;
        if (h->v[p]->deadline <= a->deadline)
            break;
        put(h, i, h->v[p]);
        i = p;
    }
    put(h, i, a);
}

static void sift_down(struct weft__heap *h, int i)
{
    struct weft_alarm *a = h->v[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1]->deadline < h->v[c]->deadline)
            c++;
        if (h->v[c]->deadline >= a->deadline)
            break;
        put(h, i, h->v[c]);
        i = c;
    }
    put(h, i, a);
}

static void remove_at(struct weft__heap *h, int i)
{
    struct weft_alarm *last = h->v[--h->n];
    if (i < h->n) {
        put(h, i, last);
        sift_up(h, i);
        sift_down(h, last->idx);
    }
}

static void publish_min(struct weft__heap *h)
{
    atomic_store_explicit(&h->min, h->n ? h->v[0]->deadline : UINT64_MAX, memory_order_release);
}

static struct weft__heap *heap_for_start(void)
{
    struct weft__vcore *vc = weft__vc();
    if (vc)
        return &vc->heap;
    unsigned i = atomic_fetch_add_explicit(&start_rr, 1, memory_order_relaxed);
    int n = atomic_load_explicit(&weft__rt.nonline, memory_order_relaxed); /* online ones */
    return &weft__rt.vcores[i % (unsigned)(n > 0 ? n : 1)].heap;
}

#define HEAP(a) ((struct weft__heap *_Atomic *)&(a)->heap)

/* heap_room() makes room for one more alarm on h (its lock held): false if
 * the array cannot grow. */
static bool heap_room(struct weft__heap *h)
{
    if (h->n < h->cap)
        return true;
    int cap = h->cap ? h->cap * 2 : 64;
    struct weft_alarm **v = realloc(h->v, sizeof *v * (size_t)cap);
    if (!v)
        return false;
    h->v = v;
    h->cap = cap;
    return true;
}

/* arm() puts a (deadline and cb set) on a heap if its state is still from:
 * 0, EBUSY (the state was not from: nothing done) or ENOMEM (the heap could
 * not grow: a is back in state from... as IDLE, its arming undone). It
 * claims a first (from -> ARMING), then sets a->heap and ARMED (release)
 * under the heap lock, so whoever sees ARMED finds a on a->heap; stop waits
 * out the short ARMING. */
static int arm(struct weft_alarm *a, int from)
{
    weft__sc_check(a, "an armed alarm");
    if (!atomic_compare_exchange_strong_explicit(STATE(a), &from, A_ARMING, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return EBUSY;
    struct weft__heap *h = heap_for_start();
    weft__spin_lock(&h->lock);
    if (WEFT__UNLIKELY(!heap_room(h))) {
        weft__spin_unlock(&h->lock);
        atomic_store_explicit(STATE(a), A_IDLE, memory_order_release);
        return ENOMEM;
    }
    atomic_store_explicit(HEAP(a), h, memory_order_relaxed);
    atomic_store_explicit(STATE(a), A_ARMED, memory_order_release);
    put(h, h->n++, a);
    sift_up(h, h->n - 1);
    bool earliest = h->v[0] == a;
    uint64_t d = a->deadline;
    publish_min(h);
    weft__spin_unlock(&h->lock);
    if (earliest)
        weft__vcore_heap_armed(WEFT__CONTAINER(h, struct weft__vcore, heap), d);
    return 0;
}

int weft__alarm_arm(struct weft_alarm *a)
{
    int r = arm(a, A_IDLE);
    if (r == EBUSY)
        weft__panic("an internal alarm was armed twice");
    return r;
}

/* Spin iterations a stopper waits for a running callback or a start in
 * progress before it sleeps (a callback) or yields (a start). */
#define STOP_SPIN 200

/* stop_when_stopped() is weft_alarm_stop() from a kernel thread outside the
 * vcores while weft_shutdown() stops them (or after): the heaps are going
 * away, so wait for shutdown to drop a (IDLE) instead of touching its heap. */
static bool stop_when_stopped(struct weft_alarm *a)
{
    bool was_armed = false;
    for (int s; (s = atomic_load_explicit(STATE(a), memory_order_acquire)) != A_IDLE;) {
        was_armed |= BASE(s) != A_FIRING;
        weft__sys.sched_yield();
    }
    return was_armed; /* dropped: its callback never ran */
}

/* stop() is weft_alarm_stop(); may_sleep false: a uthread waits out a
 * running callback spinning and yielding instead of sleeping on the state
 * word (weft__alarm_stop_own). */
static bool stop(struct weft_alarm *a, bool may_sleep)
{
    struct weft__vcore *vc = weft__vc();
    bool outside = vc == NULL;
    if (outside && weft__outside_enter(WEFT__GATE_USE))
        return stop_when_stopped(a);
    /* Vcore context (a callback, an event handler, a scheduler) may not
     * wait; a uthread (preemptible) and an outside thread may. */
    bool may_wait = outside || vc->current != NULL;
    bool stopped = false;
    int spins = 0;
    for (;;) {
        int s = atomic_load_explicit(STATE(a), memory_order_acquire);
        if (s == A_IDLE)
            break;
        if (BASE(s) == A_REARM) { /* cancel the start made during the callback */
            if (atomic_compare_exchange_strong_explicit(STATE(a), &s, A_FIRING | (s & A_WAITED), memory_order_seq_cst, memory_order_seq_cst))
                stopped = true;
            continue;
        }
        if (BASE(s) == A_FIRING) {
            /* Our vcore read afresh: a uthread may have moved since (a
             * stale one could be the vcore now running a's callback, and we
             * would take that for our own and return early). */
            struct weft__vcore *me = outside ? NULL : weft__vc();
            if ((me && me->firing == a) || !may_wait)
                break; /* its own callback, or vcore context: do not wait */
            if (spins++ < STOP_SPIN) {
                weft__cpu_relax(); /* callbacks are short, by contract */
                continue;
            }
            if (!may_sleep) {
                weft_yield(); /* a uthread: its runner is another vcore */
                continue;
            }
            /* Sleep until its runner leaves FIRING (it wakes us by address). */
            if (s == A_FIRING && !atomic_compare_exchange_strong_explicit(STATE(a), &s, A_FIRING | A_WAITED, memory_order_seq_cst, memory_order_seq_cst))
                continue;
            weft_futex_wait((uint32_t *)(void *)STATE(a), A_FIRING | A_WAITED, WEFT_FOREVER);
            continue;
        }
        if (s == A_ARMING) { /* a start is putting it on a heap: a few instructions */
            if (!may_wait)
                break; /* that start wins: as if it came after this stop */
            if (spins++ < STOP_SPIN)
                weft__cpu_relax();
            else if (outside)
                weft__sys.sched_yield(); /* the starter may be a kernel thread the kernel preempted */
            else
                weft_yield();
            continue;
        }
        struct weft__heap *h = atomic_load_explicit(HEAP(a), memory_order_relaxed);
        weft__spin_lock(&h->lock);
        bool ours = atomic_load_explicit(HEAP(a), memory_order_relaxed) == h &&
                    atomic_load_explicit(STATE(a), memory_order_relaxed) == A_ARMED;
        if (ours) {
            remove_at(h, a->idx);
            atomic_store_explicit(STATE(a), A_IDLE, memory_order_release);
            publish_min(h);
        }
        weft__spin_unlock(&h->lock);
        if (ours) {
            stopped = true; /* ARMED means no callback of a is running */
            break;
        }
        /* it fired, or moved heaps, meanwhile: look again */
    }
    if (outside)
        weft__outside_leave();
    return stopped;
}

bool weft_alarm_stop(struct weft_alarm *a)
{
    return stop(a, true);
}

bool weft__alarm_stop_own(struct weft_alarm *a)
{
    return stop(a, false);
}

/* rearm_lost() reports, once, a start made from an alarm's own callback
 * that could not be carried out: start() made room on the heap, and other
 * alarms filled it before the callback returned, with memory exhausted. */
static void rearm_lost(struct weft_alarm *a)
{
    static _Atomic bool said;
    (void)a;
    if (!atomic_exchange_explicit(&said, true, memory_order_seq_cst))
        fprintf(stderr, "weft: out of memory for the timer heap: an alarm restarted from its "
                        "own callback was dropped\n");
}

/* run_heap() runs h's callbacks due at now; true if it ran any. */
static bool run_heap(struct weft__vcore *vc, struct weft__heap *h, uint64_t now)
{
    bool ran = false;
    for (;;) {
        weft__spin_lock(&h->lock);
        if (!h->n || h->v[0]->deadline > now) {
            weft__spin_unlock(&h->lock);
            return ran;
        }
        struct weft_alarm *a = h->v[0];
        remove_at(h, 0);
        atomic_store_explicit(STATE(a), A_FIRING, memory_order_relaxed);
        publish_min(h);
        weft__spin_unlock(&h->lock);
        vc->firing = a;
        a->cb(a);
        vc->firing = NULL;
        for (;;) { /* leave FIRING: only we may, so a is alive until we do */
            int s = A_FIRING;
            if (atomic_compare_exchange_strong_explicit(STATE(a), &s, A_IDLE,
                                                        memory_order_release, memory_order_relaxed))
                break;
            if (s == (A_FIRING | A_WAITED)) { /* a stopper sleeps */
                if (atomic_compare_exchange_strong_explicit(STATE(a), &s, A_IDLE,
                                                            memory_order_release,
                                                            memory_order_relaxed)) {
                    weft_futex_wake((uint32_t *)(void *)STATE(a), INT_MAX); /* by address only */
                    break;
                }
                continue;
            }
            int r = BASE(s) == A_REARM ? arm(a, s) : EBUSY; /* started during the callback */
            if (r != EBUSY) {
                if (r == ENOMEM) /* start() made room; others took it meanwhile */
                    rearm_lost(a);
                if (s & A_WAITED) /* the stopper finds it ARMED (or IDLE), and goes on */
                    weft_futex_wake((uint32_t *)(void *)STATE(a), INT_MAX);
                break;
            }
            /* a stop turned REARM back into FIRING meanwhile: try again */
        }
        ran = true;
    }
}

bool weft__timers_run(struct weft__vcore *vc, uint64_t now)
{
    return run_heap(vc, &vc->heap, now);
}

uint64_t weft__timers_next(void)
{
    uint64_t m = UINT64_MAX;
    for (int i = 0; i < weft__rt.nvcores; i++) {
        uint64_t d = atomic_load_explicit(&weft__rt.vcores[i].heap.min, memory_order_acquire);
        if (d < m)
            m = d;
    }
    return m;
}

bool weft__timers_run_all(struct weft__vcore *vc, uint64_t now)
{
    bool ran = false;
    for (int i = 0; i < weft__rt.nvcores; i++) {
        struct weft__heap *h = &weft__rt.vcores[(vc->id + i) % weft__rt.nvcores].heap;
        if (atomic_load_explicit(&h->min, memory_order_acquire) <= now)
            ran |= run_heap(vc, h, now);
    }
    return ran;
}

void weft__heap_fini(struct weft__heap *h)
{
    /* Alarms still armed at shutdown are dropped without running. */
    for (int i = 0; i < h->n; i++)
        atomic_store_explicit(STATE(h->v[i]), A_IDLE, memory_order_release); /* to a stopper */
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
    atomic_store_explicit(&h->min, UINT64_MAX, memory_order_seq_cst);
}

/* ---- the public alarm API --------------------------------------------------- */

void weft_alarm_init(struct weft_alarm *a, void (*cb)(struct weft_alarm *))
{
    a->deadline = WEFT_FOREVER;
    a->cb = cb;
    a->data = NULL;
    a->heap = NULL;
    a->idx = -1;
    atomic_store_explicit(STATE(a), A_IDLE, memory_order_relaxed);
}

int weft_alarm_set_abs(struct weft_alarm *a, uint64_t deadline)
{
    if (deadline >> 63)
        return EINVAL; /* WEFT_FOREVER too: an alarm that never fires is no alarm */
    int s = BASE(atomic_load_explicit(STATE(a), memory_order_relaxed));
    if (s == A_ARMED || s == A_REARM || s == A_ARMING)
        return EBUSY;
    a->deadline = deadline;
    return 0;
}

int weft_alarm_set_rel(struct weft_alarm *a, uint64_t ns)
{
    if (ns >> 63)
        return EINVAL;
    uint64_t d = weft__now_ns() + ns;
    return weft_alarm_set_abs(a, d >> 63 ? (UINT64_MAX >> 1) : d);
}

/* start() arms a from IDLE, or marks it REARM while its callback runs;
 * 0 or EBUSY if it is armed already. */
static int start(struct weft_alarm *a)
{
    for (;;) {
        int s = atomic_load_explicit(STATE(a), memory_order_acquire);
        if (BASE(s) == A_ARMED || BASE(s) == A_REARM || s == A_ARMING)
            return EBUSY;
        if (BASE(s) == A_FIRING) {
            /* Its runner arms it when the callback returns, on the heap of
             * the vcore it runs on (ours, when called from the callback):
             * make the room now, while we can still say ENOMEM. */
            struct weft__heap *h = heap_for_start();
            weft__spin_lock(&h->lock);
            bool room = heap_room(h);
            weft__spin_unlock(&h->lock);
            if (!room)
                return ENOMEM;
            if (atomic_compare_exchange_strong_explicit(STATE(a), &s, A_REARM | (s & A_WAITED), memory_order_seq_cst, memory_order_seq_cst))
                return 0;
            continue;
        }
        int r = arm(a, A_IDLE);
        if (r != EBUSY)
            return r;
    }
}

int weft_alarm_start(struct weft_alarm *a)
{
    if (!a->cb || a->deadline == WEFT_FOREVER)
        return EINVAL;
    bool outside = !weft__vc_at_entry();
    if (outside) {
        int r = weft__outside_enter(WEFT__GATE_START);
        if (r)
            return r;
    }
    int r = start(a);
    if (outside)
        weft__outside_leave();
    return r;
}

bool weft_alarm_reset_abs(struct weft_alarm *a, uint64_t deadline)
{
    if ((deadline >> 63) || !a->cb)
        return false;
    bool outside = !weft__vc_at_entry();
    if (outside && weft__outside_enter(WEFT__GATE_START))
        return false;
    bool stopped = weft_alarm_stop(a);
    a->deadline = deadline;
    start(a); /* IDLE, or FIRING when called from its own callback */
    if (outside)
        weft__outside_leave();
    return stopped;
}

/* ---- sleeping ----------------------------------------------------------------- */

/* A sleep's record is its uthread's wait record (rec: tm, ut, err), never
 * on its stack. */
static void sleep_fire(struct weft_alarm *al)
{
    weft_uthread_runnable(WEFT__CONTAINER(al, struct weft__wait_rec, tm)->ut);
}

static void sleep_cb(struct weft_uthread *ut, void *arg)
{
    struct weft__wait_rec *s = arg;
    s->ut = ut;
    weft_uthread_blocked(ut, WEFT_BLOCK_SLEEP);
    /* Once armed, the alarm may fire and the sleeper return at once: touch
     * nothing of s after a successful arm. */
    int e = weft__alarm_arm(&s->tm);
    if (WEFT__UNLIKELY(e)) { /* no timer: do not sleep for ever */
        s->err = e;
        weft_uthread_runnable(ut);
    }
}

int weft_sleep_until_ns(uint64_t deadline)
{
    if (deadline >> 63)
        return EINVAL;
    struct weft_uthread *ut = weft_self();
    if (!ut) {
        struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        return 0;
    }
    if (deadline <= weft__now_ns())
        return 0;
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK; /* a signal handler that interrupted weft */
    struct weft__wait_rec *s = &ut->rec;
    weft_alarm_init(&s->tm, sleep_fire);
    s->tm.deadline = deadline;
    s->err = 0;
    weft_uthread_yield(sleep_cb, s);
    weft__alarm_stop_own(&s->tm); /* waits until sleep_fire has returned */
    return s->err;
}

int weft_sleep_ns(uint64_t ns)
{
    if (ns >> 63)
        return EINVAL;
    if (ns == 0 && weft_self()) {
        weft_yield();
        return 0;
    }
    uint64_t d = weft__now_ns() + ns;
    return weft_sleep_until_ns(d >> 63 ? (UINT64_MAX >> 1) : d);
}
