/*
 * sched.h — the two-way scheduler API, for scheduler writers.
 *
 * The runtime calls a scheduler through a `const struct weft_sched_ops`
 * table; the scheduler calls the runtime through the functions below. The
 * built-in schedulers (src/sched/ws.c, src/sched/fifo.c, src/sched/prio.c)
 * use nothing else, so an application's scheduler can do anything they do.
 *
 * Vocabulary. A *vcore* is a pinned kernel thread; *vcore context* is the
 * code it runs between uthreads, on its own stack, never interrupted by weft:
 * the ops below (except init/fini) run there or under its rules (never
 * preempted, never blocking), and so do weft_uthread_yield() callbacks,
 * which run either there or, on a direct hand-off, on the stack of the
 * uthread that runs next, before it resumes. A uthread is, at any moment, RUNNING on one vcore, RUNNABLE (owned by
 * the scheduler, on at most one of its queues) or BLOCKED (owned by whatever
 * will call weft_uthread_runnable() on it: a wait queue, a timer).
 */
#ifndef WEFT_SCHED_H
#define WEFT_SCHED_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <stdint.h>
#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first member of every uthread: fields the scheduler may use. */
struct weft_sched_link {
    struct weft_uthread *next;   /* owned by the scheduler's queue */
    void *data;                  /* free for the scheduler */
    int prio;                    /* the runtime: the priority a scheduler should use,
                                    WEFT_PRIO_MIN..WEFT_PRIO_MAX: set at spawn, by
                                    weft_setprio() and by priority inheritance (the
                                    larger of the two). May change at any moment:
                                    read it with weft_uthread_prio(). Read-only here. */
    int vcore;                   /* runtime: vcore it last ran on, or the one asked
                                    for at spawn; -1 if neither. Read-only here. */
    unsigned flags;              /* runtime: the spawn flags (WEFT_PINNED...). Read-only. */
    unsigned sched_flags;        /* free for the scheduler */
    int waker;                   /* runtime, for thread_runnable(): the vcore making t
                                    runnable, -1 from a kernel thread that is not a vcore */
    int by_uthread;              /* runtime, for thread_runnable(): 1 if a uthread running
                                    on waker made t runnable, 2 if its blocking callback
                                    did (acting for the uthread that stops: an exit
                                    waking its joiner), 0 from vcore context (alarms,
                                    events, the poller), 3 if a wake-up on waker
                                    displaced t from waker's next slot (struct
                                    weft_next_slot) */
};

/* Priority levels: WEFT_PRIO_MIN (least urgent) .. WEFT_PRIO_MAX (most urgent),
 * 0 the default (a zeroed weft_attr_t). */
#define WEFT_PRIO_MIN (-32)
#define WEFT_PRIO_MAX 31
#define WEFT_PRIO_LEVELS 64

/* weft_uthread_link() returns t's scheduler fields. */
static inline struct weft_sched_link *weft_uthread_link(struct weft_uthread *t)
{
    return (struct weft_sched_link *)(void *)t;
}

/* weft_uthread_prio() reads t's effective priority (link.prio), which another
 * thread may be changing (weft_setprio, priority inheritance). Any context. */
static inline int weft_uthread_prio(struct weft_uthread *t)
{
    return __atomic_load_n(&weft_uthread_link(t)->prio, __ATOMIC_RELAXED);
}

/* struct weft_ulist: a FIFO of uthreads linked through
 * weft_uthread_link(t)->next, for a scheduler's lists (an inbox, pinned
 * uthreads, a batch being moved). All zero is empty. The helpers take no
 * lock: the list's owner, or the holder of the lock that guards it, calls. */
struct weft_ulist {
    struct weft_uthread *head, *tail;
};

/* weft_ulist_push() appends t, which is on no other list, to l. */
static inline void weft_ulist_push(struct weft_ulist *l, struct weft_uthread *t)
{
    weft_uthread_link(t)->next = NULL;
    if (l->tail)
        weft_uthread_link(l->tail)->next = t;
    else
        l->head = t;
    l->tail = t;
}

/* weft_ulist_pop() takes l's first uthread, or returns NULL if l is empty. */
static inline struct weft_uthread *weft_ulist_pop(struct weft_ulist *l)
{
    struct weft_uthread *t = l->head;
    if (t) {
        l->head = weft_uthread_link(t)->next;
        if (!l->head)
            l->tail = NULL;
    }
    return t;
}

