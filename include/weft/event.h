/*
 * event.h — events, notifications and preemption.
 *
 * Events. Every vcore has a queue of messages (a type and a payload).
 * weft_vcore_notify() posts one from anywhere: a uthread, vcore context, or a
 * kernel thread that is not a vcore. The vcore runs the handler registered
 * for the type in vcore context, at the top of its next scheduling decision,
 * so handlers never run inside a uthread and never run twice for one message.
 *
 * Notifications. A vcore that is running a uthread is interrupted by a
 * signal to its kernel thread (the stand-in for an inter-processor
 * interrupt): by default SIGRTMAX-2, or the signal number in
 * WEFT_NOTIF_SIGNAL (a real-time signal between SIGRTMIN and SIGRTMAX).
 * weft_init() fails with EBUSY if the application already handles that
 * signal. The signal switches the uthread out into vcore context, which
 * handles the events and then resumes it (or, for a preemption, queues it
 * at the back). A uthread can hold notifications off: weft_notifs_disable()
 * and weft_notifs_enable() nest, and a notification that arrives while they
 * are disabled is delivered when the outermost enable runs.
 *
 * Preemption. With a period set (weft_set_preempt_period(), weft_config's
 * preempt_us or WEFT_PREEMPT_US; 0, the default, is cooperative), a uthread
 * that has run for a whole period without a scheduling decision is
 * preempted: saved, handed to the scheduler as paused (the back of its
 * queue), and the vcore picks again.
 *
 * Signals off. With WEFT_PREEMPT_SIGNALS=0 in the environment at
 * weft_init(), the clock sends no notification signals at all: only code
 * compiled with the yield pass (<weft/yield.h>) is preempted, at its checks,
 * and due alarms and I/O are looked at when the vcore next decides.
 * weft_vcore_notify() still signals a busy vcore.
 *
 * Safe points. A uthread is only switched out by a signal when the
 * interrupted instruction lies outside libc, the dynamic linker, libgcc_s,
 * libstdc++, liburing, the vDSO, a sanitizer runtime and weft itself (their
 * code ranges are read once at weft_init), when its notifications are
 * enabled, and when it runs with no signal blocked that its vcore's thread
 * did not block at weft_init (inside a signal handler the kernel blocks the
 * handled signal: a handler is never switched out, so its mask and its
 * return stay on the thread it interrupted; a uthread that blocks signals
 * itself is not preempted until it unblocks them): a lock inside those can
 * therefore never be held by a descheduled uthread. Otherwise the preemption is deferred to the next safe point: the
 * next tick that finds the uthread in its own code, the next call into weft
 * that switches (any blocking call, weft_yield) or weft_now_ns(), or the
 * outermost weft_notifs_enable(). What stays unsafe is a lock of the
 * application's own (a spinlock, or a library's lock taken in code compiled
 * into the program) held across a preemption while another uthread on the
 * same vcore spins for it: wrap such critical sections in
 * weft_notifs_disable() / weft_notifs_enable(). (A weft_mutex_t is safe: its
 * waiters park instead of spinning; so is a weft_spinlock_t, which holds
 * notifications off while a uthread holds it.)
 *
 * What a preemption may move. A preempted uthread goes back to the
 * scheduler and may resume on another vcore, that is another kernel thread,
 * exactly as after a blocking call. Whatever belongs to the kernel thread
 * rather than to the uthread is then another thread's: a cached &errno
 * (weft carries errno's value across, not its address), the address of any
 * __thread variable, gettid() and pthread_self(), a pthread_mutex_t or a
 * flockfile() lock held across the preemption (its owner is the kernel
 * thread: another uthread there may take it, or the unlock comes from a
 * thread that does not own it), a thread-caching allocator's per-thread
 * cache pointer kept by the application, the signal mask and the CPU
 * affinity. Two ways to keep them: weft_notifs_disable() ... enable() holds
 * preemption off and keeps the uthread on its vcore until the outermost
 * enable, even if it blocks meanwhile (short sections); WEFT_PINNED keeps a
 * uthread on one vcore for life, so kernel-thread state stays valid across
 * preemptions and blocking, but other uthreads on that vcore run while it is
 * preempted (a pthread_mutex_t it holds can then block that whole vcore).
 *
 * Code that runs inside a callback from a library in that list (a
 * dl_iterate_phdr() callback, a qsort() comparator) is preemptible although
 * the library may hold a lock around the call: disable notifications there.
 *
 * System calls. Like any signal, the notification interrupts a system call
 * the uthread makes directly; the handler is installed with SA_RESTART, but
 * calls the kernel never restarts (nanosleep, poll, epoll_wait, ...) return
 * EINTR. weft's own calls and the shim's retry; code that calls the kernel
 * directly on a uthread must handle EINTR, as it must under any signal.
 *
 * ThreadSanitizer builds: TSan delays an asynchronous signal until the thread
 * next enters one of its interceptors, and then runs the handler from inside
 * its runtime with a copy of the interrupted context, so a switch from there
 * is impossible. In a TSan build a notification is therefore always
 * deferred as above, and a loop that never calls anything is not preempted.
 */
