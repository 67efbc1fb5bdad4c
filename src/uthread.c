/*
 * uthread.c — uthreads: spawn, join, detach, exit, yield, park, and the
 * switch paths: through vcore context, and the direct hand-off from one
 * uthread to the next.
 *
 * State machine (struct weft_uthread.state):
 *   spawn:            BLOCKED  (a fresh thread is "blocked" until made runnable)
 *   runnable():       BLOCKED  -> RUNNABLE   (check; anything else aborts)
 *   start_on():       RUNNABLE -> RUNNING    (check; anything else aborts)
 *   block, park:      RUNNING  -> BLOCKED    (after the save, before the callback:
 *                                             weft__vcore_entry, handoff_entry,
 *                                             park_entry or park_handoff_entry;
 *                                             park_swap: before the save, with
 *                                             the park word publishing it after)
 *   yield to a local successor:
 *                     BLOCKED  -> RUNNABLE   (yield_cb, then thread_paused; or
 *                                             yielded_cb, take_yield having queued it)
 *   yield through vcore context, preemption:
 *                     RUNNING  -> RUNNABLE   (yield_entry, notify_entry; thread_paused
 *                                             only if another uthread runs)
 *   exit:             RUNNING  -> DONE       (in exit_cb: vcore context or the
 *                                             successor's stack; under jlock, or,
 *                                             if exit_wake woke the joiner before
 *                                             the switch, a release store the
 *                                             joiner waits for)
 *   inline join:      RUNNABLE -> RUNNING -> DONE (the child, run on its joiner's
 *                                             stack; no jlock: inline_done)
 *   join / detach:    DONE     -> FREE       (memory back to a stack cache)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static __thread uint16_t tls_token; /* identity of an outside kernel thread: its
                                      address + 1, odd, never a uthread's */
/* In a fork child: the uthread the caller was in the parent (its identity
 * for the locks it held), else NULL. */
static __thread struct weft_uthread *tls_forked_from;
static _Atomic int shutdown_waiting; /* set while weft_shutdown waits for live == 0 */

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
    if (ut)
        return ut;
    return tls_forked_from ? (void *)tls_forked_from : (void *)((char *)&tls_token + 1);
}

void weft__uthread_forked(struct weft_uthread *ut)
{
    tls_forked_from = ut;
    atomic_store_explicit(&shutdown_waiting, 0, memory_order_relaxed);
}

/* forked_exit(): a fork child's copy of a uthread has finished its
 * function: it was the process's last thread. */
static _Noreturn void forked_exit(void)
{
    exit(0);
}

/* ---- switching ------------------------------------------------------------ */

/* WEFT__CRIT_SWITCH is set in weft__tls_crit from a uthread's first step
 * towards a switch (its scheduler's pick) until a uthread arrives on this
 * kernel thread (or the switch is called off): a signal handler's weft call
 * meanwhile defers its work (see internal.h). */
static inline void switch_begin(void)
{
    WEFT__CRIT_OR(WEFT__CRIT_SWITCH);
    atomic_signal_fence(memory_order_seq_cst);
}

/* Not inlined: it runs after a switch, maybe on another kernel thread, and
 * a compiler may keep a TLS address computed before the switch (invariant
 * 2); a call of its own computes it afresh. */
static WEFT__NOINLINE void switch_end(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    WEFT__CRIT_AND(~WEFT__CRIT_SWITCH);
}

/* switch_out() saves ut and enters vcore context at entry(vc); returns
 * when ut runs again (maybe on another vcore: vc is stale afterwards).
 * errno is per kernel thread: it is saved in ut->err here, through the
 * vcore's cached errno address, and start_on() writes it to the errno of
 * whichever vcore resumes ut, so no code touches errno across the switch
 * (glibc's __errno_location is "const": a compiler may reuse an address
 * computed before it). */
static void switch_out(struct weft__vcore *vc, struct weft_uthread *ut, void (*entry)(void *))
{
    ut->err = *vc->errno_addr;
    weft__san_switch(&ut->san, &vc->san, vc->stack_lo, vc->stack_size);
    weft__ctx_save_and_call(&ut->ctx, vc->stack_top, entry, vc);
    weft__san_arrive(&ut->san, NULL, NULL);
    switch_end();
}

/* pin_moved(): t, pinned to another vcore, was dequeued here. Only a pin
 * of weft_notifs_disable() to a vcore that went offline meanwhile may move
 * (a release under way when the pin was taken: nothing can run it there);
 * its count moves with it. Anything else is a scheduler that ran a pinned
 * uthread on the wrong vcore. */
static WEFT__NOINLINE void pin_moved(struct weft__vcore *vc, struct weft_uthread *t, int from)
{
    struct weft__vcore *was = &weft__rt.vcores[from];
    if (!t->notif_pinned || atomic_load_explicit(&was->online, memory_order_acquire) == 1)
        weft__panic("uthread %llu pinned to vcore %d run on vcore %d",
                    (unsigned long long)t->id, from, vc->id);
    atomic_fetch_sub_explicit(&was->npinned, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&vc->npinned, 1, memory_order_relaxed);
}

/* start_run() makes t, dequeued by this vcore, the running uthread of vc:
 * everything of a switch into t but the restore itself. errno_addr is
 * vc->errno_addr, read once by a caller that saved the leaving uthread's
 * errno through it; pin_check false: t is not WEFT_PINNED (the caller
 * looked). */
static inline void start_run(struct weft__vcore *vc, struct weft_uthread *t, int *errno_addr,
                             bool pin_check)
{
    /* Only the vcore that dequeued t may run it: a check, not a CAS. The
     * scheduler's queue ordered us after whoever made it runnable. */
    int st = atomic_load_explicit(&t->state, memory_order_acquire);
    if (WEFT__UNLIKELY(st != WEFT__RUNNABLE))
        weft__panic("uthread %llu run while in state %d (invariant 1: only a dequeued "
                    "runnable uthread may run)", (unsigned long long)t->id, st);
    atomic_store_explicit(&t->state, WEFT__RUNNING, memory_order_relaxed);
    int from = t->link.vcore;
    t->link.vcore = vc->id;
    weft__stat_add(&vc->nrun, 1);
    vc->current = t;
    *errno_addr = t->err;
    /* Last, so that the common path keeps nothing across a call. */
    if (pin_check && WEFT__UNLIKELY(t->link.flags & WEFT_PINNED) && from != vc->id)
        pin_moved(vc, t, from);
}

static inline void start_on(struct weft__vcore *vc, struct weft_uthread *t)
{
    start_run(vc, t, vc->errno_addr, true);
}

/* handoff_start() ends every hand-off entry (on the successor's stack):
 * the successor handoff() chose becomes current. handoff_to is cleared
 * first, so that an entry whose common path calls nothing ends in it. */
static inline void handoff_start(struct weft__vcore *vc)
{
    struct weft_uthread *next = vc->handoff_to;
    vc->handoff_to = NULL;
    start_on(vc, next);
}

static void uthread_start(void *arg);

/* run_on() is weft_run_uthread() for a caller that knows its vcore. A
 * uthread of an unfinished weft_yield() (vc->pending) goes to the
 * scheduler first. */
static _Noreturn void run_on(struct weft__vcore *vc, struct weft_uthread *t)
{
    weft__vcore_leave_idle(vc);
    if (WEFT__UNLIKELY(vc->pending != NULL)) {
        struct weft_uthread *p = vc->pending;
        vc->pending = NULL;
        weft__rt.ops->thread_paused(p);
    }
    if (WEFT__UNLIKELY(t->copy)) {
        if (!weft__sc_enter(vc, t, uthread_start))
            weft__vcore_restart(vc); /* its run stack is busy elsewhere: t went there */
    } else if (WEFT__UNLIKELY(vc->sc.held != NULL)) {
        weft__sc_release(vc); /* stack-copy protocol, step 4 (stackcopy.c) */
    }
    start_on(vc, t);
    WEFT__TLS_ENTER(vc, t);
    weft__stat_add(&vc->st.vcruns, 1);
    weft__san_vcore_depart(&vc->san, &t->san, t->stack_lo, t->stack_size);
    weft__san_vcore_left(&vc->san);
    weft__ctx_restore(&t->ctx);
}

