/*
 * pthread.h — POSIX threads on weft: pthread_create makes a uthread, the
 * mutexes, condition variables, ... park uthreads instead of blocking
 * vcores. Link with libweft-pthread: $(pkg-config --variable=pthread_libs weft).
 *
 * Two ways to use it:
 *   - #include <weft/pthread.h> (after or instead of <pthread.h>): every
 *     pthread_ and sem_ name below becomes a macro for weft_pthread_ /
 *     weft_sem_ functions, so calls go straight to weft (this also works in
 *     sanitizer builds). Define WEFT_PTHREAD_NO_MACROS to get only the
 *     weft_pthread_ names.
 *   - LD_PRELOAD=libweft-pthread.so for an unmodified binary
 *     ($(pkg-config --variable=pthread_preload weft)), or link it
 *     first): the library defines the pthread_ and sem_ names themselves and
 *     includes the I/O shim of libweft-preload.so. Not in sanitizer builds
 *     (the sanitizer runtimes own those names).
 *
 * Semantics are POSIX's, with these differences (also in the README):
 *   - Every call works from a plain kernel thread too (main, say): blocking
 *     calls block it, and objects may be shared between uthreads and kernel
 *     threads. pthread_create from anywhere makes a uthread.
 *   - Refused with an errno, nothing changed: process-shared objects
 *     (pthread_mutex_init/cond/rwlock/barrier with PTHREAD_PROCESS_SHARED,
 *     sem_init(pshared != 0), sem_open: ENOTSUP), robust and
 *     priority-inheriting or -protecting mutexes (ENOTSUP), real-time
 *     scheduling policies (SCHED_FIFO, SCHED_RR: ENOTSUP), a stack the caller
 *     supplies (pthread_attr_setstack/setstackaddr then pthread_create:
 *     ENOTSUP), asynchronous cancellation (pthread_setcanceltype: ENOTSUP).
 *   - Cancellation is deferred. A request wakes a thread blocked in
 *     pthread_cond_wait/timedwait, sleep, usleep, nanosleep or
 *     pthread_testcancel; pthread_join, sem_wait/timedwait and the I/O calls
 *     of the shim act on it when they are entered.
 *   - pthread_sigmask and pthread_kill on a uthread act on a per-uthread
 *     mask and pending set: a signal sent with pthread_kill runs the
 *     process's handler on the target uthread the next time it enters
 *     pthread_sigmask, sched_yield or a cancellation point, when unmasked.
 *     Signals the kernel delivers go to a vcore's kernel thread as before.
 *   - Timed waits take CLOCK_REALTIME deadlines (or the clock of the
 *     condition variable or of the *clock* call) and are converted to
 *     CLOCK_MONOTONIC when the call starts: a later jump of the wall clock
 *     does not move them.
 *   - PTHREAD_MUTEX_NORMAL relocking by the owner deadlocks (a timed lock
 *     times out), as POSIX says; unlocking a mutex the caller does not hold
 *     is EPERM for every type.
 */
#ifndef WEFT_PTHREAD_H
#define WEFT_PTHREAD_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- threads ------------------------------------------------------------- */

/* pthread_create(): a uthread running fn(arg), with a stack of its own even
 * where stack copying is the process default (WEFT_STACK_COPY=1: threads
 * may share pointers into their stacks). EAGAIN (no memory), EINVAL (bad
 * attr), ENOTSUP (a caller-supplied stack, a real-time policy). */
int weft_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
/* pthread_join(): EDEADLK (self), EINVAL (detached, already joined), ESRCH
 * (not a thread). A cancellation point. */
int weft_pthread_join(pthread_t t, void **result);
/* pthread_detach(): EINVAL (already detached or being joined), ESRCH. */
int weft_pthread_detach(pthread_t t);
/* pthread_exit(): runs the cleanup handlers, then the key destructors, then
 * ends the uthread; from the main kernel thread, waits for every uthread and
 * exits the process with status 0 (the last thread's exit). */