/* Why a uthread blocked, for thread_has_blocked(). */
enum weft_block_why {
    WEFT_BLOCK_SYNC = 1,   /* mutex, cond, sem, barrier, rwlock, futex, once, wg */
    WEFT_BLOCK_JOIN,       /* weft_join() */
    WEFT_BLOCK_SLEEP,      /* weft_sleep_ns() */
    WEFT_BLOCK_PARK,       /* weft_park() */
    WEFT_BLOCK_IO,         /* waiting for a file descriptor or an offloaded call */
    WEFT_BLOCK_OTHER,      /* a weft_uthread_yield() callback of an application */
};

struct weft_sched_ops {
    const char *name;
    /* Called by every weft_init() before any vcore runs, with the vcore count:
     * set the scheduler's state up from scratch. In the child of a fork() it
     * is called again without fini: the state it finds is the parent's copy,
     * holding uthreads that do not exist there, and possibly half-changed by
     * the parent's other threads: drop it, never use or free it. Returns 0
     * or an errno value (weft_init() then fails with it). May be NULL. */
    int (*init)(int nvcores);
    /* Called by weft_shutdown() after the vcores stopped. May be NULL. */
    void (*fini)(void);
    /* A vcore needs something to run: pick a uthread and weft_run_uthread()
     * it, or return if there is nothing (the runtime then spins or parks the
     * vcore and calls again). Vcore context. */
    void (*sched_entry)(void);
    /* t became runnable (new, or woken). Queue it, then call
     * weft_vcore_kick() so an idle vcore can take it. Any context: a vcore,
     * a uthread, or an outside kernel thread (weft_vcore_id() < 0). */
    void (*thread_runnable)(struct weft_uthread *t);
    /* t stopped but is still runnable (weft_yield, preemption): queue it
     * again, at the back. Vcore context of the vcore t was running on. */
    void (*thread_paused)(struct weft_uthread *t);
    /* Optional: the direct hand-off. Dequeue and return the uthread that
     * vcore (the caller's) should run next from its own queues, as
     * sched_entry would pick it but without stealing or waiting; NULL if it
     * has none. The runtime calls it when a uthread on that vcore is about
     * to block, yield or exit, and then switches straight to the returned
     * uthread (the blocking callback runs on its stack); with NULL, or
     * without this op, it goes through vcore context and sched_entry. Runs
     * under vcore-context rules (never preempted, must not block). */
    struct weft_uthread *(*take_local)(int vcore);
    /* t blocked (why: enum weft_block_why); someone else owns it until it is
     * made runnable. Informational. Vcore context. May be NULL. */
    void (*thread_has_blocked)(struct weft_uthread *t, int why);
    /* Optional: another vcore called weft_vcore_poke() on this one (for
     * example a thief asking it to make work stealable that only this
     * vcore could take). The runtime pokes too: while other vcores are
     * parked, a busy vcore that has run one uthread for 10 ms or more is
     * poked every 10 ms (a parked vcore watches), so that work only it
     * could take does not wait for that uthread. Vcore context of the
     * poked vcore. */
    void (*poked)(void);
    /* Optional: t's priority (link.prio) changed from old (weft_setprio(),
     * or a weft mutex's priority inheritance). t may be running, queued by
     * this scheduler, being queued by another thread this very moment, or
     * blocked: a scheduler that orders its queues by priority moves it, and
     * may weft_vcore_preempt() a vcore. Any context, also with weft's own
     * locks held (a wait queue's): take only the scheduler's own locks, never
     * block. Never called with t's priority changing concurrently: the
     * runtime serialises changes of one uthread. */
    void (*thread_prio_changed)(struct weft_uthread *t, int old);
    /* Optional: weft_vcore_preempt() asked this vcore to reconsider running,
     * the uthread it interrupted: return nonzero to preempt it (the runtime
     * hands it to thread_paused and calls sched_entry), 0 to resume it.
     * Vcore context of this vcore. Without this op such a request always
     * preempts. */
    int (*should_preempt)(struct weft_uthread *running);
    /* Optional, both or neither: run-time vcore counts (weft_vcores_request,
     * weft_vcores_release). A scheduler with them gets init(weft_max_vcores())
     * (a thread for every CPU of the process's mask exists from weft_init on,
     * ids 0..max-1), and vcores come and go online, always the lowest ids:
     * vcore_up(id) runs before vcore id takes a uthread: for the first
     * weft_num_vcores() by weft_init, after init and before any vcore
     * runs; later (weft_vcores_request) on vcore id, in vcore context;
     * vcore_down(id) runs on it in vcore context when it leaves, after the
     * uthread it ran (if any) went to thread_paused: the scheduler hands
     * every uthread queued there to online vcores. An offline vcore gets no
     * sched_entry and no take_local, but may still call thread_runnable
     * (its events and alarms may wake uthreads: place them on an online
     * vcore) and poked. Without them those calls return ENOTSUP and
     * init gets the vcore count. */
    void (*vcore_up)(int id);
    void (*vcore_down)(int id);
    /* Optional: give t back. t was made runnable on vcore (the caller's) and
     * its uthread now means to run t itself, at once (weft_join() of a
     * stack-copy uthread that has not started runs it inline, on the
     * joiner's stack). Dequeue t and return 1 if it is still in vcore's own
     * queues where no other vcore can take it meanwhile; else 0, and t
     * stays queued (the joiner waits for it as usual). Runs under
     * vcore-context rules. */
    int (*reclaim)(int vcore, struct weft_uthread *t);
    /* Optional: take_local for a weft_yield() of self, running on vcore
     * (the caller's). Returns what take_local would (NULL: nothing local);
     * with a uthread returned, the scheduler may also have queued self
     * behind it already (*queued = 1: thread_paused is then not called for
     * this yield), which it may do only where no other thread can take a
     * uthread from vcore's queues before vcore's next scheduling decision
     * (self's registers are saved before that). *queued = 0 otherwise.
     * A pick and a push in one step, with no count or bitmap to update in
     * between; without this op a yield calls take_local, then
     * thread_paused. Runs under vcore-context rules. */
    struct weft_uthread *(*take_yield)(int vcore, struct weft_uthread *self, int *queued);
};