struct weft_uthread *weft_vcore_yielder(void)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* a scheduler op: nothing to go stale */
    if (!vc)
        return NULL;
    return vc->current ? (vc->yielding ? vc->current : NULL) : vc->pending;
}

_Noreturn void weft_run_uthread(struct weft_uthread *t)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* vcore context: nothing to go stale */
    if (!vc || vc->current)
        weft__panic("weft_run_uthread() called outside vcore context");
    run_on(vc, t);
}

_Noreturn void weft__vcore_next(struct weft__vcore *vc)
{
    struct weft_uthread *t = vc->copy_next;
    if (t) {
        vc->copy_next = NULL;
        run_on(vc, t);
    }
    weft__vcore_loop(vc);
}

/* ---- the direct hand-off --------------------------------------------------------
 *
 * When the scheduler names a local successor (ops->take_local), a uthread
 * that blocks, yields or exits switches straight to it: weft__ctx_switch()
 * saves the uthread, moves to the successor's stack and runs handoff_entry()
 * there, which completes the save (from here others may touch the uthread),
 * runs the blocking callback and makes the successor current; then the
 * successor resumes. The callback runs under vcore-context rules: current
 * is NULL meanwhile, so a notification defers and weft_self() is NULL. Due
 * chores (events, timers, the paced poll) take the path through vcore
 * context instead, where they run. */

/* An application's scheduler (not weft's code, so preemptible) is called
 * from a uthread with notifications held off (in_sched): it may hold its
 * queue lock. (The built-in ones are weft's code, never preempted.) */
static struct weft_uthread *take_local_foreign(int vcore)
{
    struct weft_uthread *me = weft__vc_at_entry()->current;
    me->in_sched++;
    atomic_signal_fence(memory_order_seq_cst);
    struct weft_uthread *t = weft__rt.ops->take_local(vcore);
    atomic_signal_fence(memory_order_seq_cst);
    me->in_sched--;
    return t;
}

static struct weft_uthread *take_yield_foreign(int vcore, struct weft_uthread *self, int *queued)
{
    self->in_sched++;
    atomic_signal_fence(memory_order_seq_cst);
    struct weft_uthread *t = weft__rt.ops->take_yield(vcore, self, queued);
    atomic_signal_fence(memory_order_seq_cst);
    self->in_sched--;
    return t;
}

static void thread_runnable_foreign(struct weft_uthread *t)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    struct weft_uthread *me = vc ? vc->current : NULL;
    if (!me) {
        weft__rt.ops->thread_runnable(t);
        return;
    }
    me->in_sched++;
    atomic_signal_fence(memory_order_seq_cst);
    weft__rt.ops->thread_runnable(t);
    atomic_signal_fence(memory_order_seq_cst);
    me->in_sched--;
}

static int reclaim_foreign(int vcore, struct weft_uthread *t)
{
    struct weft_uthread *me = weft__vc_at_entry()->current;
    me->in_sched++;
    atomic_signal_fence(memory_order_seq_cst);
    int r = weft__rt.ops->reclaim(vcore, t);
    atomic_signal_fence(memory_order_seq_cst);
    me->in_sched--;
    return r;
}

void weft__sched_resolve(struct weft__runtime *rt)
{
    const struct weft_sched_ops *ops = rt->ops;
    if (rt->sched_foreign) {
        rt->take_local = ops->take_local ? take_local_foreign : NULL;
        rt->take_yield = ops->take_yield ? take_yield_foreign : NULL;
        rt->thread_runnable = thread_runnable_foreign;
        rt->reclaim = ops->reclaim ? reclaim_foreign : NULL;
    } else {
        rt->take_local = ops->take_local;
        rt->take_yield = ops->take_yield;
        rt->thread_runnable = ops->thread_runnable;
        rt->reclaim = ops->reclaim;
    }
    if (!rt->take_local)
        rt->take_yield = NULL; /* the hand-off is take_local's: no take_local, no hand-off */
    rt->has_blocked = ops->thread_has_blocked != NULL;
    rt->swap_block_off = rt->has_blocked || weft__tls_uthread; /* weft__tls_init came first */
}

/* vc_slot() is vc->nslot (a scheduler may take it away at any time). */
static inline struct weft_next_slot *vc_slot(struct weft__vcore *vc)
{
    return __atomic_load_n(&vc->nslot, __ATOMIC_RELAXED); /* others may set NULL */
}

/* slot_peek() is the uthread in ns, the scheduler's next slot of vc (NULL:
 * none), that the runtime may run now without asking the scheduler (struct
 * weft_next_slot in <weft/sched.h>: within its budget, ask clear), or
 * NULL; slot_take() takes it. On vc, under the switch mark. */
static inline struct weft_uthread *slot_peek(struct weft_next_slot *ns)
{
    if (!ns || !ns->budget || __atomic_load_n(&ns->ask, __ATOMIC_RELAXED))
        return NULL;
    return __atomic_load_n(&ns->t, __ATOMIC_RELAXED);
}

static inline void slot_take(struct weft_next_slot *ns)
{
    ns->budget--;
    __atomic_store_n(&ns->t, NULL, __ATOMIC_RELAXED);
}

/* local_pick() asks the scheduler for the local successor of the uthread
 * running on vc, counting the decision; NULL when there is none, or when
 * chores are due. For a yield of `yielder`, through take_yield when the
 * scheduler has it (*queued: it queued the yielder too). */
static inline struct weft_uthread *local_pick(struct weft__vcore *vc, struct weft_uthread *yielder,
                                              int *queued)
{
    switch_begin();
    struct weft_uthread *(*take_local)(int) = weft__rt.take_local;
    if (!take_local || weft__chores_due(vc))
        return NULL;
    struct weft_uthread *t;
    struct weft_next_slot *ns;
    if (!yielder && (t = slot_peek(ns = vc_slot(vc))) != NULL) {
        slot_take(ns); /* no call: the runtime runs the scheduler's next itself */
    } else {
        t = yielder && weft__rt.take_yield /* under the switch mark */
                ? weft__rt.take_yield(vc->id, yielder, queued)
                : take_local(vc->id);
    }
    if (t)
        vc->decisions++;
    return t;
}

static inline struct weft_uthread *local_next(struct weft__vcore *vc)
{
    return local_pick(vc, NULL, NULL);
}

/* handoff_entry() runs on the successor's stack: see above. */
static void handoff_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    WEFT__TLS_ENTER(vc, vc->handoff_to); /* before the callback publishes ut */
    struct weft_uthread *ut = vc->current;
    vc->current = NULL;
    if (WEFT__UNLIKELY(!ut->guarded))
        weft__stack_leave(vc, ut);
    atomic_store_explicit(&ut->state, WEFT__BLOCKED, memory_order_relaxed);
    vc->in_cb = true;
    vc->cb(ut, vc->cb_arg);
    vc->in_cb = false;
    if (WEFT__UNLIKELY(vc->sc.held != NULL))
        weft__sc_release(vc); /* ut was stack-copy; its callback's arguments are used */
    handoff_start(vc);
}

/* handoff() stops ut (running on vc) and resumes next (dequeued by
 * local_next) through entry, which runs on next's stack and ends with
 * handoff_start(vc); returns when ut runs again. A stack-copy next has no
 * stack to run entry on until it is copied in (maybe over ut's own frames):
 * ut then goes through vcore context (vc_entry, the same step there), which
 * resumes next afterwards (weft__vcore_next). */
static inline void handoff(struct weft__vcore *vc, struct weft_uthread *ut,
                           struct weft_uthread *next, void (*entry)(void *),
                           void (*vc_entry)(void *))
{
    if (WEFT__UNLIKELY(next->copy)) {
        vc->copy_next = next;
        switch_out(vc, ut, vc_entry);
        return;
    }
    ut->err = *vc->errno_addr;
    vc->handoff_to = next;
    weft__san_switch(&ut->san, &next->san, next->stack_lo, next->stack_size);
    weft__ctx_switch(&ut->ctx, next->ctx.sp, entry, vc);
    weft__san_arrive(&ut->san, NULL, NULL);
    switch_end();
}