_Noreturn void weft_pthread_exit(void *result);
/* pthread_self(): the calling uthread, or the kernel thread's own id. */
pthread_t weft_pthread_self(void);
/* pthread_equal(): nonzero if a and b name the same thread. */
int weft_pthread_equal(pthread_t a, pthread_t b);
/* pthread_once(): fn runs exactly once per o. */
int weft_pthread_once(pthread_once_t *o, void (*fn)(void));
/* sched_yield() / pthread_yield(): weft_yield in a uthread. Returns 0. */
int weft_sched_yield(void);
/* pthread_getattr_np(): t's stack (address and size) and detach state. */
int weft_pthread_getattr_np(pthread_t t, pthread_attr_t *attr);
/* pthread_setname_np / getname_np: the uthread's name (weft_name). */
int weft_pthread_setname_np(pthread_t t, const char *name);
int weft_pthread_getname_np(pthread_t t, char *buf, size_t len);
/* Scheduling: SCHED_OTHER only (others ENOTSUP); the priority is stored. */
int weft_pthread_setschedparam(pthread_t t, int policy, const struct sched_param *p);
int weft_pthread_getschedparam(pthread_t t, int *policy, struct sched_param *p);
int weft_pthread_setschedprio(pthread_t t, int prio);
int weft_pthread_setconcurrency(int level);
int weft_pthread_getconcurrency(void);
/* Calls that take a pthread_t: for a uthread, getcpuclockid is ENOENT (its
 * CPU time is its vcore's), setaffinity_np is accepted and changes nothing
 * (the vcores are pinned), getaffinity_np gives the process's CPUs,
 * tryjoin_np is EBUSY until it has finished, timedjoin_np waits for it. */
int weft_pthread_getcpuclockid(pthread_t t, clockid_t *clock);
int weft_pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t *set);
int weft_pthread_getaffinity_np(pthread_t t, size_t size, cpu_set_t *set);
int weft_pthread_tryjoin_np(pthread_t t, void **result);
int weft_pthread_timedjoin_np(pthread_t t, void **result, const struct timespec *abstime);

/* ---- attributes (stack size and detach state used; the rest stored) ---------- */

int weft_pthread_attr_init(pthread_attr_t *a);
int weft_pthread_attr_destroy(pthread_attr_t *a);
int weft_pthread_attr_setdetachstate(pthread_attr_t *a, int state);
int weft_pthread_attr_getdetachstate(const pthread_attr_t *a, int *state);
int weft_pthread_attr_setstacksize(pthread_attr_t *a, size_t size);
int weft_pthread_attr_getstacksize(const pthread_attr_t *a, size_t *size);
int weft_pthread_attr_setstack(pthread_attr_t *a, void *addr, size_t size);
int weft_pthread_attr_getstack(const pthread_attr_t *a, void **addr, size_t *size);
int weft_pthread_attr_setstackaddr(pthread_attr_t *a, void *addr);
int weft_pthread_attr_getstackaddr(const pthread_attr_t *a, void **addr);
int weft_pthread_attr_setguardsize(pthread_attr_t *a, size_t size);
int weft_pthread_attr_getguardsize(const pthread_attr_t *a, size_t *size);
int weft_pthread_attr_setscope(pthread_attr_t *a, int scope);
int weft_pthread_attr_getscope(const pthread_attr_t *a, int *scope);
int weft_pthread_attr_setinheritsched(pthread_attr_t *a, int inherit);
int weft_pthread_attr_getinheritsched(const pthread_attr_t *a, int *inherit);
int weft_pthread_attr_setschedpolicy(pthread_attr_t *a, int policy);
int weft_pthread_attr_getschedpolicy(const pthread_attr_t *a, int *policy);
int weft_pthread_attr_setschedparam(pthread_attr_t *a, const struct sched_param *p);
int weft_pthread_attr_getschedparam(const pthread_attr_t *a, struct sched_param *p);

/* ---- mutexes -------------------------------------------------------------- */

