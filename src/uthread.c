/*
 * uthread.c — uthreads: spawn, join, detach, exit, yield, park, and
 * the two switch paths between a uthread and vcore context.
 *
 * State machine (struct weft_uthread.state):
 *   spawn:            BLOCKED  (a fresh thread is "blocked" until made runnable)
 *   runnable():       BLOCKED  -> RUNNABLE   (CAS; anything else aborts)
 *   run_uthread():    RUNNABLE -> RUNNING    (CAS; anything else aborts)
 *   yield to vcore:   RUNNING  -> BLOCKED    (in vcore_entry, before the callback)
 *   weft_yield():     BLOCKED  -> RUNNABLE   (its callback, then thread_paused)
 *   exit:             RUNNING  -> DONE       (under jlock, in vcore context)
 *   join / detach:    DONE     -> FREE       (memory back to a stack cache)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static __thread char tls_token; /* identity of an outside kernel thread */

/* current(): the calling uthread, or NULL. Only at the start of an
 * exported function, never cached across a switch (see weft__vc_at_entry). */
static struct weft_uthread *current(void)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    return vc ? vc->current : NULL;
}

weft_t weft_self(void)
{
    return current();
}

void *weft__self_token(void)
{
    struct weft_uthread *ut = current();
    return ut ? (void *)ut : (void *)&tls_token;
}

/* ---- switching ------------------------------------------------------------ */

/* switch_out() saves ut and enters vcore context at entry(vc); returns
 * when ut runs again (maybe on another vcore: vc is stale afterwards).
 * errno is per kernel thread: it is saved in ut->err here, through the
 * vcore's cached errno address, and run_on() writes it to the errno of
 * whichever vcore resumes ut, so no code touches errno across the switch (glibc's __errno_location is
 * "const": a compiler may reuse an address computed before it). */
static void switch_out(struct weft__vcore *vc, struct weft_uthread *ut, void (*entry)(void *))
{
    ut->err = *vc->errno_addr;
    weft__san_switch(&ut->san, &vc->san, vc->stack_lo, vc->stack_size);
    weft__ctx_save_and_call(&ut->ctx, vc->stack_top, entry, vc);
    weft__san_arrive(&ut->san, NULL, NULL);
}

void weft_uthread_yield(void (*cb)(struct weft_uthread *, void *), void *arg)
{
    struct weft__vcore *vc = weft__vc();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut)
        weft__panic("weft_uthread_yield() called outside a uthread");
    vc->cb = cb;
    vc->cb_arg = arg;
    switch_out(vc, ut, weft__vcore_entry);
}