#ifndef WEFT_EVENT_H
#define WEFT_EVENT_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Event types below WEFT_EV_USER are weft's own: it posts them itself. */
#define WEFT_EV_PREEMPT 0u   /* the running uthread's period expired */
#define WEFT_EV_TIMER   1u   /* an alarm of this vcore is due */
#define WEFT_EV_IO      2u   /* look at the poller */
#define WEFT_EV_USER    8u   /* the first type an application may register */
#define WEFT_EV_MAX     64u  /* types are below this */

/* An event handler: runs in vcore context on the vcore the message was sent
 * to (weft_vcore_id() says which). It must not block; it may make uthreads
 * runnable, start alarms and post more events. */
typedef void (*weft_event_fn)(unsigned type, uintptr_t payload, void *arg);

/* weft_event_register() installs fn(type, payload, arg) as the handler of
 * type, for the life of the process. Returns 0, EINVAL (type outside
 * WEFT_EV_USER..WEFT_EV_MAX-1, or fn NULL) or EEXIST (type already has one). */
int weft_event_register(unsigned type, weft_event_fn fn, void *arg);

/* weft_vcore_notify() queues the message (type, payload) for vcore and makes
 * sure the vcore handles it soon: wakes it if it is parked, interrupts the
 * uthread it runs (unless that uthread has notifications disabled: then at
 * its weft_notifs_enable()). Every message is handled exactly once, in the
 * order sent by one sender. Any context, signal handlers included (it is
 * async-signal-safe: the queue is lock-free and allocates nothing). Returns
 * 0, EINVAL (no such vcore, or type is not an application type with a
 * handler), or EAGAIN (the runtime is not running, or weft_shutdown() is
 * stopping it). The queue holds 1024 messages: a sender that finds it full
 * waits for the vcore to handle some (a uthread yields, a kernel thread
 * spins), except from vcore context or a signal handler that interrupted
 * weft, which get EAGAIN. */
int weft_vcore_notify(int vcore, unsigned type, uintptr_t payload);

/* weft_notifs_disable() holds off notifications and preemption for the
 * calling uthread until the matching weft_notifs_enable(); calls nest (a
 * depth count). While disabled the uthread stays on its vcore, also if it
 * blocks (weft_vcores_release refuses that vcore meanwhile, EBUSY, as for a
 * WEFT_PINNED uthread; a release already under way when it disables may
 * still take the vcore, and the uthread then moves). Returns 0; a no-op
 * outside a uthread. */
int weft_notifs_disable(void);

/* weft_notifs_enable() undoes one weft_notifs_disable(); at depth 0 it
 * delivers what arrived meanwhile (events first, then a pending
 * preemption). Returns 0, or EPERM if notifications were not disabled.
 * A no-op (0) outside a uthread. */
int weft_notifs_enable(void);

/* weft_notifs_depth() returns the calling uthread's disable depth (0:
 * enabled, also outside a uthread). */
int weft_notifs_depth(void);

/* weft_set_preempt_period() sets the preemption period in microseconds for
 * every vcore, now and for later weft_init() calls (0 = cooperative).
 * Returns 0 or EINVAL (below 10 us or above 10 s, other than 0). */
int weft_set_preempt_period(unsigned us);

/* weft_preempt_period() returns the period in microseconds (0 = off). */
unsigned weft_preempt_period(void);

/* Per-vcore counters since weft_init(). The stretch is measured by the
 * preemption ticks, so it is known to within one period, and only while a
 * period is set. */
struct weft_vcore_stats {
    uint64_t decisions;          /* uthreads started or resumed on this vcore */
    uint64_t notifs;             /* notification signals taken */
    uint64_t events;             /* messages handled (weft's own and the application's) */
    uint64_t preempt_taken;      /* uthreads preempted */
    uint64_t preempt_deferred;   /* preemptions put off: unsafe code or notifs disabled */
    uint64_t longest_stretch_ns; /* longest run of one uthread without a decision */
    uint64_t handoffs;           /* of the decisions, direct switches from one uthread
                                    to the next (not through vcore context) */
    uint64_t kicks;              /* parked vcores this one woke for work */
    uint64_t parks;              /* times this vcore parked */
    uint64_t shared_rmw;         /* atomic read-modify-writes of run-wide state (idle
                                    counts and list, shared queues, steals) */
    uint64_t stack_copies;       /* stack-copy uthreads' stacks copied out here */
    uint64_t stack_copy_bytes;   /* the bytes those copies held */
    uint64_t stack_forwards;     /* stack-copy uthreads this vcore was to run but whose
                                    run stack another vcore held: handed to that one */
};

/* weft_stats() copies vcore's counters into *out. Returns 0, or EINVAL (no
 * such running vcore, or out NULL). Any context; the counters are read
 * without stopping the vcore. */
int weft_stats(int vcore, struct weft_vcore_stats *out);

/* weft_dump() writes the state of every vcore to file descriptor fd, for a
 * hung program: busy, spinning or parked, its counters, pending events, and
 * its last 16 park and kick decisions (park, woke: 1 kicked / 2 an event /
 * 0 a deadline or the poller, kick N / wake N: woke parked vcore N, busy:
 * found work after spinning), newest last. Reads without locks or
 * allocation (a hung vcore may hold any lock); the picture is racy. Any
 * context, including a watchdog thread. */
void weft_dump(int fd);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_EVENT_H */