int weft_pthread_mutexattr_init(pthread_mutexattr_t *a);
int weft_pthread_mutexattr_destroy(pthread_mutexattr_t *a);
int weft_pthread_mutexattr_settype(pthread_mutexattr_t *a, int type);
int weft_pthread_mutexattr_gettype(const pthread_mutexattr_t *a, int *type);
int weft_pthread_mutexattr_setpshared(pthread_mutexattr_t *a, int pshared);
int weft_pthread_mutexattr_getpshared(const pthread_mutexattr_t *a, int *pshared);
int weft_pthread_mutexattr_setprotocol(pthread_mutexattr_t *a, int protocol);
int weft_pthread_mutexattr_getprotocol(const pthread_mutexattr_t *a, int *protocol);
int weft_pthread_mutexattr_setprioceiling(pthread_mutexattr_t *a, int ceiling);
int weft_pthread_mutexattr_getprioceiling(const pthread_mutexattr_t *a, int *ceiling);
int weft_pthread_mutexattr_setrobust(pthread_mutexattr_t *a, int robust);
int weft_pthread_mutexattr_getrobust(const pthread_mutexattr_t *a, int *robust);
/* pthread_mutex_init(): ENOTSUP for process-shared, robust, PI/PP attrs. */
int weft_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a);
int weft_pthread_mutex_destroy(pthread_mutex_t *m);
int weft_pthread_mutex_lock(pthread_mutex_t *m);
int weft_pthread_mutex_trylock(pthread_mutex_t *m);
int weft_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime);
int weft_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *abstime);
int weft_pthread_mutex_unlock(pthread_mutex_t *m);
int weft_pthread_mutex_consistent(pthread_mutex_t *m);
int weft_pthread_mutex_getprioceiling(const pthread_mutex_t *m, int *ceiling);
int weft_pthread_mutex_setprioceiling(pthread_mutex_t *m, int ceiling, int *old);

/* ---- condition variables ---------------------------------------------------- */

int weft_pthread_condattr_init(pthread_condattr_t *a);
int weft_pthread_condattr_destroy(pthread_condattr_t *a);
int weft_pthread_condattr_setclock(pthread_condattr_t *a, clockid_t clock);
int weft_pthread_condattr_getclock(const pthread_condattr_t *a, clockid_t *clock);
int weft_pthread_condattr_setpshared(pthread_condattr_t *a, int pshared);
int weft_pthread_condattr_getpshared(const pthread_condattr_t *a, int *pshared);
int weft_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a);
int weft_pthread_cond_destroy(pthread_cond_t *c);
/* pthread_cond_wait / timedwait / clockwait: cancellation points. */
int weft_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int weft_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime);
int weft_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                                const struct timespec *abstime);
int weft_pthread_cond_signal(pthread_cond_t *c);
int weft_pthread_cond_broadcast(pthread_cond_t *c);

/* ---- rwlocks, barriers, spinlocks --------------------------------------------- */

int weft_pthread_rwlockattr_init(pthread_rwlockattr_t *a);
int weft_pthread_rwlockattr_destroy(pthread_rwlockattr_t *a);
int weft_pthread_rwlockattr_setpshared(pthread_rwlockattr_t *a, int pshared);
int weft_pthread_rwlockattr_getpshared(const pthread_rwlockattr_t *a, int *pshared);
int weft_pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *a);
int weft_pthread_rwlock_destroy(pthread_rwlock_t *l);
int weft_pthread_rwlock_rdlock(pthread_rwlock_t *l);
int weft_pthread_rwlock_wrlock(pthread_rwlock_t *l);
int weft_pthread_rwlock_tryrdlock(pthread_rwlock_t *l);
int weft_pthread_rwlock_trywrlock(pthread_rwlock_t *l);
int weft_pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abstime);
int weft_pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abstime);
int weft_pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clock, const struct timespec *abstime);
int weft_pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clock, const struct timespec *abstime);
int weft_pthread_rwlock_unlock(pthread_rwlock_t *l);
int weft_pthread_barrierattr_init(pthread_barrierattr_t *a);
int weft_pthread_barrierattr_destroy(pthread_barrierattr_t *a);
int weft_pthread_barrierattr_setpshared(pthread_barrierattr_t *a, int pshared);
int weft_pthread_barrierattr_getpshared(const pthread_barrierattr_t *a, int *pshared);
int weft_pthread_barrier_init(pthread_barrier_t *b, const pthread_barrierattr_t *a, unsigned count);
int weft_pthread_barrier_destroy(pthread_barrier_t *b);
int weft_pthread_barrier_wait(pthread_barrier_t *b);
int weft_pthread_spin_init(pthread_spinlock_t *s, int pshared);
int weft_pthread_spin_destroy(pthread_spinlock_t *s);
int weft_pthread_spin_lock(pthread_spinlock_t *s);
int weft_pthread_spin_trylock(pthread_spinlock_t *s);
int weft_pthread_spin_unlock(pthread_spinlock_t *s);