/* run_on() is weft_run_uthread() for a caller that knows its vcore. */
static _Noreturn void run_on(struct weft__vcore *vc, struct weft_uthread *t)
{
    weft__vcore_busy(vc);
    /* Only the vcore that dequeued t may run it: a check, not a CAS. The
     * scheduler's queue lock ordered us after whoever made it runnable. */
    int st = atomic_load_explicit(&t->state, memory_order_acquire);
    if (WEFT__UNLIKELY(st != WEFT__RUNNABLE))
        weft__panic("uthread %llu run while in state %d (invariant 1: only a dequeued "
                    "runnable uthread may run)", (unsigned long long)t->id, st);
    atomic_store_explicit(&t->state, WEFT__RUNNING, memory_order_relaxed);
    if ((t->link.flags & WEFT_PINNED) && t->link.vcore != vc->id)
        weft__panic("uthread %llu pinned to vcore %d run on vcore %d",
                    (unsigned long long)t->id, t->link.vcore, vc->id);
    t->link.vcore = vc->id;
    atomic_store_explicit(&vc->nrun, atomic_load_explicit(&vc->nrun, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    vc->current = t;
    *vc->errno_addr = t->err;
    weft__san_switch(NULL, &t->san, t->stack_lo, t->stack_size);
    weft__san_vcore_left(&vc->san);
    weft__ctx_restore(&t->ctx);
}

_Noreturn void weft_run_uthread(struct weft_uthread *t)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* vcore context: nothing to go stale */
    if (!vc || vc->current)
        weft__panic("weft_run_uthread() called outside vcore context");
    run_on(vc, t);
}

void weft_uthread_runnable(struct weft_uthread *t)
{
    /* A kernel thread that is not a vcore (an offload helper, a pthread
     * posting a semaphore) is counted while it is inside the scheduler:
     * the uthread it wakes may finish and weft_shutdown() free the vcores
     * before the kick returns. */
    struct weft__vcore *vc = weft__vc_at_entry();
    bool outside = WEFT__UNLIKELY(vc == NULL);
    if (outside)
        atomic_fetch_add_explicit(&weft__rt.outside_wakers, 1, memory_order_acq_rel);
    /* A check, not a CAS (an RMW costs more than the rest of a wake-up):
     * only the one party that won the wait's own protocol (the park word,
     * the waiter's lock) gets here, and it publishes t through the
     * scheduler's queue; run_on() checks the state again. */
    int st = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (WEFT__UNLIKELY(st != WEFT__BLOCKED))
        weft__panic("uthread %llu made runnable while in state %d (invariant 1: a uthread "
                    "is on at most one run queue)", (unsigned long long)t->id, st);
    atomic_store_explicit(&t->state, WEFT__RUNNABLE, memory_order_relaxed);
    /* From a uthread, an application's scheduler (holding its queue lock)
     * must not be preempted: in_sched defers notifications. (The built-in
     * ones are weft's code, which is never preempted anyway.) */
    struct weft_uthread *me = WEFT__UNLIKELY(weft__rt.sched_foreign) && vc ? vc->current : NULL;
    if (me) {
        me->in_sched++;
        atomic_signal_fence(memory_order_seq_cst);
    }
    weft__rt.ops->thread_runnable(t);
    if (me) {
        atomic_signal_fence(memory_order_seq_cst);
        me->in_sched--;
    }
    if (outside)
        atomic_fetch_sub_explicit(&weft__rt.outside_wakers, 1, memory_order_release);
}

void weft_uthread_blocked(struct weft_uthread *t, int why)
{
    if (weft__rt.ops->thread_has_blocked)
        weft__rt.ops->thread_has_blocked(t, why);
}

/* ---- life and death ------------------------------------------------------- */

static _Atomic int shutdown_waiting; /* set while weft_shutdown waits for live == 0 */

static void live_dec(void)
{
    if (atomic_fetch_sub(WEFT__AT(&weft__rt.live), 1) == 1 && atomic_load(&shutdown_waiting))
        weft__futex_wake(&weft__rt.live, INT_MAX);
}

void weft__shutdown_waiting(bool on)
{
    atomic_store(&shutdown_waiting, on);
}

static void exit_cb(struct weft_uthread *ut, void *arg)
{
    (void)arg;
    weft__san_stack_free(&ut->san);
    weft__spin_lock(&ut->jlock);
    atomic_store_explicit(&ut->state, WEFT__DONE, memory_order_relaxed);
    struct weft__waiter *w = ut->joiner;
    if (w)
        w->status = 0;
    bool detached = ut->jflags & WEFT__J_DETACHED;
    weft__spin_unlock(&ut->jlock);
    if (detached)
        weft__uthread_free(ut);
    else if (w)
        weft__waiter_wake(w);
    live_dec();
}

static _Noreturn void uthread_finish(struct weft_uthread *ut, void *result)
{
    ut->result = result;
    struct weft__vcore *vc = weft__vc();
    vc->cb = exit_cb;
    vc->cb_arg = NULL;
    /* No local may be used from here: ASan frees this stack's fake frames. */
    weft__san_switch(NULL, &vc->san, vc->stack_lo, vc->stack_size);
    weft__ctx_save_and_call(&ut->ctx, vc->stack_top, weft__vcore_entry, vc);
    __builtin_unreachable();
}

static void uthread_start(void *arg)
{
    struct weft_uthread *ut = arg;
    weft__san_arrive(NULL, NULL, NULL);
    uthread_finish(ut, ut->fn(ut->arg));
}

#define KNOWN_FLAGS (WEFT_DETACHED | WEFT_STACK_COPY | WEFT_ON_VCORE | WEFT_PINNED)

int weft_spawn(weft_t *out, const weft_attr_t *attr, void *(*fn)(void *), void *arg)
{
    weft_attr_t a = { 0 };
    if (attr)
        a = *attr;
    if (!fn || (a.flags & ~KNOWN_FLAGS) || a.stack_size > ((size_t)1 << 30) ||
        (!out && !(a.flags & WEFT_DETACHED)))
        return EINVAL;
    if (a.flags & WEFT_STACK_COPY)
        return ENOTSUP;
    int r = weft__ensure_running();
    if (r)
        return r;
    bool placed = a.flags & (WEFT_ON_VCORE | WEFT_PINNED);
    if (placed && (a.vcore < 0 || a.vcore >= weft__rt.nvcores))
        return EINVAL;

    size_t size = a.stack_size ? weft__stack_round(a.stack_size) : weft__rt.stack_size;
    struct weft_uthread *t = weft__uthread_alloc(size);
    if (!t)
        return EAGAIN;
    t->link.next = NULL;
    t->link.data = NULL;
    t->link.prio = a.prio;
    t->link.vcore = placed ? a.vcore : -1;
    t->link.flags = a.flags;
    t->link.sched_flags = 0;
    t->id = atomic_fetch_add_explicit(&weft__rt.next_id, 1, memory_order_relaxed) + 1;
    t->fn = fn;
    t->arg = arg;
    t->result = NULL;
    t->jlock = 0;
    t->jflags = (a.flags & WEFT_DETACHED) ? WEFT__J_DETACHED : 0;
    t->joiner = NULL;
    t->err = 0;
    atomic_store_explicit(&t->park, WEFT__PARK_NONE, memory_order_relaxed);
    t->notif_depth = 0;
    t->in_sched = 0;
    t->notif_pinned = false;
    t->name[0] = 0;
    if (a.name) {
        strncpy(t->name, a.name, sizeof t->name - 1);
        t->name[sizeof t->name - 1] = 0;
    }
    weft__san_stack_new(&t->san, t->stack_lo, t->stack_size);
    weft__ctx_make(&t->ctx, t->stack_lo + t->stack_size, uthread_start, t);
    atomic_store_explicit(&t->state, WEFT__BLOCKED, memory_order_relaxed);
    atomic_fetch_add(WEFT__AT(&weft__rt.live), 1);
    if (out)
        *out = t; /* before it can run: it may read the handle, or finish */
    weft_uthread_runnable(t);
    return 0;
}

int weft_join(weft_t t, void **result)
{
    if (!t)
        return EINVAL;
    if (t == current())
        return EDEADLK;
    weft__spin_lock(&t->jlock);
    int st = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (st == WEFT__FREE || (t->jflags & (WEFT__J_DETACHED | WEFT__J_JOINING))) {
        weft__spin_unlock(&t->jlock);
        return EINVAL;
    }
    t->jflags |= WEFT__J_JOINING;
    if (st != WEFT__DONE) {
        struct weft__waiter w;
        weft__waiter_init(&w);
        t->joiner = &w;
        weft__wait(&t->jlock, NULL, &w, WEFT_FOREVER, WEFT_BLOCK_JOIN);
    } else {
        weft__spin_unlock(&t->jlock);
    }
    /* DONE, and the exit path released jlock: t is ours alone now. */
    if (result)
        *result = t->result;
    weft__uthread_free(t);
    return 0;
}

int weft_detach(weft_t t)
{
    if (!t)
        return EINVAL;
    weft__spin_lock(&t->jlock);
    int st = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (st == WEFT__FREE || (t->jflags & (WEFT__J_DETACHED | WEFT__J_JOINING))) {
        weft__spin_unlock(&t->jlock);
        return EINVAL;
    }
    t->jflags |= WEFT__J_DETACHED;
    weft__spin_unlock(&t->jlock);
    if (st == WEFT__DONE)
        weft__uthread_free(t);
    return 0;
}

_Noreturn void weft_exit(void *result)
{
    struct weft_uthread *ut = current();
    if (!ut)
        pthread_exit(result);
    uthread_finish(ut, result);
}

uint64_t weft_id(weft_t t)
{
    return t ? t->id : 0;
}

const char *weft_name(weft_t t)
{
    return t && t->name[0] ? t->name : NULL;
}

int weft_setprio(weft_t t, int prio)
{
    if (!t)
        return EINVAL;
    t->link.prio = prio;
    return 0;
}

/* ---- yield, park -------------------------------------------------------- */

/* yield_entry() is vcore context after weft_yield(): run the chores if due,
 * then requeue the uthread and, with the scheduler's thread_yield op, pick
 * and run the next one directly. */
static void yield_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = weft__vcore_arrive(vc);
    const struct weft_sched_ops *ops = weft__rt.ops;
    atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
    if (weft__chores_due(vc))
        weft__vcore_chores(vc); /* before picking: a due alarm may wake someone */
    if (ops->thread_yield) {
        struct weft_uthread *next = ops->thread_yield(ut);
        if (next)
            run_on(vc, next);
    } else {
        ops->thread_paused(ut);
    }
    weft__vcore_loop(vc);
}

