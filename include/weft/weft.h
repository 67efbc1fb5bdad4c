/*
 * weft.h — the umbrella header: runtime and uthreads; includes time.h (clocks,
 * sleep, alarms), io.h (I/O that parks), sync.h, sched.h, event.h and
 * board.h.
 *
 * weft runs one pinned kernel thread per core ("vcore") and multiplexes cheap
 * user-level threads ("uthreads") on them. Every call here also works from an
 * ordinary kernel thread that is not a uthread (main, say): there, blocking
 * calls block the kernel thread. The runtime starts lazily on first use.
 *
 * Error rule: thread and synchronisation calls return 0 or a positive errno
 * value (like pthreads) and never touch errno; errno itself is preserved per
 * uthread across every switch. One caveat: errno lives in the kernel
 * thread's TLS, a uthread may move to another vcore whenever it blocks or
 * yields (unless WEFT_PINNED), and glibc lets the compiler reuse errno's
 * address within a function across calls. So read errno right after the call
 * that set it, not across a blocking weft call in the same function.
 *
 * Deadlines and timeouts are nanoseconds. Deadlines are absolute on
 * CLOCK_MONOTONIC (weft_now_ns()); WEFT_FOREVER means "no deadline". A value
 * with the top bit set (a negative number cast to uint64_t) other than
 * WEFT_FOREVER is rejected with EINVAL. A deadline already in the past makes a
 * timed call try once without blocking and return ETIMEDOUT if it would block.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_FOREVER UINT64_MAX

/* ---- runtime ------------------------------------------------------------ */

/* Runtime configuration; a zero field means "default or environment".
 * Environment overrides for zero fields: WEFT_VCORES, WEFT_STACK_SIZE,
 * WEFT_PREEMPT_US, WEFT_SCHED, WEFT_STACK_COPY, WEFT_TLS. Every WEFT_*
 * variable (the README's table) is read at each weft_init; a bad value is
 * refused with a message on stderr and counts as unset. */
struct weft_config {
    int vcores;          /* vcores to run, 1..weft_max_vcores(); 0 = all */
    size_t stack_size;   /* default uthread stack in bytes; 0 = 256 KiB */
    unsigned preempt_us; /* preemption period in us, 10..10000000; 0 = the
                            environment, else what weft_set_preempt_period()
                            last set, else cooperative (see <weft/event.h>) */
    const char *sched;   /* scheduler name: "ws" (default), "fifo", "prio"
                            (priorities, see weft_setprio), or one registered
                            with weft_sched_register() */
    int stack_copy;      /* 1: every spawn is WEFT_STACK_COPY unless it asks for
                            WEFT_STACK_OWN or a stack larger than a run stack;
                            0 = the environment (WEFT_STACK_COPY=1), else off */
    int tls;             /* WEFT_TLS_SHARED or WEFT_TLS_UTHREAD; 0 = the
                            environment (WEFT_TLS=shared|uthread), else shared */
};

/* TLS modes. Shared (the default): a uthread uses the thread-local storage
 * of the vcore that runs it (errno is carried across switches; other
 * __thread variables are the kernel thread's). Uthread: each uthread has its
 * own static TLS area, laid out as glibc lays out a thread's, and its own
 * thread pointer, switched with the uthread (wrfsbase, or arch_prctl where
 * the CPU or kernel does not allow it; tpidr_el0 on aarch64): __thread
 * variables, errno and glibc's per-thread state follow it across vcores,
 * dlopen()ed modules' TLS is allocated on first use as for threads. It
 * costs a thread-pointer load per switch and the area per uthread (the C
 * library's static TLS size, a few KiB, at the top of its stack). Refused
 * (weft_init returns ENOTSUP, saying why) in sanitizer builds and with a C
 * library that does not describe its thread layout. The yield pass's flag
 * mode does not preempt in this mode (signals and counter mode do). */
#define WEFT_TLS_SHARED  1
#define WEFT_TLS_UTHREAD 2