/* ---- keys, cancellation, signals ------------------------------------------------ */

int weft_pthread_key_create(pthread_key_t *k, void (*destructor)(void *));
int weft_pthread_key_delete(pthread_key_t k);
void *weft_pthread_getspecific(pthread_key_t k);
int weft_pthread_setspecific(pthread_key_t k, const void *value);
/* pthread_cancel(): 0, or ESRCH; the request is acted on at a cancellation
 * point of t (deferred only). */
int weft_pthread_cancel(pthread_t t);
int weft_pthread_setcancelstate(int state, int *old);
/* pthread_setcanceltype(): PTHREAD_CANCEL_ASYNCHRONOUS is ENOTSUP. */
int weft_pthread_setcanceltype(int type, int *old);
void weft_pthread_testcancel(void);
int weft_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);
int weft_pthread_kill(pthread_t t, int sig);

/* Cleanup handlers of <weft/pthread.h> (the macros below). */
struct weft_pthread_cleanup {
    void *prev;                      /* the handler below (weft's use) */
    void *kind;                      /* weft's use */
    void (*fn)(void *);
    void *arg;
};
void weft_pthread_cleanup_push_(struct weft_pthread_cleanup *c);
void weft_pthread_cleanup_pop_(struct weft_pthread_cleanup *c, int execute);

/* ---- unnamed semaphores: return 0 or -1 with errno, as POSIX ------------------------ */

/* sem_init(): ENOTSUP when pshared is nonzero, EINVAL above SEM_VALUE_MAX. */
int weft_psem_init(sem_t *s, int pshared, unsigned value);
int weft_psem_destroy(sem_t *s);
int weft_psem_wait(sem_t *s);
int weft_psem_trywait(sem_t *s);
int weft_psem_timedwait(sem_t *s, const struct timespec *abstime);
int weft_psem_clockwait(sem_t *s, clockid_t clock, const struct timespec *abstime);
int weft_psem_post(sem_t *s);
int weft_psem_getvalue(sem_t *s, int *value);
/* sem_open(): named semaphores are process-shared: SEM_FAILED with ENOTSUP. */
sem_t *weft_psem_open(const char *name, int oflag, ...);

#ifdef __cplusplus
}
#endif