/* struct weft_next_slot: a scheduler's per-vcore `next` slot (Go's
 * runnext, tokio's LIFO slot) that the runtime fills and empties itself on
 * the common hand-off, without calling the scheduler: a uthread wakes one
 * that last ran on its vcore, then blocks, and the woken one runs next. A
 * scheduler opts in per vcore (weft_vcore_next_slot_set, in init); then:
 *  - a uthread running on vcore v that wakes (not spawns) t whose
 *    link.vcore is v, not WEFT_PINNED and not a stack-copy uthread that has
 *    started: the runtime stores t in v's slot instead of calling
 *    thread_runnable; a uthread already there is handed to thread_runnable
 *    with link.by_uthread 3 (displaced) and link.waker v;
 *  - at a local decision of v for a block or an exit (not a yield, and not
 *    when chores are due): if the slot holds a uthread, budget is not 0 and
 *    ask is not set, the runtime takes it (t = NULL), spends one of budget
 *    and runs it, instead of calling take_local. Otherwise take_local is
 *    asked, and it must treat the slot's uthread as its own next.
 * Every field belongs to v: the runtime uses it only on v, with signal
 * handlers held off, and the scheduler only on v too (any of its ops that
 * runs there: take_local, sched_entry, thread_runnable by a uthread or the
 * vcore context of v, poked), except ask (anyone may set it, relaxed) and t
 * (others may read it, relaxed, to see work hidden there). budget counts
 * the slot runs the scheduler allows before it is asked again (its chain
 * bounds, its turns for other queues): it sets budget when it decides and
 * learns how many the runtime made from what is left. The slot must stay
 * valid until fini. */
struct weft_next_slot {
    struct weft_uthread *t;  /* runs next on this vcore, or NULL (read and
                                written with relaxed atomic loads and stores) */
    unsigned budget;         /* slot runs the runtime may still make (v only) */
    unsigned char ask;       /* nonzero: the runtime asks take_local first
                                (relaxed atomic loads and stores) */
};

/* weft_vcore_next_slot_set() makes slot vcore's next slot (NULL: none, the
 * default), for the scheduler's init (before any vcore runs). Once the
 * vcores run, only NULL may be set, from any thread: the runtime stops
 * filling and taking the slot (at once on other vcores but for a wake-up or
 * a decision under way there), and what it holds is the scheduler's own
 * next (a scheduler that cannot keep its rules with the runtime running
 * its slot, say once priorities differ). Returns 0, EINVAL for a vcore id
 * outside those init was given, EBUSY for a slot once the vcores run, or
 * ENOTSUP for a scheduler without take_local. */
int weft_vcore_next_slot_set(int vcore, struct weft_next_slot *slot);

/* weft_sched_register() makes ops selectable by name (weft_config.sched,
 * WEFT_SCHED) at the next weft_init(). ops must stay valid. Returns 0,
 * EINVAL (NULL, no name, missing sched_entry/thread_runnable/thread_paused),
 * EEXIST (name taken) or ENOSPC (table full). */
int weft_sched_register(const struct weft_sched_ops *ops);

/* weft_vcore_id() returns the calling vcore's id (0..weft_num_vcores()-1),
 * or -1 on a kernel thread that is not a vcore. */
