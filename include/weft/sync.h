/*
 * sync.h — synchronisation between uthreads, and between uthreads and
 * ordinary kernel threads: mutex, condition variable, semaphore, barrier,
 * rwlock, once, futex, wait group.
 *
 * A uthread that blocks here parks in user space (its vcore runs others); a
 * kernel thread that blocks here sleeps on a futex. Both may wait on the same
 * object. Every call returns 0 or a positive errno value and leaves errno
 * alone. Timed variants take an absolute CLOCK_MONOTONIC deadline in ns (see
 * weft.h: WEFT_FOREVER = none, top bit set = EINVAL, past = try once then
 * ETIMEDOUT). A timed call on a uthread also fails with ENOMEM, at once and
 * holding nothing new, when no memory can be had for its timer. Static
 * initialisers make init calls optional.
 *
 * The struct fields are private; they are visible only so that objects can be
 * embedded and statically initialised. Blocked threads wait in a table keyed
 * by address, not inside the object, and no call touches an object after the
 * moment it lets another thread proceed: a mutex may be destroyed and freed
 * by whoever locks it next right after an unlock, a condition variable right
 * after a broadcast, a semaphore by the thread its post woke (as POSIX
 * allows).
 */
#ifndef WEFT_SYNC_H
#define WEFT_SYNC_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct weft__waiter;
/* A FIFO of blocked waiters guarded by its own spinlock word. */
struct weft__waitq {
    uint32_t lock;               /* spinlock: 0 free, 1 held */
    uint32_t n;                  /* waiters queued; written under lock (atomic stores), may be peeked */
    struct weft__waiter *head;   /* guarded by lock */
    struct weft__waiter *tail;   /* guarded by lock */
};

/* ---- mutex ---------------------------------------------------------------- */

#define WEFT_MUTEX_PLAIN     0   /* relocking by the owner is EDEADLK */
#define WEFT_MUTEX_RECURSIVE 1   /* the owner may relock; unlock as often */

/* The layout matches glibc's pthread_mutex_t where it matters: kind sits
 * where glibc keeps its mutex kind (offset 16, 0 plain, 1 recursive), so
 * <weft/pthread.h> lays a weft mutex over a pthread_mutex_t and glibc's
 * static initialisers make valid weft mutexes. */
typedef struct weft_mutex {
    uint32_t state;              /* atomic: 0 free, 1 held, 2 held + maybe waiters */
    uint32_t depth;              /* recursion depth; owner only */
    void *owner;                 /* atomic: owner token; written by the owner */
    uint32_t kind;               /* WEFT_MUTEX_* (any other value acts plain); fixed at init */
    uint32_t contenders;         /* atomic: threads in the slow path of lock */
} weft_mutex_t;

#define WEFT_MUTEX_INIT           { 0, 0, 0, WEFT_MUTEX_PLAIN, 0 }
#define WEFT_MUTEX_RECURSIVE_INIT { 0, 0, 0, WEFT_MUTEX_RECURSIVE, 0 }

/* weft_mutex_init() sets up m of the given kind. Returns 0 or EINVAL. */
int weft_mutex_init(weft_mutex_t *m, int kind);
/* weft_mutex_destroy() returns 0, or EBUSY (m unchanged) if m is held or a
 * thread is inside weft_mutex_lock() on it (asleep, or woken and not yet
 * back). */
int weft_mutex_destroy(weft_mutex_t *m);
/* weft_mutex_lock() acquires m, spinning briefly then blocking. Returns 0, or
 * EDEADLK if the caller holds a plain m, EAGAIN if recursion would overflow. */
int weft_mutex_lock(weft_mutex_t *m);
/* weft_mutex_trylock() acquires m if free. Returns 0, or EBUSY if m is held
 * (by the caller too, as pthread_mutex_trylock: a plain m the caller holds is
 * EBUSY, a recursive one counts one more level, or EAGAIN on overflow). */
int weft_mutex_trylock(weft_mutex_t *m);
/* weft_mutex_timedlock() is weft_mutex_lock() with a deadline: ETIMEDOUT, EINVAL, ENOMEM. */
int weft_mutex_timedlock(weft_mutex_t *m, uint64_t deadline_ns);
/* weft_mutex_unlock() releases m (one level of a recursive m) and wakes one
 * waiter. Returns 0, or EPERM if the caller does not hold m. */
int weft_mutex_unlock(weft_mutex_t *m);