/* weft_init() starts the runtime with cfg (NULL = defaults and environment).
 * Returns 0, EBUSY if already running (or if the application handles the
 * notification signal, see <weft/event.h>), EINVAL for a bad field or
 * unknown scheduler, or EAGAIN/ENOMEM if threads or memory cannot be had. Optional: the first call that needs the runtime
 * starts it with defaults. */
int weft_init(const struct weft_config *cfg);

/* weft_config_get() reads the numeric WEFT_* variable called name as the
 * last weft_init took it (within its range; for a scheduler's own
 * settings, such as prio's WEFT_PRIO_AGING_MS). Returns 0 with *out set,
 * ENOENT if it was unset or refused, EINVAL if weft has no numeric
 * variable of that name or out is NULL. Any context. */
int weft_config_get(const char *name, long long *out);

/* weft_shutdown() waits until every uthread has finished (joined or not),
 * stops the vcores and frees the runtime's memory; weft_init() may be called
 * again afterwards. Must be called from outside any uthread: from a uthread it
 * does nothing and says so on stderr. No-op if the runtime is not running.
 * Other kernel threads may race it: from the moment it begins, their
 * weft_spawn() gets ESHUTDOWN; once the uthreads are done, so do
 * weft_alarm_start(), weft_vcore_notify() (EAGAIN), weft_stats() (EINVAL);
 * calls admitted before finish first. Uthreads may spawn until they are
 * all done. */
void weft_shutdown(void);

/* fork(): as with pthreads, the child has one thread, the caller. weft's
 * fork handler (pthread_atfork) gives the child a runtime that was never
 * started: none of the parent's vcores, uthreads, alarms or poller exist
 * there, and the next call that needs the runtime starts a fresh one with
 * the defaults (new vcores, a new poller of its own; descriptors the parent
 * used through weft keep their blocking behaviour). A uthread that forks goes
 * on in the child as a plain kernel thread on its stack: weft_self() is
 * NULL, blocking calls block the thread, weft mutexes it held are still its
 * own, and returning from its function (or weft_exit) ends the child with
 * status 0, as the last thread's exit does. Synchronisation objects that
 * other uthreads held or waited on at the fork stay as the fork found them
 * (using them in the child is undefined, as with pthreads); the parent's
 * runtime memory is not reclaimed in the child. The parent is unaffected.
 * fork + exec, posix_spawn() and system() just work. From vcore context (an
 * alarm callback, a scheduler op) the child may only exec or _exit. */

/* Signal handlers. Three calls are async-signal-safe, as sem_post(3) is in
 * POSIX: weft_unpark(), weft_sem_post() (so weft_futex_wake()) and
 * weft_vcore_notify(); a handler on any thread may call them, whatever it
 * interrupted. When it may have interrupted weft's own code on that thread
 * (a weft lock held, a scheduler step or a switch under way, vcore context,
 * or the handler runs on the vcore's signal stack, SA_ONSTACK), the call
 * leaves its work on the vcore's lock-free queue and the vcore does it at
 * its next scheduling decision; nothing is lost. No other weft call is
 * async-signal-safe. Where weft can tell that a handler interrupted it (the
 * cases above), the calls that block, switch or allocate refuse with
 * EDEADLK instead of deadlocking: weft_spawn, weft_join, the sleeps,
 * weft_futex_wait, weft_mutex_lock (slow path), weft_sem_wait (slow path),
 * weft_cond_wait, weft_park (not on the signal stack); weft_yield returns at
 * once. A handler that interrupted application code cannot be told from a
 * plain call: there those calls must not be made (they would switch inside
 * the handler). */

/* ---- uthreads ------------------------------------------------------------ */

typedef struct weft_uthread *weft_t;