/* yield_to() ends weft_uthread_yield() once the successor is known:
 * cb(ut, arg) runs after ut is saved, on next's stack or in vcore context. */
static inline void yield_to(struct weft__vcore *vc, struct weft_uthread *ut, struct weft_uthread *next,
                            void (*cb)(struct weft_uthread *, void *), void *arg)
{
    vc->cb = cb;
    vc->cb_arg = arg;
    if (next)
        handoff(vc, ut, next, handoff_entry, weft__vcore_entry);
    else
        switch_out(vc, ut, weft__vcore_entry);
}

void weft_uthread_yield(void (*cb)(struct weft_uthread *, void *), void *arg)
{
    struct weft__vcore *vc = weft__vc();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut)
        weft__panic("weft_uthread_yield() called outside a uthread");
    yield_to(vc, ut, local_next(vc), cb, arg);
}

/* swap_plain(): a switch from ut to next can be a swap (yield_swap,
 * park_swap) with shared TLS, a guarded stack (no canary to read, no run
 * stack to give back) and a next that is not stack-copy. */
static inline bool swap_plain(const struct weft_uthread *ut, const struct weft_uthread *next)
{
    return !(weft__tls_uthread | !ut->guarded | next->copy);
}

/* swap_begin() is what a swap does before the sanitizers hear of it and it
 * switches, where nobody else can reach ut or next yet: ut's errno saved
 * and its new state, next started (current). */
static inline void swap_begin(struct weft__vcore *vc, struct weft_uthread *ut, struct weft_uthread *next,
                              int state, bool pin_check)
{
    int *errno_addr = vc->errno_addr;
    ut->err = *errno_addr;
    atomic_store_explicit(&ut->state, state, memory_order_relaxed);
    start_run(vc, next, errno_addr, pin_check);
}

/* swap_plain_block(): a block (a park, a wait) can be a swap: swap_plain
 * and no scheduler to tell of it (thread_has_blocked). */
static inline bool swap_plain_block(const struct weft_uthread *ut, const struct weft_uthread *next)
{
    return !(weft__rt.swap_block_off | !ut->guarded | next->copy);
}

/* swap_to() is how the three swaps end after swap_begin(): the sanitizers
 * told of the move to next, the switch by the primitive of `kind` (word:
 * the park word or the spinlock it releases), ut's arrival back told, the
 * switch mark ended. Returns when ut runs again. */
enum swap_kind { SWAP_YIELD, SWAP_PARK, SWAP_UNLOCK };
static void park_token_cb(void *arg);

static inline void swap_to(struct weft_uthread *ut, struct weft_uthread *next, enum swap_kind kind,
                           void *word)
{
    weft__san_switch(&ut->san, &next->san, next->stack_lo, next->stack_size);
    switch (kind) {
    case SWAP_YIELD:
        weft__ctx_swap(&ut->ctx, next->ctx.sp);
        break;
    case SWAP_PARK:
        weft__ctx_swap_park(&ut->ctx, next->ctx.sp, word, park_token_cb, ut);
        break;
    case SWAP_UNLOCK:
        weft__ctx_swap_unlock(&ut->ctx, next->ctx.sp, word);
        break;
    }
    weft__san_arrive(&ut->san, NULL, NULL);
    switch_end();
}

/* unlock_cb() is weft__block_unlock()'s callback: ut blocked, *lock
 * released (after ut is saved). */
struct unlock_args {
    uint32_t *lock;
    int why;
};

static void unlock_cb(struct weft_uthread *ut, void *arg)
{
    struct unlock_args *a = arg;
    weft_uthread_blocked(ut, a->why);
    weft__spin_unlock(a->lock);
}

/* weft__block_unlock() blocks the calling uthread, which holds spinlock
 * *lock (its only one) and is queued where a waker that takes *lock finds
 * it. When the scheduler names a local successor and nothing is to be told
 * of the block (shared TLS, a guarded stack, no thread_has_blocked, a
 * successor that is not stack-copy: swap_plain), the uthread is marked
 * blocked and the successor started before the switch (nobody else can
 * reach either while *lock is held), and weft__ctx_swap_unlock() releases
 * *lock on the successor's stack once the uthread is saved: no hand-off
 * entry, no callback. The lock's crit count is lowered before the switch;
 * the switch mark (local_next) keeps signal handlers out until switch_end.
 * Otherwise the way of weft_uthread_yield(), with unlock_cb. */
void weft__block_unlock(uint32_t *lock, int why)
{
    struct weft__vcore *vc = weft__vc();
    struct weft_uthread *ut = vc->current;
    struct weft_uthread *next = local_next(vc);
    if (!next || !swap_plain_block(ut, next)) {
        /* On our stack, which stays ours until the callback has run (a
         * stack-copy uthread's too), not in ut->rec: a timed wait's timeout
         * may be reading that already. */
        struct unlock_args a = { lock, why };
        yield_to(vc, ut, next, unlock_cb, &a);
        return;
    }
    swap_begin(vc, ut, next, WEFT__BLOCKED, true);
    WEFT__SPIN_RELEASING(lock); /* TSan: the waker's lock acquires what ut wrote */
    WEFT__CRIT_ADD(~0u);        /* the lock's count (-1); the switch mark stays */
    swap_to(ut, next, SWAP_UNLOCK, lock);
}

/* runnable_outside() is runnable() on a kernel thread that is not a
 * vcore (an offload helper, a pthread posting a semaphore): it is counted
 * while it is inside the scheduler, since the uthread it wakes may finish
 * and weft_shutdown() free the vcores before the kick returns. */
static WEFT__NOINLINE void runnable_outside(struct weft_uthread *t)
{
    atomic_fetch_add_explicit(&weft__rt.outside_wakers, 1, memory_order_acq_rel);
    int st = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (WEFT__UNLIKELY(st != WEFT__BLOCKED))
        weft__panic("uthread %llu made runnable while in state %d (invariant 1: a uthread "
                    "is on at most one run queue)", (unsigned long long)t->id, st);
    atomic_store_explicit(&t->state, WEFT__RUNNABLE, memory_order_relaxed);
    t->link.waker = -1;
    t->link.by_uthread = 0;
    if (WEFT__UNLIKELY(t->copy && t->rs != NULL))
        weft__sc_wake(-1, t);
    weft__crit_enter();
    weft__rt.thread_runnable(t);
    weft__crit_leave();
    atomic_fetch_sub_explicit(&weft__rt.outside_wakers, 1, memory_order_release);
}

/* runnable_copy() is the end of runnable() for a started stack-copy
 * uthread: first to its run stack's holder, if another vcore holds it. (Out
 * of line: the common path keeps no register across its one call.) */
static WEFT__NOINLINE void runnable_copy(struct weft__vcore *vc, struct weft_uthread *t)
{
    weft__sc_wake(vc->id, t);
    weft__crit_enter();
    weft__rt.thread_runnable(t);
    weft__crit_leave();
}

/* sched_runnable() hands t to the scheduler's thread_runnable, under the
 * crit count (a signal handler's wake-up meanwhile defers). Out of line:
 * the wake-up into the next slot (slot_wake) keeps nothing across a call. */
static WEFT__NOINLINE void sched_runnable(struct weft_uthread *t)
{
    weft__crit_enter();
    weft__rt.thread_runnable(t);
    weft__crit_leave();
}

/* slot_wake() is runnable_by() for a wake-up by a uthread running on vc of
 * t, which last ran here, into the scheduler's next slot (struct
 * weft_next_slot in <weft/sched.h>): no call into the scheduler unless t
 * displaces another. Under the crit count, as a scheduler op would be: a
 * signal handler's unpark meanwhile defers instead of writing the slot. */
static inline void slot_wake(struct weft__vcore *vc, struct weft_next_slot *ns, struct weft_uthread *t)
{
    weft__crit_enter();
    struct weft_uthread *old = __atomic_load_n(&ns->t, __ATOMIC_RELAXED);
    __atomic_store_n(&ns->t, t, __ATOMIC_RELAXED);
    weft__crit_leave();
    if (WEFT__UNLIKELY(old != NULL)) {
        old->link.waker = vc->id;
        old->link.by_uthread = 3;
        sched_runnable(old);
    }
}