#ifndef WEFT_PTHREAD_NO_MACROS
#define pthread_create weft_pthread_create
#define pthread_join weft_pthread_join
#define pthread_detach weft_pthread_detach
#define pthread_exit weft_pthread_exit
#define pthread_self weft_pthread_self
#define pthread_equal weft_pthread_equal
#define pthread_once weft_pthread_once
#define sched_yield weft_sched_yield
#define pthread_yield weft_sched_yield
#define pthread_getattr_np weft_pthread_getattr_np
#define pthread_setname_np weft_pthread_setname_np
#define pthread_getname_np weft_pthread_getname_np
#define pthread_setschedparam weft_pthread_setschedparam
#define pthread_getschedparam weft_pthread_getschedparam
#define pthread_setschedprio weft_pthread_setschedprio
#define pthread_setconcurrency weft_pthread_setconcurrency
#define pthread_getcpuclockid weft_pthread_getcpuclockid
#define pthread_setaffinity_np weft_pthread_setaffinity_np
#define pthread_getaffinity_np weft_pthread_getaffinity_np
#define pthread_tryjoin_np weft_pthread_tryjoin_np
#define pthread_timedjoin_np weft_pthread_timedjoin_np
#define pthread_getconcurrency weft_pthread_getconcurrency
#define pthread_attr_init weft_pthread_attr_init
#define pthread_attr_destroy weft_pthread_attr_destroy
#define pthread_attr_setdetachstate weft_pthread_attr_setdetachstate
#define pthread_attr_getdetachstate weft_pthread_attr_getdetachstate
#define pthread_attr_setstacksize weft_pthread_attr_setstacksize
#define pthread_attr_getstacksize weft_pthread_attr_getstacksize
#define pthread_attr_setstack weft_pthread_attr_setstack
#define pthread_attr_getstack weft_pthread_attr_getstack
#define pthread_attr_setstackaddr weft_pthread_attr_setstackaddr
#define pthread_attr_getstackaddr weft_pthread_attr_getstackaddr
#define pthread_attr_setguardsize weft_pthread_attr_setguardsize
#define pthread_attr_getguardsize weft_pthread_attr_getguardsize
#define pthread_attr_setscope weft_pthread_attr_setscope
#define pthread_attr_getscope weft_pthread_attr_getscope
#define pthread_attr_setinheritsched weft_pthread_attr_setinheritsched
#define pthread_attr_getinheritsched weft_pthread_attr_getinheritsched
#define pthread_attr_setschedpolicy weft_pthread_attr_setschedpolicy
#define pthread_attr_getschedpolicy weft_pthread_attr_getschedpolicy
#define pthread_attr_setschedparam weft_pthread_attr_setschedparam
#define pthread_attr_getschedparam weft_pthread_attr_getschedparam
#define pthread_mutexattr_init weft_pthread_mutexattr_init
#define pthread_mutexattr_destroy weft_pthread_mutexattr_destroy
#define pthread_mutexattr_settype weft_pthread_mutexattr_settype
#define pthread_mutexattr_gettype weft_pthread_mutexattr_gettype
#define pthread_mutexattr_setpshared weft_pthread_mutexattr_setpshared
#define pthread_mutexattr_getpshared weft_pthread_mutexattr_getpshared
#define pthread_mutexattr_setprotocol weft_pthread_mutexattr_setprotocol
#define pthread_mutexattr_getprotocol weft_pthread_mutexattr_getprotocol
#define pthread_mutexattr_setprioceiling weft_pthread_mutexattr_setprioceiling
#define pthread_mutexattr_getprioceiling weft_pthread_mutexattr_getprioceiling
#define pthread_mutexattr_setrobust weft_pthread_mutexattr_setrobust
#define pthread_mutexattr_getrobust weft_pthread_mutexattr_getrobust
#define pthread_mutex_init weft_pthread_mutex_init
#define pthread_mutex_destroy weft_pthread_mutex_destroy
#define pthread_mutex_lock weft_pthread_mutex_lock
#define pthread_mutex_trylock weft_pthread_mutex_trylock
#define pthread_mutex_timedlock weft_pthread_mutex_timedlock
#define pthread_mutex_clocklock weft_pthread_mutex_clocklock
#define pthread_mutex_unlock weft_pthread_mutex_unlock
#define pthread_mutex_consistent weft_pthread_mutex_consistent
#define pthread_mutex_getprioceiling weft_pthread_mutex_getprioceiling
#define pthread_mutex_setprioceiling weft_pthread_mutex_setprioceiling
#define pthread_condattr_init weft_pthread_condattr_init
#define pthread_condattr_destroy weft_pthread_condattr_destroy
#define pthread_condattr_setclock weft_pthread_condattr_setclock
#define pthread_condattr_getclock weft_pthread_condattr_getclock
#define pthread_condattr_setpshared weft_pthread_condattr_setpshared
#define pthread_condattr_getpshared weft_pthread_condattr_getpshared
#define pthread_cond_init weft_pthread_cond_init
#define pthread_cond_destroy weft_pthread_cond_destroy
#define pthread_cond_wait weft_pthread_cond_wait
#define pthread_cond_timedwait weft_pthread_cond_timedwait
#define pthread_cond_clockwait weft_pthread_cond_clockwait
#define pthread_cond_signal weft_pthread_cond_signal
#define pthread_cond_broadcast weft_pthread_cond_broadcast
#define pthread_rwlockattr_init weft_pthread_rwlockattr_init
#define pthread_rwlockattr_destroy weft_pthread_rwlockattr_destroy
#define pthread_rwlockattr_setpshared weft_pthread_rwlockattr_setpshared
#define pthread_rwlockattr_getpshared weft_pthread_rwlockattr_getpshared
#define pthread_rwlock_init weft_pthread_rwlock_init
#define pthread_rwlock_destroy weft_pthread_rwlock_destroy
#define pthread_rwlock_rdlock weft_pthread_rwlock_rdlock
#define pthread_rwlock_wrlock weft_pthread_rwlock_wrlock
#define pthread_rwlock_tryrdlock weft_pthread_rwlock_tryrdlock
#define pthread_rwlock_trywrlock weft_pthread_rwlock_trywrlock
#define pthread_rwlock_timedrdlock weft_pthread_rwlock_timedrdlock
#define pthread_rwlock_timedwrlock weft_pthread_rwlock_timedwrlock
#define pthread_rwlock_clockrdlock weft_pthread_rwlock_clockrdlock
#define pthread_rwlock_clockwrlock weft_pthread_rwlock_clockwrlock
#define pthread_rwlock_unlock weft_pthread_rwlock_unlock
#define pthread_barrierattr_init weft_pthread_barrierattr_init
#define pthread_barrierattr_destroy weft_pthread_barrierattr_destroy
#define pthread_barrierattr_setpshared weft_pthread_barrierattr_setpshared
#define pthread_barrierattr_getpshared weft_pthread_barrierattr_getpshared
#define pthread_barrier_init weft_pthread_barrier_init
#define pthread_barrier_destroy weft_pthread_barrier_destroy
#define pthread_barrier_wait weft_pthread_barrier_wait
#define pthread_spin_init weft_pthread_spin_init
#define pthread_spin_destroy weft_pthread_spin_destroy
#define pthread_spin_lock weft_pthread_spin_lock
#define pthread_spin_trylock weft_pthread_spin_trylock
#define pthread_spin_unlock weft_pthread_spin_unlock
#define pthread_key_create weft_pthread_key_create
#define pthread_key_delete weft_pthread_key_delete
#define pthread_getspecific weft_pthread_getspecific
#define pthread_setspecific weft_pthread_setspecific
#define pthread_cancel weft_pthread_cancel
#define pthread_setcancelstate weft_pthread_setcancelstate
#define pthread_setcanceltype weft_pthread_setcanceltype
#define pthread_testcancel weft_pthread_testcancel
#define pthread_sigmask weft_pthread_sigmask
#define pthread_kill weft_pthread_kill
#define sem_init weft_psem_init
#define sem_destroy weft_psem_destroy
#define sem_wait weft_psem_wait
#define sem_trywait weft_psem_trywait
#define sem_timedwait weft_psem_timedwait
#define sem_clockwait weft_psem_clockwait
#define sem_post weft_psem_post
#define sem_getvalue weft_psem_getvalue
#define sem_open weft_psem_open
#undef pthread_cleanup_push
#undef pthread_cleanup_pop
#define pthread_cleanup_push(fn, a)                                            \
    do {                                                                       \
        struct weft_pthread_cleanup weft_cleanup_ = { 0, 0, (fn), (a) };       \
        weft_pthread_cleanup_push_(&weft_cleanup_);                            \
        do {
#define pthread_cleanup_pop(execute)                                           \
        } while (0);                                                           \
        weft_pthread_cleanup_pop_(&weft_cleanup_, (execute));                  \
    } while (0)
#endif /* WEFT_PTHREAD_NO_MACROS */

#pragma GCC visibility pop

#endif /* WEFT_PTHREAD_H */