int weft_vcore_id(void);
/* weft_num_vcores() returns the vcores running (0 before the runtime starts):
 * ids 0..weft_num_vcores()-1. */
int weft_num_vcores(void);
/* weft_max_vcores() returns how many vcores the runtime may run: the CPUs in
 * the process's affinity mask. */
int weft_max_vcores(void);

/* weft_vcores_request() brings n more vcores online (the lowest offline ids,
 * on CPUs of the process's affinity mask), parlib's vcore request: they
 * start taking uthreads at once. Returns 0, EINVAL (n < 1, or more than the
 * CPUs left: nothing changes), ENOTSUP (the scheduler has no vcore_up/down,
 * like the default ws), EAGAIN (the runtime is not running), or EDEADLK (a
 * signal handler that interrupted weft). Any context but vcore context. */
int weft_vcores_request(int n);

/* weft_vcores_release() takes the n highest-numbered vcores offline: each
 * finishes the decision it is making, preempts the uthread it runs (it
 * goes on elsewhere) and hands its queued uthreads to the others; their
 * kernel threads sleep until requested again. Returns once they are
 * offline: 0, EINVAL (n < 1, or it would leave no vcore online), EBUSY
 * (one of them has WEFT_PINNED uthreads, or one with notifications
 * disabled, weft_notifs_disable(), which can run nowhere else:
 * nothing changes), ENOTSUP, EAGAIN or EDEADLK as for weft_vcores_request.
 * Any context but vcore context; a uthread may release its own vcore (it
 * moves). */
int weft_vcores_release(int n);

/* weft_vcore_cpu() returns the CPU vcore id is pinned to, or -1 (no such
 * vcore). */
int weft_vcore_cpu(int id);

/* weft_uthread_yield() saves the calling uthread, leaves its stack and calls
 * cb(self, arg) under vcore-context rules: in vcore context, or, on a direct
 * hand-off, on the stack of the uthread that runs next. Only then may others
 * touch self (queue it, release the lock that guards the queue). cb must arrange for someone to
 * call weft_uthread_runnable(self) later, or call it itself. Returns when the
 * uthread runs again, with its errno intact. Uthreads only. */
void weft_uthread_yield(void (*cb)(struct weft_uthread *self, void *arg), void *arg);

/* weft_uthread_blocked() tells the scheduler that t, saved by
 * weft_uthread_yield(), is now blocked for reason why (calls
 * ops->thread_has_blocked). For use inside yield callbacks. */
void weft_uthread_blocked(struct weft_uthread *t, int why);

/* weft_uthread_runnable() hands a blocked t back to the scheduler
 * (ops->thread_runnable). Aborts if t is not blocked. Any context. */
void weft_uthread_runnable(struct weft_uthread *t);

/* weft_run_uthread() runs t on this vcore; t must be runnable and dequeued
 * by the caller. When sched_entry was called for a weft_yield() that found
 * nothing local, the yielder is handed to thread_paused first (it runs
 * again only if sched_entry returns). Vcore context only; does not return. */
_Noreturn void weft_run_uthread(struct weft_uthread *t);

/* weft_vcore_yielder() returns the uthread that is yielding (weft_yield) on
 * the calling vcore while take_local or sched_entry is asked for its
 * successor, else NULL: it stays runnable (thread_paused takes it if another
 * is picked; if take_local returns NULL or sched_entry returns, it runs on).
 * A scheduler with priorities picks none less urgent than it. Scheduler
 * ops only. */
struct weft_uthread *weft_vcore_yielder(void);

/* weft_vcore_kick() says work became runnable, preferably for vcore hint
 * (-1: any): if no vcore is spinning for work, wake one parked vcore (hint's
 * if it is parked). Cheap when nothing is parked. Any context. */
void weft_vcore_kick(int hint);

/* weft_vcore_kick_local() is weft_vcore_kick(-1) for work the calling vcore
 * queued on its own queues, which it looks at before it can park: it wakes a
 * parked vcore only if nobody spins, to share the work, and skips the full
 * fence (a kick missed in a race only leaves the work to its own busy
 * vcore, never stranded). Vcore or uthread on a vcore. */
void weft_vcore_kick_local(void);

/* weft_vcore_poke() makes vcore id call ops->poked() soon: at its next
 * scheduling decision, interrupting the uthread it runs (a notification) if
 * that may take long, or waking it if it is parked. Any context. */
void weft_vcore_poke(int id);

/* weft_vcore_decisions(id) counts the uthreads vcore id has started or
 * resumed: unchanged over a while means it runs one uthread all along. A
 * hint; any context. */
uint64_t weft_vcore_decisions(int id);