/* runnable_by() is runnable() on a vcore, by (t->link.by_uthread) known;
 * wake: t is woken (it has run), not spawned. */
static inline void runnable_by(struct weft__vcore *vc, struct weft_uthread *t, int by, bool wake)
{
    /* A check, not a CAS (an RMW costs more than the rest of a wake-up):
     * only the one party that won the wait's own protocol (the park word,
     * the waiter's lock) gets here, and it publishes t through the
     * scheduler's queue; start_on() checks the state again. */
    int st = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (WEFT__UNLIKELY(st != WEFT__BLOCKED))
        weft__panic("uthread %llu made runnable while in state %d (invariant 1: a uthread "
                    "is on at most one run queue)", (unsigned long long)t->id, st);
    atomic_store_explicit(&t->state, WEFT__RUNNABLE, memory_order_relaxed);
    /* A started stack-copy uthread (t->rs lies in the struct's second line,
     * read only when t is stack-copy) goes to its run stack's holder first. */
    bool started_copy = WEFT__UNLIKELY(t->copy) && t->rs != NULL;
    struct weft_next_slot *ns = vc_slot(vc);
    if (wake && by == 1 && ns && t->link.vcore == vc->id && !(t->link.flags & WEFT_PINNED) &&
        !started_copy) {
        slot_wake(vc, ns, t); /* the scheduler hears nothing: waker and by_uthread are not set */
        return;
    }
    t->link.waker = vc->id; /* for thread_runnable (<weft/sched.h>) */
    t->link.by_uthread = by;
    if (WEFT__UNLIKELY(started_copy))
        runnable_copy(vc, t);
    else
        sched_runnable(t);
}

/* runnable() is weft_uthread_runnable() for a caller that read its vcore
 * (NULL: a kernel thread that is not a vcore) at its entry; wake as for
 * runnable_by(). */
static inline void runnable_as(struct weft__vcore *vc, struct weft_uthread *t, bool wake)
{
    if (WEFT__UNLIKELY(vc == NULL)) {
        runnable_outside(t);
        return;
    }
    runnable_by(vc, t, (vc->current != NULL) | (vc->in_cb << 1), wake); /* current is NULL in cb */
}

static inline void runnable(struct weft__vcore *vc, struct weft_uthread *t)
{
    runnable_as(vc, t, true);
}

void weft_uthread_runnable(struct weft_uthread *t)
{
    runnable(weft__vc_at_entry(), t);
}

void weft_uthread_blocked(struct weft_uthread *t, int why)
{
    if (weft__rt.has_blocked)
        weft__rt.ops->thread_has_blocked(t, why);
}

/* ---- life and death ------------------------------------------------------- */


/* The count of live uthreads (rt.live, which weft_shutdown waits to see at
 * 0) is kept without a run-wide RMW per spawn and per exit: a vcore takes
 * LIVE_BATCH at a time (vc->live_credit) and spends one per spawn; an exit
 * there gives one back to it; it returns what it holds when it holds too
 * much and whenever it goes idle (weft__live_return). rt.live is therefore
 * never below the number of uthreads alive, and reaches 0 once every one
 * has finished and every vcore has gone idle. Outside threads count one at
 * a time. */
#define LIVE_BATCH 64

void weft__live_return(struct weft__vcore *vc, int n)
{
    vc->live_credit -= n;
    if (atomic_fetch_sub_explicit(WEFT__AT(&weft__rt.live), (uint32_t)n, memory_order_seq_cst) == (uint32_t)n &&
        atomic_load_explicit(&shutdown_waiting, memory_order_seq_cst))
        weft__futex_wake(&weft__rt.live, INT_MAX);
}

/* live_inc(): a uthread is spawned, by vc (NULL: an outside thread). */
static void live_inc(struct weft__vcore *vc)
{
    if (!vc) {
        atomic_fetch_add_explicit(WEFT__AT(&weft__rt.live), 1, memory_order_seq_cst);
        return;
    }
    if (WEFT__UNLIKELY(vc->live_credit == 0)) {
        atomic_fetch_add_explicit(WEFT__AT(&weft__rt.live), LIVE_BATCH, memory_order_seq_cst);
        vc->live_credit = LIVE_BATCH;
        weft__stat_add(&vc->st.shared_rmw, 1);
    }
    vc->live_credit--;
}

/* live_dec(): a uthread finished, its exit completing on this vcore. */
static void live_dec(void)
{
    struct weft__vcore *vc = weft__vc();
    if (WEFT__UNLIKELY(++vc->live_credit > 2 * LIVE_BATCH))
        weft__live_return(vc, LIVE_BATCH);
}

void weft__shutdown_waiting(bool on)
{
    atomic_store_explicit(&shutdown_waiting, on, memory_order_seq_cst);
}

/* exit_cb() is the callback of a finishing uthread's last switch, run
 * once it is off its stack: it is DONE, and its joiner (unless exit_wake
 * woke it already: arg non-NULL) is woken, or a detached one freed. */