/* Spawn attributes. A zero-filled weft_attr_t means all defaults. */
typedef struct {
    size_t stack_size;   /* 0 = runtime default; rounded up to at least 16 KiB
                            (64 KiB in sanitizer builds)
                            and to whole pages; above 1 GiB is EINVAL. An
                            overflow into the guard below (a quarter of the
                            stack, between a page and 64 KiB; 64 KiB on
                            aarch64) is reported
                            (the uthread's id and name) and aborts; compile
                            code that runs on uthreads with
                            -fstack-clash-protection so that a frame larger
                            than the guard cannot step over it */
    int prio;            /* -32 (least urgent) .. 31 (most urgent), 0 default;
                            out of range is EINVAL. Honoured by the prio
                            scheduler (see weft_setprio) */
    unsigned flags;      /* WEFT_* flags below */
    int vcore;           /* vcore to start on, used with WEFT_ON_VCORE/WEFT_PINNED */
    const char *name;    /* optional name (copied, at most 31 chars kept) */
} weft_attr_t;

#define WEFT_DETACHED   0x1  /* no join: resources freed at exit */
#define WEFT_STACK_COPY 0x2  /* a stack-copy uthread: see below */
#define WEFT_ON_VCORE   0x4  /* start on attr.vcore; may migrate later */
#define WEFT_PINNED     0x8  /* run only ever on attr.vcore, never stolen */
#define WEFT_STACK_OWN  0x10 /* a stack of its own even when stack copying is the
                                process default (weft_config.stack_copy) */

/* Stack-copy uthreads (WEFT_STACK_COPY) have no stack of their own: they run
 * on a run stack (2 MiB, or the default stack size if larger; guarded) that
 * many of them share, and when one switches out (blocks, yields, is
 * preempted) the part of the stack it uses is copied to a buffer of that
 * size, and copied back, to the same addresses, before it runs again. Idle,
 * one costs its descriptor and that copy: a few hundred bytes for a shallow
 * stack, against a page or more for an ordinary uthread; a switch costs a
 * copy of the used stack each way, and one that finishes without switching
 * out copies nothing. The rule that comes with it: an address on a
 * stack-copy uthread's stack is valid only while that uthread runs. Nothing
 * that another uthread, a kernel thread or a timer may touch while it is
 * switched out may live on its stack: a weft_mutex_t, weft_wg_t, semaphore
 * or other synchronisation object others wait on, an armed weft_alarm, the
 * argument of weft_offload(), or a pointer handed to another thread. Put
 * those in the heap or in statics. weft's own wait records live in the
 * uthread, and a waiter, futex word or armed alarm found on a run stack
 * aborts with a message saying so. attr.stack_size, if set, is what it may
 * use, at most the run stack's size (EINVAL above). Mixed freely with
 * ordinary uthreads; migrates between vcores like them (with its run stack:
 * it resumes where that run stack is free). */

/* weft_spawn() creates a uthread running fn(arg) and stores its handle in
 * *out (out may be NULL for a detached thread). Returns 0, EINVAL (fn NULL,
 * unknown flag, vcore out of range or, for WEFT_PINNED, offline, prio out of
 * range, absurd stack size, joinable with out NULL, WEFT_STACK_COPY with
 * WEFT_STACK_OWN, a stack-copy uthread asking for more than a run stack),
 * EAGAIN/ENOMEM (no memory), or
 * ESHUTDOWN (called from a kernel thread that is not a vcore while
 * weft_shutdown() runs: it waits for the uthreads, and no new one may join
 * them from outside; once it has returned, a spawn starts the runtime again),
 * or EDEADLK (from a signal handler that interrupted weft). */
int weft_spawn(weft_t *out, const weft_attr_t *attr, void *(*fn)(void *), void *arg);

/* weft_join() waits for t to finish and stores its result in *result (if not
 * NULL), then frees t. Returns 0, EDEADLK if t is the caller (or from a
 * signal handler that interrupted weft), EINVAL if t is
 * NULL, detached, or already joined or being joined (detected while the
 * handle's memory has not been reused, as with pthreads). */
int weft_join(weft_t t, void **result);

/* weft_detach() makes t free itself when it finishes (at once if it already
 * has). Returns 0, or EINVAL if t is NULL, already detached or being joined. */