void weft_yield(void)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* vc is not used after the switch */
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut) {
        sched_yield();
        return;
    }
    switch_out(vc, ut, yield_entry);
}

/* notify_entry() is vcore context after a notification switched a uthread
 * out (weft__notif_deliver): handle the events, then resume it, or, if it
 * was preempted, queue it at the back and pick again. */
static void notify_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = weft__vcore_arrive(vc);
    atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
    vc->preempt_now = false;
    weft__events_handle(vc);
    if (!vc->preempt_now)
        run_on(vc, ut);
    vc->preempt_now = false;
    atomic_store_explicit(&vc->st.taken, atomic_load_explicit(&vc->st.taken, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    weft__rt.ops->thread_paused(ut);
    weft__vcore_loop(vc);
}

void weft__notif_deliver(struct weft__vcore *vc, struct weft_uthread *ut)
{
    switch_out(vc, ut, notify_entry);
}

/* park_entry() is vcore context after weft_park(): publish PARKED, after
 * which weft_unpark() makes the uthread runnable; or, when a token arrived
 * while it was switching out, consume it and run the uthread again at once
 * (the park returns, as it would have with the token there before the
 * switch). A scheduler that follows blocks hears of this one before it is
 * published, and of the token as a wake-up. */
static void park_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = weft__vcore_arrive(vc);
    atomic_store_explicit(&ut->state, WEFT__BLOCKED, memory_order_relaxed);
    bool told = weft__rt.ops->thread_has_blocked != NULL;
    if (told)
        weft_uthread_blocked(ut, WEFT_BLOCK_PARK);
    int exp = WEFT__PARK_NONE;
    if (WEFT__UNLIKELY(!atomic_compare_exchange_strong(&ut->park, &exp, WEFT__PARK_PARKED))) {
        atomic_store(&ut->park, WEFT__PARK_NONE); /* seq_cst: see weft_park() */
        if (told) {
            weft_uthread_runnable(ut);
        } else {
            atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
            run_on(vc, ut);
        }
    }
    weft__vcore_loop(vc);
}