/* ---- condition variable -------------------------------------------------- */

typedef struct weft_cond {
    uint32_t seq;                /* atomic: bumped by every signal and broadcast */
    uint32_t waiters;            /* atomic: threads between releasing the mutex and
                                    leaving the wait; destroy waits them out */
} weft_cond_t;

#define WEFT_COND_INIT { 0, 0 }

/* weft_cond_init() sets up c. Returns 0. */
int weft_cond_init(weft_cond_t *c);
/* weft_cond_destroy() returns 0, or EBUSY if a thread sleeps on c; it waits
 * (briefly) for threads a broadcast woke to leave, so c may be freed after. */
int weft_cond_destroy(weft_cond_t *c);
/* weft_cond_wait() atomically releases m and waits for a signal, then
 * reacquires m (also on timeout). Returns 0, or EPERM (nothing done) if the
 * caller does not hold m or holds a recursive m more than once. A wake-up is never lost; a spurious one is possible
 * (rarely: a signal racing with the wait), so loop on your predicate. A
 * recursive m must be held exactly once. */
int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m);
/* weft_cond_timedwait() is weft_cond_wait() with a deadline: ETIMEDOUT, EINVAL,
 * ENOMEM (m is held again whatever it returns). */
int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, uint64_t deadline_ns);
/* weft_cond_signal() wakes the longest waiter, if any. Returns 0. */
int weft_cond_signal(weft_cond_t *c);
/* weft_cond_broadcast() wakes every waiter. Returns 0. */
int weft_cond_broadcast(weft_cond_t *c);

/* ---- counting semaphore -------------------------------------------------- */

#define WEFT_SEM_VALUE_MAX 0x7fffffff

typedef struct weft_sem {
    uint64_t state;              /* atomic: units available (low 32 bits), waiters (high 32) */
} weft_sem_t;

#define WEFT_SEM_INIT(v) { (uint64_t)(uint32_t)(v) }

/* weft_sem_init() sets s to value. Returns 0, or EINVAL if value is negative
 * or above WEFT_SEM_VALUE_MAX. */
int weft_sem_init(weft_sem_t *s, int value);
/* weft_sem_destroy() returns 0, or EBUSY if anyone waits on s. */
int weft_sem_destroy(weft_sem_t *s);
/* weft_sem_wait() takes one unit, blocking while there is none. Returns 0. */
int weft_sem_wait(weft_sem_t *s);
/* weft_sem_trywait() takes one unit if there is one. Returns 0 or EAGAIN. */
int weft_sem_trywait(weft_sem_t *s);
/* weft_sem_timedwait() is weft_sem_wait() with a deadline: ETIMEDOUT, EINVAL, ENOMEM. */
int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline_ns);
/* weft_sem_post() adds one unit and wakes the longest waiter, if any.
 * Returns 0, or EOVERFLOW (s unchanged) at WEFT_SEM_VALUE_MAX.
 * Async-signal-safe (see weft_futex_wake and <weft/weft.h>). */
int weft_sem_post(weft_sem_t *s);
/* weft_sem_value() returns the units available now (never negative). */
int weft_sem_value(weft_sem_t *s);

/* ---- barrier ---------------------------------------------------------------- */

#define WEFT_BARRIER_SERIAL (-1)

typedef struct weft_barrier {
    uint32_t count;              /* threads per phase; fixed at init */
    uint32_t arrived;            /* atomic: arrived in this phase */
    uint32_t phase;              /* atomic: bumped by the last to arrive */
    uint32_t inside;             /* atomic: threads in weft_barrier_wait(); destroy
                                    waits for those on their way out */
} weft_barrier_t;

/* weft_barrier_init() sets up b for count threads. Returns 0, or EINVAL if
 * count is 0. */
int weft_barrier_init(weft_barrier_t *b, unsigned count);
/* weft_barrier_destroy() returns 0, or EBUSY if a phase is under way; it
 * waits (briefly) for released threads to leave, so b may be freed after. */
int weft_barrier_destroy(weft_barrier_t *b);
/* weft_barrier_wait() blocks until count threads have called it in this
 * phase. Returns WEFT_BARRIER_SERIAL to exactly one of them (the last to
 * arrive), 0 to the others. */
int weft_barrier_wait(weft_barrier_t *b);

/* ---- rwlock ----------------------------------------------------------------- */

/* Phase-fair: once a writer waits, new readers queue behind it; a writer's
 * unlock admits all queued readers before the next writer. Neither side
 * starves. */