int weft_detach(weft_t t);

/* weft_self() returns the calling uthread, or NULL outside a uthread. */
weft_t weft_self(void);

/* weft_id() returns t's id (unique for the process's lifetime, from 1), or 0
 * for NULL. weft_name() returns its name, or NULL if it has none. */
uint64_t weft_id(weft_t t);
const char *weft_name(weft_t t);

/* weft_yield() lets other runnable uthreads run; the caller goes to the back
 * of its vcore's queue. Outside a uthread it is sched_yield(). */
void weft_yield(void);

/* weft_exit() ends the calling uthread with result. Outside a uthread it
 * calls pthread_exit(result). */
_Noreturn void weft_exit(void *result);

/* Sleeping and clocks: <weft/time.h>. */

/* weft_park() blocks the calling uthread until weft_unpark() is called for
 * it. An unpark that comes first is kept (one token) and makes the next park
 * return at once. Returns 0, EPERM outside a uthread (nobody could unpark
 * it), or EDEADLK from a signal handler that interrupted weft. */
int weft_park(void);

/* weft_unpark() wakes t if it is parked, or leaves it a token otherwise.
 * Returns 0, or EINVAL if t is NULL. t must not have been joined.
 * Async-signal-safe (see "Signal handlers" above). */
int weft_unpark(weft_t t);

/* weft_setprio() sets t's priority, -32 (WEFT_PRIO_MIN, least urgent) to 31
 * (WEFT_PRIO_MAX, most urgent); 0 is the default. The prio scheduler
 * (WEFT_SCHED=prio) runs more urgent uthreads first and moves t if it is
 * queued; ws and fifo ignore priorities. A uthread boosted by priority
 * inheritance (a more urgent one waits for a weft mutex it holds) keeps the
 * boost until it releases its mutexes; the new value applies then. t may be
 * the caller (a uthread that lowers itself below a queued one gives way at
 * once under prio), running elsewhere, queued or blocked; it must not have
 * been joined. Returns 0, or EINVAL (t NULL, prio out of range: nothing
 * changes). Not async-signal-safe. */
int weft_setprio(weft_t t, int prio);

/* weft_getprio() returns t's priority as last set (attr.prio at spawn or
 * weft_setprio), without any inheritance boost; 0 for NULL. */
int weft_getprio(weft_t t);

/* ---- thread keys ----------------------------------------------------------- */

/* A key names one value per thread (uthread or kernel thread), NULL until
 * the thread sets it; pthread_key_t's semantics. */
typedef unsigned weft_key_t;
#define WEFT_KEYS_MAX 1024
#define WEFT_DESTRUCTOR_ITERATIONS 4

/* weft_key_create() makes a new key; destructor (may be NULL) is called
 * with a thread's non-NULL value when that thread finishes, its value first
 * set to NULL; rounds repeat while destructors set values again, at most
 * WEFT_DESTRUCTOR_ITERATIONS. Returns 0, EINVAL (key NULL) or EAGAIN (all
 * WEFT_KEYS_MAX keys exist). */
int weft_key_create(weft_key_t *key, void (*destructor)(void *));
/* weft_key_delete() deletes key; no destructor runs, values stored under it
 * are never seen again (also through a later key with the same number).
 * Returns 0, or EINVAL if key does not exist. */
int weft_key_delete(weft_key_t key);
/* weft_key_getspecific() is the caller's value for key, or NULL (never set,
 * or key does not exist). */
void *weft_key_getspecific(weft_key_t key);
/* weft_key_setspecific() sets the caller's value for key. Returns 0, EINVAL
 * (key does not exist) or ENOMEM. */
int weft_key_setspecific(weft_key_t key, const void *value);


#ifdef __cplusplus
}
#endif

#include <weft/board.h>
#include <weft/event.h>
#include <weft/io.h>
#include <weft/sched.h>
#include <weft/sync.h>
#include <weft/time.h>

#pragma GCC visibility pop

#endif /* WEFT_WEFT_H */