static void exit_cb(struct weft_uthread *ut, void *arg)
{
    weft__san_stack_free(&ut->san);
    if (arg) { /* the joiner is awake and frees ut once it sees DONE: touch nothing after */
        atomic_store_explicit(&ut->state, WEFT__DONE, memory_order_release);
        live_dec();
        return;
    }
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

static _Noreturn void inline_finish(struct weft_uthread *t, void *result);

/* exit_wake() wakes the uthread that waits in weft_join() for ut, which is
 * finishing on vc (in a switch: switch_begin), before ut picks its
 * successor, so that the joiner can be that successor: a direct hand-off
 * instead of a trip through vcore context after exit_cb woke it. The wake
 * is the one exit_cb would make (by a blocking callback: the scheduler
 * puts the joiner behind work queued here, as then). The joiner waits for
 * DONE (weft_join) before it frees ut, which exit_cb sets once ut is off
 * its stack; it finds it set unless another vcore took it meanwhile. True
 * if it woke one. A joiner that is a kernel thread is left to exit_cb. */
static bool exit_wake(struct weft__vcore *vc, struct weft_uthread *ut)
{
    weft__spin_lock(&ut->jlock);
    struct weft__waiter *w = ut->joiner;
    struct weft_uthread *j = w ? w->ut : NULL;
    if (j) {
        w->status = 0;
        ut->joiner = NULL;
    }
    weft__spin_unlock(&ut->jlock);
    if (j)
        runnable_by(vc, j, 2, true);
    return j != NULL;
}

/* uthread_finish() ends the calling uthread ut with result. Inline in its
 * two callers, so that a uthread that returns from its function (entered
 * by a jump: weft__ctx_trampoline) leaves the CPU's return stack as it
 * found it but for the one call of the final switch: the joiner it wakes
 * then returns up its own frames with right predictions. */
static inline __attribute__((always_inline)) _Noreturn void
uthread_finish(struct weft_uthread *ut, void *result)
{
    if (ut->specific) /* thread keys' destructors: they may block */
        weft__keys_exit(ut);
    if (WEFT__UNLIKELY(ut->tls != NULL))
        weft__tls_exit(ut);
    if (WEFT__UNLIKELY(ut->copy_flags & WEFT__SC_INLINE))
        inline_finish(ut, result); /* run by its joiner: back to the joiner */
    ut->result = result;
    struct weft__vcore *vc = weft__vc();
    if (WEFT__UNLIKELY(ut->link.flags & WEFT_PINNED)) /* a notification pin too */
        atomic_fetch_sub_explicit(&vc->npinned, 1, memory_order_relaxed);
    switch_begin(); /* from here no signal handler's weft call runs here (local_next) */
    bool woke = exit_wake(vc, ut);
    struct weft_uthread *next = local_next(vc);
    vc->cb = exit_cb;
    vc->cb_arg = woke ? ut : NULL;
    if (WEFT__UNLIKELY(ut->copy))
        ut->copy_flags |= WEFT__SC_EXITING; /* nothing to copy out */
    if (WEFT__UNLIKELY(next && next->copy)) {
        vc->copy_next = next; /* see handoff() */
        next = NULL;
    }
    /* No local may be used after the sanitizer switch: ASan frees this
     * stack's fake frames. The stack itself is freed by exit_cb, which runs
     * on the next one (or on the vcore stack). */
    if (next) {
        void *sp = next->ctx.sp;
        vc->handoff_to = next;
        weft__san_switch(NULL, &next->san, next->stack_lo, next->stack_size);
        weft__ctx_switch(&ut->ctx, sp, handoff_entry, vc); /* runs exit_cb */
    } else {
        weft__san_switch(NULL, &vc->san, vc->stack_lo, vc->stack_size);
        weft__ctx_save_and_call(&ut->ctx, vc->stack_top, weft__vcore_entry, vc);
    }
    __builtin_unreachable();
}

static void uthread_start(void *arg)
{
    struct weft_uthread *ut = arg;
    weft__san_arrive(NULL, NULL, NULL);
    switch_end();
    void *r = ut->fn(ut->arg);
    if (WEFT__UNLIKELY(!weft__vc()))
        forked_exit(); /* a fork child's copy of ut: no vcore under it */
    uthread_finish(ut, r);
}

#define KNOWN_FLAGS (WEFT_DETACHED | WEFT_STACK_COPY | WEFT_ON_VCORE | WEFT_PINNED | WEFT_STACK_OWN)

static int spawn_on(weft_t *out, const weft_attr_t *ap, void *(*fn)(void *), void *arg);

int weft_spawn(weft_t *out, const weft_attr_t *attr, void *(*fn)(void *), void *arg)
{
    weft_attr_t a = { 0 };
    if (attr)
        a = *attr;
    if (!fn || (a.flags & ~KNOWN_FLAGS) || a.stack_size > ((size_t)1 << 30) ||
        (!out && !(a.flags & WEFT_DETACHED)) || a.prio < WEFT_PRIO_MIN || a.prio > WEFT_PRIO_MAX ||
        (a.flags & (WEFT_STACK_COPY | WEFT_STACK_OWN)) == (WEFT_STACK_COPY | WEFT_STACK_OWN))
        return EINVAL;
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK; /* a signal handler that interrupted weft */
    if (weft__vc_at_entry()) { /* a uthread or vcore context: the runtime runs */
        int r = spawn_on(out, &a, fn, arg);
        weft__resched_point(); /* the child may be more urgent */
        return r;
    }
    int r = weft__outside_enter(WEFT__GATE_SPAWN);
    if (r)
        return r;
    r = spawn_on(out, &a, fn, arg);
    weft__outside_leave();
    return r;
}

/* pinned_admit() counts a WEFT_PINNED spawn on vcore v, if v is online
 * (weft_vcores_release takes a vcore offline only without pinned ones). */
static bool pinned_admit(int v)
{
    struct weft__vcore *vc = &weft__rt.vcores[v];
    weft__spin_lock(&weft__rt.resize_lock);
    bool ok = atomic_load_explicit(&vc->online, memory_order_relaxed) == 1;
    if (ok) /* its vcore stays responsive (vcore_idle) */
        atomic_fetch_add_explicit(&vc->npinned, 1, memory_order_relaxed);
    weft__spin_unlock(&weft__rt.resize_lock);
    return ok;
}

/* spawn_on() is weft_spawn() once the arguments are checked and the runtime
 * is known to run until it returns. */
static int spawn_on(weft_t *out, const weft_attr_t *ap, void *(*fn)(void *), void *arg)
{
    weft_attr_t a = *ap;
    bool placed = a.flags & (WEFT_ON_VCORE | WEFT_PINNED);
    if (placed && (a.vcore < 0 || a.vcore >= atomic_load_explicit(&weft__rt.nonline,
                                                                   memory_order_relaxed)))
        return EINVAL; /* no such vcore online */
    size_t size = a.stack_size ? weft__stack_round(a.stack_size) : weft__rt.stack_size;
    /* Stack-copy: asked for, or the process default unless this one asks for
     * a stack of its own or for more than a run stack has. */
    bool copy = (a.flags & WEFT_STACK_COPY) ||
                (weft__sc_default && !(a.flags & WEFT_STACK_OWN) && size <= weft__sc_size);
    if (copy && size > weft__sc_size)
        return EINVAL;
    if ((a.flags & WEFT_PINNED) && !pinned_admit(a.vcore))
        return EINVAL; /* offline: it could never run */

    struct weft_uthread *t = copy ? weft__sc_uthread_alloc(weft__vc_at_entry()) : weft__uthread_alloc(size);
    if (!t) {
        if (a.flags & WEFT_PINNED)
            atomic_fetch_sub_explicit(&weft__rt.vcores[a.vcore].npinned, 1, memory_order_relaxed);
        return EAGAIN;
    }
    t->link.next = NULL;
    t->link.data = NULL;
    weft__prio_init(t, a.prio);
    t->link.vcore = placed ? a.vcore : -1;
    t->link.flags = a.flags;
    t->link.sched_flags = 0;
    struct weft__vcore *vc = weft__vc_at_entry(); /* nothing here switches */
    if (vc) { /* ids in blocks, so spawns on different vcores share no counter */
        if (vc->id_next == vc->id_end) {
            vc->id_next = atomic_fetch_add_explicit(&weft__rt.next_id, 256, memory_order_relaxed) + 1;
            vc->id_end = vc->id_next + 256;
            weft__stat_add(&vc->st.shared_rmw, 1);
        }
        t->id = vc->id_next++;
    } else {
        t->id = atomic_fetch_add_explicit(&weft__rt.next_id, 1, memory_order_relaxed) + 1;
    }
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
    t->io_deadline = 0; /* a cached shell keeps its last owner's */
    t->host = NULL;
    t->specific = NULL;
    t->pthread = NULL;
    t->name[0] = 0;
    if (a.name) {
        strncpy(t->name, a.name, sizeof t->name - 1);
        t->name[sizeof t->name - 1] = 0;
    }
    t->copy_flags = 0;
    t->tls = NULL;
    if (copy) { /* its context is made on a run stack when it first runs */
        t->ctx.sp = NULL;
        if (WEFT__UNLIKELY(weft__tls_uthread) && !weft__tls_make_heap(t)) {
            weft__uthread_free(t); /* no stack of its own: its TLS area from the heap */
            if (a.flags & WEFT_PINNED)
                atomic_fetch_sub_explicit(&weft__rt.vcores[a.vcore].npinned, 1, memory_order_relaxed);
            return EAGAIN;
        }
        weft__san_stack_new(&t->san, NULL, 0);
    } else {
        char *top = t->stack_lo + t->stack_size;
        if (WEFT__UNLIKELY(weft__tls_uthread))
            top = weft__tls_make(t, top); /* its TLS area at the top of the stack */
        weft__san_stack_new(&t->san, t->stack_lo, (size_t)(top - t->stack_lo));
        weft__ctx_make(&t->ctx, top, uthread_start, t);
    }
    atomic_store_explicit(&t->state, WEFT__BLOCKED, memory_order_relaxed);
    live_inc(vc);
    if (out)
        *out = t; /* before it can run: it may read the handle, or finish */
    runnable_as(weft__vc_at_entry(), t, false); /* a spawn: the scheduler places it */
    return 0;
}

/* ---- inline join ----------------------------------------------------------------
 *
 * weft_join() of a stack-copy uthread t that has not started and still waits
 * in the joiner's own vcore's queue (ops->reclaim gives it back) runs t on
 * the spot, as usched runs a thread: a function call on the caller's stack,
 * with no switch and nothing to copy if it never blocks. The joiner is saved
 * first, below its frames (weft__ctx_save_and_call_here), and counts as
 * blocked; t then runs as itself (current, errno, identity) on the rest of
 * the joiner's stack: t's stack is the joiner's (an ordinary joiner: t runs
 * as an ordinary uthread on it; a stack-copy joiner: t is bound to the same
 * run stack, and its copies hold the joiner's frames too). If t switches
 * out it is an ordinary switch, and t may resume on another vcore; when it
 * finishes, the joiner resumes, on whichever vcore that is: by returning
 * from inline_entry through the frames t ran on (inline_done), or, if t
 * called weft_exit(), by a restore of its saved context (inline_finish).
 * The joiner must be free to move: not pinned, not holding notifications
 * off. */

static inline struct weft_uthread *inline_done(struct weft_uthread *t, void *result);

static void inline_entry(void *arg)
{
    struct weft_uthread *t = arg, *me = t->host;
    struct weft__vcore *vc = weft__vc_at_entry(); /* the joiner's, a moment ago */
    vc->current = NULL;
    if (WEFT__UNLIKELY(!me->guarded && !me->copy))
        weft__stack_leave(vc, me); /* the joiner's canary */
    t->copy_flags |= WEFT__SC_INLINE;
    t->map = me->map;
    t->guarded = me->guarded;
    t->stack_lo = me->stack_lo;
    t->stack_size = (size_t)((char *)me->ctx.sp - me->stack_lo);
    t->asked_size = me->asked_size;
    if (me->copy)
        t->rs = me->rs; /* its copies carry the joiner's frames */
    else
        t->copy = false; /* an ordinary uthread on the joiner's stack, till it finishes */
    start_on(vc, t);
    WEFT__TLS_ENTER(vc, t);
    weft__san_arrive(NULL, NULL, NULL);
    switch_end();
    void *r = t->fn(t->arg);
    if (WEFT__UNLIKELY(!weft__vc()))
        forked_exit();
    if (t->specific) /* thread keys' destructors: they may block */
        weft__keys_exit(t);
    if (WEFT__UNLIKELY(t->tls != NULL))
        weft__tls_exit(t);
    /* A return, not a restore of the joiner's context: the frames between
     * here and join_inline are intact (t ran on them, wherever it resumed),
     * and returning keeps the CPU's return predictions right, where a
     * restore made the next three returns miss. */
#ifdef WEFT_TSAN
    /* TSan keeps a call stack per fiber, and inline_done switched to the
     * joiner's: it must not see inline_entry's return. */
    inline_finish(t, r);
#else
    inline_done(t, r);
#endif
}

/* inline_done() ends t, run inline, on whichever vcore it is now: the
 * joiner (t->host) becomes the running uthread again; the caller then
 * resumes it, by returning to weft__ctx_save_and_call_here or restoring
 * its context. Returns the joiner. Inline in its callers: TSan keeps a
 * call stack per fiber, and a return after the switch to the joiner's
 * fiber would pop the joiner's. */
static inline __attribute__((always_inline)) struct weft_uthread *
inline_done(struct weft_uthread *t, void *result)
{
    struct weft__vcore *vc = weft__vc(); /* maybe another vcore than it began on */
    struct weft_uthread *me = t->host;
    t->result = result;
    switch_begin();
    vc->current = NULL;
    weft__san_switch(NULL, &me->san, me->stack_lo, me->stack_size); /* arrives in join_inline */
    weft__san_stack_free(&t->san);
    /* No jlock: its joiner is the one resuming below, and nobody else may
     * join or detach it (WEFT__J_JOINING). */
    atomic_store_explicit(&t->state, WEFT__DONE, memory_order_relaxed);
    t->copy = true; /* its memory is a pool's */
    live_dec();
    atomic_store_explicit(&me->state, WEFT__RUNNABLE, memory_order_relaxed);
    vc->decisions++;
    start_on(vc, me);
    WEFT__TLS_ENTER(vc, me);
    return me;
}

/* inline_finish() is the end of t, run inline, when it calls weft_exit()
 * (uthread_finish: deeper than inline_entry) and, under TSan, when it
 * returns: the joiner's context is restored. */
static _Noreturn void inline_finish(struct weft_uthread *t, void *result)
{
    weft__ctx_restore(&inline_done(t, result)->ctx); /* back into join_inline() */
}

/* join_inline() runs t (reclaimed, never started) on the caller's stack and
 * returns once t has finished (maybe on another vcore). */
static WEFT__NOINLINE void join_inline(struct weft__vcore *vc, struct weft_uthread *me,
                                       struct weft_uthread *t)
{
    switch_begin();
    me->err = *vc->errno_addr;
    atomic_store_explicit(&me->state, WEFT__BLOCKED, memory_order_relaxed);
    vc->decisions++;
    t->host = me;
    weft__san_switch(&me->san, &t->san, me->stack_lo, me->stack_size);
    weft__ctx_save_and_call_here(&me->ctx, inline_entry, t);
    weft__san_arrive(&me->san, NULL, NULL);
    switch_end();
}

/* can_inline(): t, being joined by me on vc, may run inline (see above). */
static bool can_inline(struct weft__vcore *vc, struct weft_uthread *me, struct weft_uthread *t,
                       int st)
{
    /* rs is read before t is reclaimed: another vcore may be taking t and
     * setting it (weft__sc_enter) meanwhile, hence the atomic view; a NULL
     * seen then is harmless, as reclaim fails. */
    return st == WEFT__RUNNABLE &&
           !atomic_load_explicit(WEFT__ATOMIC(struct weft__runstack *, &t->rs),
                                 memory_order_relaxed) &&
           weft__rt.reclaim &&
           !(t->link.flags & (WEFT_PINNED | WEFT_ON_VCORE)) &&
           !(me->link.flags & WEFT_PINNED) && me->notif_depth == 0 &&
           !weft__chores_due(vc) && weft__rt.reclaim(vc->id, t);
}

int weft_join(weft_t t, void **result)
{
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK;
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
    struct weft__vcore *vc = weft__vc_at_entry(); /* nothing has switched yet */
    struct weft_uthread *me = vc ? vc->current : NULL;
    if (st != WEFT__DONE && t->copy && me && can_inline(vc, me, t, st)) {
        weft__spin_unlock(&t->jlock);
        join_inline(vc, me, t); /* t is DONE when it returns */
    } else if (st != WEFT__DONE) {
        struct weft__waiter local, *w = weft__waiter_mine(&local);
        t->joiner = w;
        weft__wait(&t->jlock, NULL, w, WEFT_FOREVER, WEFT_BLOCK_JOIN);
        /* Woken by t's exit_wake, maybe before t is off its stack. */
        while (atomic_load_explicit(&t->state, memory_order_acquire) != WEFT__DONE)
            weft_yield();
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
    if (!ut) {
        if (tls_forked_from)
            forked_exit(); /* its pthread is the vcore's: not on this stack */
        pthread_exit(result);
    }
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

/* ---- priorities ------------------------------------------------------------ */

void weft__prio_init(struct weft_uthread *t, int prio)
{
    t->prio.lock = 0;
    t->prio.base = prio;
    t->prio.gen = weft__rt.gen;
    for (int i = 0; i < WEFT__BOOSTS; i++)
        t->prio.boost[i].m = NULL;
    t->link.prio = prio; /* not yet published */
}

/* prio_apply() publishes t's effective priority, the larger of its base and
 * its boosts, and tells the scheduler (t->prio.lock held, so changes of one
 * uthread reach the scheduler one at a time). */
static void prio_apply(struct weft_uthread *t)
{
    int eff = t->prio.base;
    for (int i = 0; i < WEFT__BOOSTS; i++)
        if (t->prio.boost[i].m && t->prio.boost[i].level > eff)
            eff = t->prio.boost[i].level;
    int old = atomic_load_explicit(WEFT__ATOMIC(int, &t->link.prio), memory_order_relaxed);
    if (eff == old)
        return;
    atomic_store_explicit(WEFT__ATOMIC(int, &t->link.prio), eff, memory_order_relaxed);
    void (*changed)(struct weft_uthread *, int) = weft__rt.ops ? weft__rt.ops->thread_prio_changed : NULL;
    if (!changed)
        return;
    /* An application's op is preemptible code: hold notifications off
     * around it, as for its other ops called from a uthread. */
    struct weft__vcore *vc = weft__vc_at_entry();
    struct weft_uthread *me = vc ? vc->current : NULL;
    if (me && weft__rt.sched_foreign)
        me->in_sched++;
    changed(t, old);
    if (me && weft__rt.sched_foreign)
        me->in_sched--;
}

/* prio_change() runs fn(t, arg) under t's priority lock and applies the
 * result, with the scheduler's op, while the runtime runs (from an outside
 * thread, through the gate; with the runtime off only the fields change). */
static void prio_change(struct weft_uthread *t, void (*fn)(struct weft_uthread *, const void *, int),
                        const void *m, int level)
{
    bool outside = !weft__vc_at_entry();
    bool running = outside ? weft__outside_enter(WEFT__GATE_USE) == 0
                           : true; /* a uthread or vcore context: the runtime runs */
    weft__spin_lock(&t->prio.lock);
    fn(t, m, level);
    if (running)
        prio_apply(t);
    else
        atomic_store_explicit(WEFT__ATOMIC(int, &t->link.prio), t->prio.base, memory_order_relaxed);
    weft__spin_unlock(&t->prio.lock);
    if (outside && running)
        weft__outside_leave();
}

static void set_base(struct weft_uthread *t, const void *m, int level)
{
    (void)m;
    t->prio.base = level;
}

static void add_boost(struct weft_uthread *t, const void *m, int level)
{
    struct weft__boost *b = t->prio.boost, *slot = NULL;
    for (int i = 0; i < WEFT__BOOSTS; i++) {
        if (b[i].m == m) {
            if (level > b[i].level)
                b[i].level = level;
            return;
        }
        if (!slot || (slot->m && (!b[i].m || b[i].level < slot->level)))
            slot = &b[i];
    }
    /* Full (more than WEFT__BOOSTS contended mutexes held): the weakest
     * boost gives way to a stronger one. */
    if (!slot->m || slot->level < level) {
        slot->m = m;
        slot->level = level;
    }
}

static void drop_boost(struct weft_uthread *t, const void *m, int level)
{
    (void)level;
    for (int i = 0; i < WEFT__BOOSTS; i++)
        if (t->prio.boost[i].m == m)
            t->prio.boost[i].m = NULL;
}

void weft__prio_boost(struct weft_uthread *t, const void *m, int level)
{
    prio_change(t, add_boost, m, level);
}

void weft__prio_unboost(struct weft_uthread *t, const void *m)
{
    prio_change(t, drop_boost, m, 0);
}

int weft_setprio(weft_t t, int prio)
{
    if (!t || prio < WEFT_PRIO_MIN || prio > WEFT_PRIO_MAX)
        return EINVAL;
    prio_change(t, set_base, NULL, prio);
    /* A uthread that lowered itself below queued work (or raised another
     * above it) gives way here, where it holds nothing: the scheduler's
     * weft_vcore_preempt() is pending on this vcore. */
    weft__safe_point(); /* under any scheduler: weft_setprio holds nothing here */
    return 0;
}

int weft_getprio(weft_t t)
{
    if (!t)
        return 0;
    weft__spin_lock(&t->prio.lock);
    int p = t->prio.base;
    weft__spin_unlock(&t->prio.lock);
    return p;
}

/* ---- yield, park -------------------------------------------------------- */

/* A yield that finds nothing local takes the path through vcore context
 * (chores, then sched_entry, which steals) every LONE_YIELD_STEAL-th time,
 * and otherwise returns at once: a uthread that spins on weft_yield() on an
 * otherwise idle vcore still lets that vcore steal the work queued
 * elsewhere, at a bounded cost per yield. */
#define LONE_YIELD_STEAL 8

/* yield_cb(): the yielder, saved, goes to the back of its vcore's queue.
 * yielded_cb(): take_yield queued it already, where only this vcore can
 * take it, at its next decision (after this). */
static void yield_cb(struct weft_uthread *ut, void *arg)
{
    (void)arg;
    atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
    weft__rt.ops->thread_paused(ut);
}

static void yielded_cb(struct weft_uthread *ut, void *arg)
{
    (void)arg;
    atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
}

/* yield_swap() ends a yield whose scheduler queued the yielder itself
 * (take_yield): by take_yield's contract no other thread can take ut from
 * there before this vcore's next scheduling decision, which comes after ut's
 * registers are saved, so ut may be runnable and next running before the
 * switch, and the switch is a plain one with nothing to run on next's stack
 * (no hand-off entry). For shared TLS, a guarded stack and a next that is
 * not stack-copy; otherwise handoff() with yielded_cb. */
static inline void yield_swap(struct weft__vcore *vc, struct weft_uthread *ut, struct weft_uthread *next)
{
    swap_begin(vc, ut, next, WEFT__RUNNABLE, true);
    swap_to(ut, next, SWAP_YIELD, NULL);
}

/* yield_entry() is vcore context after weft_yield() found nothing local:
 * run the chores, then let the scheduler pick (it may steal); the yielder
 * is pending meanwhile, queued only if something else runs. (With a
 * scheduler that has no take_local, every yield comes here: the yielder
 * goes to the back of its queue and the vcore picks.) */
static void yield_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = weft__vcore_arrive(vc);
    atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
    if (!weft__rt.take_local) { /* a scheduler without it: to the back, pick again */
        weft__rt.ops->thread_paused(ut);
        weft__vcore_loop(vc);
    }
    if (weft__chores_due(vc))
        weft__vcore_chores(vc); /* before picking: a due alarm may wake someone */
    vc->decisions++;
    vc->pending = ut;
    weft__rt.ops->sched_entry(); /* returns only if nothing else may run */
    vc->pending = NULL;
    run_on(vc, ut);
}

void weft_yield(void)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* vc is not used after the switch */
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut) {
        sched_yield();
        return;
    }
    if (WEFT__UNLIKELY(WEFT__CRIT_LOAD() || weft__on_altstack(vc)))
        return; /* a signal handler that interrupted weft, or on the signal stack */
    vc->yielding = true; /* weft_vcore_yielder(), for take_local */
    int queued = 0;
    struct weft_uthread *next = local_pick(vc, ut, &queued);
    vc->yielding = false;
    if (next) {
        if (queued && WEFT__LIKELY(swap_plain(ut, next))) {
            yield_swap(vc, ut, next);
            return;
        }
        vc->cb = queued ? yielded_cb : yield_cb; /* also for a stack-copy next's way */
        handoff(vc, ut, next, handoff_entry, weft__vcore_entry);
        return;
    }
    if (weft__rt.ops->take_local && !weft__chores_due(vc) &&
        (++vc->lone_yields % LONE_YIELD_STEAL) != 0) {
        /* Nothing else here: a decision that keeps ut running. */
        switch_end();
        vc->decisions++;
        weft__stat_add(&vc->nrun, 1);
        weft__stat_add(&vc->st.vcruns, 1);
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
    bool here = vc->notif_here; /* weft_vcore_notify's own delivery: resume here */
    vc->notif_here = false;
    vc->preempt_now = false;
    weft__events_handle(vc);
    weft__resched_check(vc, ut, here);
    if (!vc->preempt_now || here)
        run_on(vc, ut);
    vc->preempt_now = false;
    atomic_store_explicit(&vc->st.taken, atomic_load_explicit(&vc->st.taken, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    weft__rt.ops->thread_paused(ut);
    weft__vcore_loop(vc);
}

void weft__notif_deliver(struct weft__vcore *vc, struct weft_uthread *ut)
{
    switch_begin();
    switch_out(vc, ut, notify_entry);
}

/* park_publish() ends a park's switch out: publish ut PARKED, after which
 * weft_unpark() makes it runnable; or, when a token arrived while it was
 * switching out, consume it (park_take_token; false: the caller makes ut
 * runnable again, and the park returns as it would have with the token
 * there before the switch). */
static inline void park_take_token(struct weft_uthread *ut)
{
    /* An RMW, not a store (see weft_park()): a later unpark's TOKEN -> TOKEN
     * orders its waker's condition store before our re-check only through
     * the RMW chain on this word. */
    atomic_exchange_explicit(&ut->park, WEFT__PARK_NONE, memory_order_seq_cst);
}

static inline bool park_publish(struct weft_uthread *ut)
{
    int exp = WEFT__PARK_NONE;
    if (WEFT__LIKELY(atomic_compare_exchange_strong_explicit(&ut->park, &exp, WEFT__PARK_PARKED,
                                                             memory_order_seq_cst, memory_order_seq_cst)))
        return true;
    park_take_token(ut);
    return false;
}

/* park_handoff_entry() is handoff_entry for a park that park_swap() cannot
 * end: per-uthread TLS, a stack without a guard page (its canary; a run
 * stack to give back) or a scheduler that follows blocks (it hears of this
 * one before it is published, and of a token as a wake-up). A token found
 * on the way out makes ut runnable again here. */
static void park_handoff_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = vc->current;
    WEFT__TLS_ENTER(vc, vc->handoff_to); /* before the park word publishes ut */
    vc->current = NULL;
    if (!ut->guarded) {
        weft__stack_leave(vc, ut);
        weft__sc_release(vc); /* next is not stack-copy (handoff()) */
    }
    atomic_store_explicit(&ut->state, WEFT__BLOCKED, memory_order_relaxed);
    if (weft__rt.has_blocked)
        weft_uthread_blocked(ut, WEFT_BLOCK_PARK);
    if (!park_publish(ut))
        runnable(vc, ut);
    handoff_start(vc);
}

/* park_token_cb() runs on the successor's stack when weft__ctx_swap_park()
 * found a token that arrived while ut was switching out: consume it and
 * make ut runnable again, as park_handoff_entry() does (as vcore context
 * would: the successor is current already, but it did not wake ut). */
static void park_token_cb(void *arg)
{
    struct weft_uthread *ut = arg;
    park_take_token(ut);
    runnable_by(weft__vc(), ut, 0, true);
}

/* park_swap() ends a park that hands the vcore to next (shared TLS, a
 * guarded stack, no thread_has_blocked, next not stack-copy): everything of
 * the hand-off but ut's publication happens before the switch, since
 * nobody else can reach ut or next yet (ut is not published, next was
 * dequeued by this vcore), and the switch publishes ut (NONE -> PARKED)
 * itself once its registers are saved, on next's stack: no hand-off entry
 * and no callback unless a token came meanwhile (park_token_cb). TSan
 * cannot see that compare-and-swap: the release before it stands for it,
 * so the waker that takes PARKED acquires what ut wrote before it parked. */
static inline void park_swap(struct weft__vcore *vc, struct weft_uthread *ut, struct weft_uthread *next,
                             bool pin_check)
{
    _Static_assert(WEFT__PARK_NONE == 0 && WEFT__PARK_PARKED == 2, "weft__ctx_swap_park's values");
    swap_begin(vc, ut, next, WEFT__BLOCKED, pin_check);
    weft__san_release(&ut->park); /* after ut's last writes */
    swap_to(ut, next, SWAP_PARK, &ut->park);
}

/* park_entry() is weft_park's entry through vcore context, where a token
 * found on the way out (and no scheduler that follows blocks) lets the
 * uthread run again at once. */
static void park_entry(void *arg)
{
    struct weft__vcore *vc = arg;
    struct weft_uthread *ut = weft__vcore_arrive(vc);
    atomic_store_explicit(&ut->state, WEFT__BLOCKED, memory_order_relaxed);
    bool told = weft__rt.has_blocked;
    if (told)
        weft_uthread_blocked(ut, WEFT_BLOCK_PARK);
    if (WEFT__UNLIKELY(!park_publish(ut))) {
        if (told || vc->copy_next) { /* a successor is chosen: it runs first */
            weft_uthread_runnable(ut);
        } else {
            atomic_store_explicit(&ut->state, WEFT__RUNNABLE, memory_order_relaxed);
            run_on(vc, ut);
        }
    }
    weft__vcore_next(vc);
}

/* slot_swap_next() is local_next() for a block of ut that switches by a
 * plain swap (swap_plain_block) to the scheduler's next slot, when it can
 * (slot_peek, no chores due, not pinned: the switch need not look for a
 * pin that moved): the successor, taken and counted; else NULL and nothing
 * taken. Under the switch mark. */
static inline struct weft_uthread *slot_swap_next(struct weft__vcore *vc, struct weft_uthread *ut)
{
    struct weft_next_slot *ns = vc_slot(vc);
    struct weft_uthread *t = slot_peek(ns);
    if (!t || weft__chores_due(vc) || !swap_plain_block(ut, t) || (t->link.flags & WEFT_PINNED))
        return NULL;
    slot_take(ns);
    vc->decisions++;
    return t;
}

/* park_pick() is weft_park() once the scheduler's next slot could not be
 * swapped to (slot_swap_next): ask the scheduler; out of line, so that the
 * common path keeps nothing across a call. */
static WEFT__NOINLINE void park_pick(struct weft__vcore *vc, struct weft_uthread *ut)
{
    struct weft_uthread *next = local_next(vc);
    if (next) {
        if (WEFT__LIKELY(swap_plain_block(ut, next)))
            park_swap(vc, ut, next, true);
        else
            handoff(vc, ut, next, park_handoff_entry, park_entry);
    } else {
        switch_out(vc, ut, park_entry);
    }
}

int weft_park(void)
{
    struct weft__vcore *vc = weft__vc_at_entry(); /* vc is not used after the switch */
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (!ut)
        return EPERM;
    if (WEFT__UNLIKELY(WEFT__CRIT_LOAD()))
        return EDEADLK; /* a signal handler that interrupted weft */
    /* A token is consumed with a full-barrier RMW, never a plain store: the
     * caller's next look at its wake-up condition must not be ordered before
     * the consumption, or an unpark that found the token still there (and
     * so did nothing) would be lost. Without a token, the CAS in
     * park_entry / park_handoff_entry is that barrier. */
    if (atomic_load_explicit(&ut->park, memory_order_relaxed) == WEFT__PARK_TOKEN &&
        atomic_exchange_explicit(&ut->park, WEFT__PARK_NONE, memory_order_seq_cst) == WEFT__PARK_TOKEN)
        return 0;
    switch_begin();
    struct weft_uthread *next = slot_swap_next(vc, ut);
    if (WEFT__LIKELY(next != NULL))
        park_swap(vc, ut, next, false); /* the common hand-off: no call before the switch */
    else
        park_pick(vc, ut);
    return 0;
}

int weft_unpark(weft_t t)
{
    if (!t)
        return EINVAL;
    /* Always an RMW, even when a token is already there (TOKEN -> TOKEN): a
     * plain load seeing TOKEN could be ordered before the caller's store to
     * the condition the parker re-checks, and the parker could consume that
     * token, miss the store and park for good (store buffering). The first
     * try assumes the uthread parked (the usual case) rather than reads the
     * word: a read first would fetch its line from the parker's CPU shared,
     * and the CAS would then wait for it a second time, exclusive. */
    int s = WEFT__PARK_PARKED;
    if (WEFT__UNLIKELY(!atomic_compare_exchange_strong_explicit(&t->park, &s, WEFT__PARK_NONE,
                                                                memory_order_seq_cst, memory_order_seq_cst))) {
        for (;;) { /* s: NONE or TOKEN (-> TOKEN), or PARKED after all (-> NONE) */
            int next = s == WEFT__PARK_PARKED ? WEFT__PARK_NONE : WEFT__PARK_TOKEN;
            if (atomic_compare_exchange_weak_explicit(&t->park, &s, next, memory_order_seq_cst,
                                                      memory_order_seq_cst))
                break;
        }
        if (s != WEFT__PARK_PARKED)
            return 0; /* a token for its next park */
    }
    struct weft__vcore *vc = weft__vc_at_entry();
    if (WEFT__UNLIKELY(weft__interrupted(vc)))
        weft__defer_unpark(vc, t); /* a signal handler's: see internal.h */
    else if (WEFT__UNLIKELY(vc == NULL))
        runnable_outside(t);
    else
        runnable_by(vc, t, 1, true); /* not interrupted: a uthread runs, not its callback */
    return 0;
}