int weft_park(void)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* vc is not used after the switch */
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut)
        return EPERM;
    /* A token is consumed with a full-barrier RMW, never a plain store: the
     * caller's next look at its wake-up condition must not be ordered before
     * the consumption, or an unpark that found the token still there (and
     * so did nothing) would be lost. Without a token, park_entry's CAS is
     * that barrier. */
    if (atomic_load_explicit(&ut->park, memory_order_relaxed) == WEFT__PARK_TOKEN &&
        atomic_exchange(&ut->park, WEFT__PARK_NONE) == WEFT__PARK_TOKEN)
        return 0;
    switch_out(vc, ut, park_entry);
    return 0;
}

int weft_unpark(weft_t t)
{
    if (!t)
        return EINVAL;
    /* Always an RMW, even when a token is already there (TOKEN -> TOKEN): a
     * plain load seeing TOKEN could be ordered before the caller's store to
     * the condition the parker re-checks, and the parker could consume that
     * token, miss the store and park for good (store buffering). */
    int s = atomic_load_explicit(&t->park, memory_order_relaxed);
    for (;;) {
        int next = s == WEFT__PARK_PARKED ? WEFT__PARK_NONE : WEFT__PARK_TOKEN;
        if (atomic_compare_exchange_weak(&t->park, &s, next))
            break;
    }
    if (s == WEFT__PARK_PARKED)
        weft_uthread_runnable(t);
    return 0;
}