typedef struct weft_rwlock {
    uint32_t readers;            /* readers holding; guarded by rq.lock */
    uint32_t writer;             /* 1 if a writer holds; guarded by rq.lock */
    void *wowner;                /* writer's token; guarded by rq.lock */
    struct weft__waitq rq;       /* queued readers; its lock guards everything */
    struct weft__waitq wq;       /* queued writers; guarded by rq.lock (wq.lock unused) */
} weft_rwlock_t;

#define WEFT_RWLOCK_INIT { 0, 0, 0, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }

/* weft_rwlock_init() sets up l. Returns 0. */
int weft_rwlock_init(weft_rwlock_t *l);
/* weft_rwlock_destroy() returns 0, or EBUSY if l is held or waited on. */
int weft_rwlock_destroy(weft_rwlock_t *l);
/* weft_rwlock_rdlock() takes l shared. Returns 0, or EDEADLK if the caller holds it for writing. */
int weft_rwlock_rdlock(weft_rwlock_t *l);
/* weft_rwlock_wrlock() takes l exclusive. Returns 0, or EDEADLK if the caller holds it for writing. */
int weft_rwlock_wrlock(weft_rwlock_t *l);
/* weft_rwlock_tryrdlock() / trywrlock(): as above without blocking; EBUSY. */
int weft_rwlock_tryrdlock(weft_rwlock_t *l);
int weft_rwlock_trywrlock(weft_rwlock_t *l);
/* weft_rwlock_timedrdlock() / timedwrlock(): with a deadline; ETIMEDOUT, EINVAL, ENOMEM. */
int weft_rwlock_timedrdlock(weft_rwlock_t *l, uint64_t deadline_ns);
int weft_rwlock_timedwrlock(weft_rwlock_t *l, uint64_t deadline_ns);
/* weft_rwlock_unlock() releases the caller's hold. Returns 0, or EPERM if l
 * is not held (or held for writing by someone else). */
int weft_rwlock_unlock(weft_rwlock_t *l);

/* ---- once ------------------------------------------------------------------ */

typedef uint32_t weft_once_t;    /* atomic: 0 new, 1 running, 2 done, 3 running + waiters */
#define WEFT_ONCE_INIT 0

/* weft_once() runs fn exactly once per o; concurrent callers wait until it
 * has returned. Returns 0, or EINVAL if fn is NULL. fn must not call
 * weft_once() on the same o. */
int weft_once(weft_once_t *o, void (*fn)(void));

/* ---- futex ----------------------------------------------------------------- */

/* weft_futex_wait() blocks while *addr == val until woken by weft_futex_wake()
 * on addr or the deadline passes. Returns 0 (woken), EAGAIN (*addr != val on
 * entry), ETIMEDOUT, EINVAL (addr NULL or misaligned, bad deadline), or ENOMEM
 * (a deadline, and no memory for its timer). */
int weft_futex_wait(uint32_t *addr, uint32_t val, uint64_t deadline_ns);
/* weft_futex_wake() wakes up to n waiters on addr, oldest first, and returns
 * how many it woke (0 if n <= 0). Async-signal-safe: from vcore context (an
 * alarm or event callback) or a signal handler that interrupted weft, the
 * wake-up is left to the vcore's next scheduling decision and 0 returned. */
int weft_futex_wake(uint32_t *addr, int n);

/* ---- wait group ------------------------------------------------------------ */

typedef struct weft_wg {
    uint64_t state;              /* atomic: outstanding work (high 32 bits) and the
                                  * generation, bumped each time it reaches 0 (low
                                  * 32 bits, the futex word waiters sleep on) */
} weft_wg_t;

#define WEFT_WG_INIT { 0 }

/* weft_wg_add() adds delta (may be negative) to the count, waking the waiters
 * when it reaches 0. Returns 0, or EINVAL (count unchanged) if it would go
 * negative or overflow INT32_MAX. The step that brings the count to 0 is the
 * last write to *wg: a waiter it releases may free the wait group at once. */
int weft_wg_add(weft_wg_t *wg, int delta);
/* weft_wg_done() is weft_wg_add(wg, -1). */
int weft_wg_done(weft_wg_t *wg);
/* weft_wg_wait() returns once the count is 0, or has been 0 since the call
 * began (an add right after the last done does not keep it waiting).
 * Returns 0. */
int weft_wg_wait(weft_wg_t *wg);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_SYNC_H */