/* weft_vcore_preempt() asks vcore id to reconsider the uthread it runs (a
 * more urgent one became runnable for it): the runtime interrupts that
 * uthread and asks ops->should_preempt. Another vcore is interrupted by a
 * notification (if that uthread has notifications disabled: at its
 * outermost weft_notifs_enable); the caller's own vcore, from a uthread, at
 * the uthread's next safe point: the end of the weft call that made the
 * other runnable if that call may switch (weft_mutex_unlock,
 * weft_cond_signal/broadcast, weft_spawn, weft_setprio, weft_rwlock_unlock,
 * weft_wg_done, weft_barrier_wait; not the async-signal-safe weft_unpark, weft_sem_post,
 * weft_futex_wake), else its next switch or tick. From vcore context of id,
 * a uthread interrupted there (a notification being handled) is
 * reconsidered before it resumes. A vcore that is idle or deciding anyway
 * just drops the request. Any context. */
void weft_vcore_preempt(int id);

/* weft_vcore_cede() is for sched_entry: this vcore sleeps in the kernel,
 * leaving its CPU to other processes, until deadline_ns (CLOCK_MONOTONIC;
 * at most 100 ms from now), until an event is posted to it (weft_vcore_poke,
 * weft_vcore_notify, a preemption request) or weft_vcore_wake(id), or until
 * the runtime stops. It is not counted idle meanwhile: kicks for other work
 * do not wait for it. Returns 1 if it woke for an event (the scheduler
 * should run something or return, so that the event is handled), else 0.
 * The scheduler must have published whatever makes others wake it (poke it)
 * before calling, and look at its queues again after. Vcore context only. */
int weft_vcore_cede(uint64_t deadline_ns);

/* weft_vcore_kernel_idle() runs the calling vcore's kernel thread under the
 * kernel's SCHED_IDLE policy (on nonzero: any other thread that becomes
 * runnable on its CPU gets the CPU at once, this one only what is left) or
 * back under the policy it had (0). For a scheduler that knows of more
 * urgent work in other processes on its CPU (<weft/board.h>). Returns 0
 * (also when already so), ENOTSUP if this process could not leave SCHED_IDLE
 * again (an unprivileged one whose RLIMIT_NICE does not allow it: tried once
 * on a helper thread; the policy is then left alone), EPERM outside a vcore's
 * thread, or sched_setscheduler's error. Vcore context or a scheduler op of
 * the calling vcore; never from a signal handler. */
int weft_vcore_kernel_idle(int on);

/* weft_vcore_wake() wakes vcore id if it is parked, even when others spin:
 * for work only that vcore may run (a WEFT_PINNED uthread). Any context. */
void weft_vcore_wake(int id);

/* A small spinlock for scheduler queues (vcore context and uthreads alike):
 * hold it for a few pointer updates only, and never block while holding it.
 * WEFT_SPINLOCK_INIT or zero. */
typedef struct { uint32_t v; } weft_spinlock_t;
#define WEFT_SPINLOCK_INIT { 0 }

/* weft_spin_lock() takes l: spins with a CPU pause, then yields the kernel
 * thread, so a descheduled holder cannot make us burn the core. Taken by a
 * uthread, it holds notifications off until the matching weft_spin_unlock()
 * (as weft_notifs_disable, without pinning): a uthread preempted while
 * holding it would leave a waiter on its vcore, which is never preempted
 * inside weft, spinning for ever. A preemption due meanwhile is taken at the
 * uthread's next safe point or tick. */
void weft_spin_lock(weft_spinlock_t *l);

/* weft_spin_unlock() releases l, taken by the same uthread or vcore context. */
void weft_spin_unlock(weft_spinlock_t *l);

/* weft_vcore_parking() is true while the calling vcore makes its last
 * sched_entry() call before it parks: a scheduler must not hold any work
 * back then (for example a freshly queued uthread it would otherwise leave
 * to its own vcore a little longer), or the work could wait for that vcore. */
int weft_vcore_parking(void);

/* weft_vcore_busy(id) is true if vcore id is running a uthread or making a
 * scheduling decision, false if it spins for work or is parked. A hint; any
 * context. */
int weft_vcore_busy(int id);

/* weft_sched_rand() returns a per-vcore pseudo-random number (vcore context). */
uint32_t weft_sched_rand(void);

/* weft_sched_note_shared() counts n atomic read-modify-writes of state that
 * other vcores also write (a steal, a shared queue's lock) in the calling
 * vcore's weft_stats() shared_rmw, so the cost of a scheduler's sharing can
 * be measured. Any context (a no-op off a vcore). */
void weft_sched_note_shared(unsigned n);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_SCHED_H */
