/*
 * sync.c — the pthread layer's synchronisation objects, laid over the
 * C library's types so that static initialisers work:
 *
 *   pthread_mutex_t    a weft_mutex_t at offset 0 (its kind where glibc's
 *                      is: PTHREAD_MUTEX_INITIALIZER and the recursive and
 *                      error-checking initialisers make valid weft mutexes)
 *   pthread_cond_t     a weft_cond_t, then the clock of timed waits
 *                      (0 = CLOCK_REALTIME, what the all-zero initialiser says)
 *   pthread_rwlock_t   a pointer to a weft_rwlock_t, made on first use
 *                      (weft's phase-fair rwlock is larger than glibc's)
 *   pthread_barrier_t  a weft_barrier_t
 *   pthread_spinlock_t the lock word
 *   sem_t              a weft_sem_t
 *
 * Process-shared objects, robust and priority-protocol mutexes are refused
 * with ENOTSUP: weft's wait queues live in the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pt.h"

/* ---- mutex attributes: type (bits 0-3), pshared (4), protocol (5-6), robust (7),
 * prioceiling (8-15) ------------------------------------------------------------- */

#define MA(a) (*(int *)(void *)(a))
#define CMA(a) (*(const int *)(const void *)(a))

int weft_pthread_mutexattr_init(pthread_mutexattr_t *a)
{
    /* the priority ceiling is stored only; its default lies in SCHED_FIFO's range */
    MA(a) = PTHREAD_MUTEX_DEFAULT | (sched_get_priority_min(SCHED_FIFO) & 0xff) << 8;
    return 0;
}
int weft_pthread_mutexattr_destroy(pthread_mutexattr_t *a) { (void)a; return 0; }
int weft_pthread_mutexattr_settype(pthread_mutexattr_t *a, int type)
{
    if (type != PTHREAD_MUTEX_NORMAL && type != PTHREAD_MUTEX_RECURSIVE &&
        type != PTHREAD_MUTEX_ERRORCHECK && type != PTHREAD_MUTEX_ADAPTIVE_NP)
        return EINVAL;
    MA(a) = (MA(a) & ~0xf) | type;
    return 0;
}
int weft_pthread_mutexattr_gettype(const pthread_mutexattr_t *a, int *type) { *type = CMA(a) & 0xf; return 0; }
int weft_pthread_mutexattr_setpshared(pthread_mutexattr_t *a, int p)
{
    if (p != PTHREAD_PROCESS_PRIVATE && p != PTHREAD_PROCESS_SHARED)
        return EINVAL;
    MA(a) = (MA(a) & ~0x10) | (p == PTHREAD_PROCESS_SHARED ? 0x10 : 0);
    return 0;
}
int weft_pthread_mutexattr_getpshared(const pthread_mutexattr_t *a, int *p)
{
    *p = CMA(a) & 0x10 ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE;
    return 0;
}
int weft_pthread_mutexattr_setprotocol(pthread_mutexattr_t *a, int p)
{
    if (p != PTHREAD_PRIO_NONE && p != PTHREAD_PRIO_INHERIT && p != PTHREAD_PRIO_PROTECT)
        return EINVAL;
    MA(a) = (MA(a) & ~0x60) | (p << 5);
    return 0;
}
int weft_pthread_mutexattr_getprotocol(const pthread_mutexattr_t *a, int *p) { *p = (CMA(a) >> 5) & 3; return 0; }
int weft_pthread_mutexattr_setprioceiling(pthread_mutexattr_t *a, int c)
{
    if (c < 0 || c > 255)
        return EINVAL;
    MA(a) = (MA(a) & ~0xff00) | (c << 8);
    return 0;
}
int weft_pthread_mutexattr_getprioceiling(const pthread_mutexattr_t *a, int *c) { *c = (CMA(a) >> 8) & 0xff; return 0; }
int weft_pthread_mutexattr_setrobust(pthread_mutexattr_t *a, int r)
{
    if (r != PTHREAD_MUTEX_STALLED && r != PTHREAD_MUTEX_ROBUST)
        return EINVAL;
    MA(a) = (MA(a) & ~0x80) | (r == PTHREAD_MUTEX_ROBUST ? 0x80 : 0);
    return 0;
}
int weft_pthread_mutexattr_getrobust(const pthread_mutexattr_t *a, int *r)
{
    *r = CMA(a) & 0x80 ? PTHREAD_MUTEX_ROBUST : PTHREAD_MUTEX_STALLED;
    return 0;
}

/* ---- mutex ---------------------------------------------------------------------- */

#define WM(m) ((weft_mutex_t *)(void *)(m))
_Static_assert(sizeof(weft_mutex_t) <= sizeof(pthread_mutex_t), "pthread_mutex_t too small");
_Static_assert(offsetof(weft_mutex_t, kind) == offsetof(pthread_mutex_t, __data.__kind),
               "weft_mutex_t's kind is not where glibc keeps it");
_Static_assert(PTHREAD_MUTEX_RECURSIVE == WEFT_MUTEX_RECURSIVE, "recursive kinds differ");

int weft_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
    int at = a ? CMA(a) : 0;
    if (at & 0xf0)
        return ENOTSUP; /* process-shared, priority protocols, robust */
    memset(m, 0, sizeof *m);
    WM(m)->kind = (uint32_t)(at & 0xf);
    return 0;
}

int weft_pthread_mutex_destroy(pthread_mutex_t *m)
{
    return weft_mutex_destroy(WM(m));
}

/* normal_relock(): a PTHREAD_MUTEX_NORMAL relocked by its owner deadlocks
 * (POSIX), until the deadline if there is one. */
static int normal_relock(uint64_t deadline)
{
    if (deadline == WEFT_FOREVER)
        for (;;)
            weft__pt_sleep_until(WEFT_FOREVER >> 1);
    while (weft__pt_sleep_until(deadline) != ETIMEDOUT)
        ;
    return ETIMEDOUT;
}

int weft_pthread_mutex_lock(pthread_mutex_t *m)
{
    int r = weft_mutex_lock(WM(m));
    if (WEFT__UNLIKELY(r == EDEADLK) && WM(m)->kind == PTHREAD_MUTEX_NORMAL)
        return normal_relock(WEFT_FOREVER);
    return r;
}

int weft_pthread_mutex_trylock(pthread_mutex_t *m)
{
    return weft_mutex_trylock(WM(m));
}

int weft_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *abs)
{
    if (weft_mutex_trylock(WM(m)) == 0)
        return 0; /* POSIX: the deadline need not be valid if it is not needed */
    uint64_t d;
    int r = weft__pt_deadline(clock, abs, &d);
    if (r)
        return r;
    r = weft_mutex_timedlock(WM(m), d);
    if (r == EDEADLK && WM(m)->kind == PTHREAD_MUTEX_NORMAL)
        return normal_relock(d);
    return r;
}

int weft_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
    return weft_pthread_mutex_clocklock(m, CLOCK_REALTIME, abs);
}

int weft_pthread_mutex_unlock(pthread_mutex_t *m)
{
    return weft_mutex_unlock(WM(m));
}

int weft_pthread_mutex_consistent(pthread_mutex_t *m)
{
    (void)m;
    return EINVAL; /* no robust mutexes: never inconsistent */
}

int weft_pthread_mutex_getprioceiling(const pthread_mutex_t *m, int *c)
{
    (void)m;
    (void)c;
    return ENOTSUP;
}

int weft_pthread_mutex_setprioceiling(pthread_mutex_t *m, int c, int *old)
{
    (void)m;
    (void)c;
    (void)old;
    return ENOTSUP;
}

/* ---- condition variables: attr = pshared (bit 0) | clock << 1 --------------------- */

struct pcond {
    weft_cond_t c;
    uint32_t clock;                  /* clockid_t of timed waits; fixed at init */
};
#define PC(c) ((struct pcond *)(void *)(c))
_Static_assert(sizeof(struct pcond) <= sizeof(pthread_cond_t), "pthread_cond_t too small");

int weft_pthread_condattr_init(pthread_condattr_t *a) { MA(a) = CLOCK_REALTIME << 1; return 0; }
int weft_pthread_condattr_destroy(pthread_condattr_t *a) { (void)a; return 0; }
int weft_pthread_condattr_setclock(pthread_condattr_t *a, clockid_t clock)
{
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
        return EINVAL;
    MA(a) = (MA(a) & 1) | (int)(clock << 1);
    return 0;
}
int weft_pthread_condattr_getclock(const pthread_condattr_t *a, clockid_t *clock) { *clock = CMA(a) >> 1; return 0; }
int weft_pthread_condattr_setpshared(pthread_condattr_t *a, int p)
{
    if (p != PTHREAD_PROCESS_PRIVATE && p != PTHREAD_PROCESS_SHARED)
        return EINVAL;
    MA(a) = (MA(a) & ~1) | (p == PTHREAD_PROCESS_SHARED);
    return 0;
}
int weft_pthread_condattr_getpshared(const pthread_condattr_t *a, int *p)
{
    *p = CMA(a) & 1 ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE;
    return 0;
}

int weft_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
    int at = a ? CMA(a) : CLOCK_REALTIME << 1;
    if (at & 1)
        return ENOTSUP; /* process-shared */
    memset(c, 0, sizeof *c);
    PC(c)->clock = (uint32_t)(at >> 1);
    return 0;
}

int weft_pthread_cond_destroy(pthread_cond_t *c)
{
    return weft_cond_destroy(&PC(c)->c);
}

/* cond_wait(): weft_cond_timedwait's sequence protocol (src/sync/cond.c)
 * with cancellation: the waiter publishes the condition it waits on
 * (pt->waiting_cond, a seq_cst store) before it looks at its requests, and a
 * request (set first, seq_cst) bumps that sequence, so a cancellation either
 * is seen or ends the sleep. The mutex is held again before a cancellation
 * acts, as POSIX asks. */
/* unpublish_wait(): the owner leaves its wait: once no request is
 * bumping the cond (PT_POKING, held for a few instructions by a thread
 * that holds our jlock), clear the word. */
static void unpublish_wait(struct pt *st)
{
    weft_cond_t *c = atomic_load_explicit(&st->waiting_cond, memory_order_seq_cst);
    while (c == PT_POKING || !atomic_compare_exchange_weak_explicit(&st->waiting_cond, &c, NULL, memory_order_seq_cst, memory_order_seq_cst)) {
        if (c == PT_POKING) {
            weft__cpu_relax();
            c = atomic_load_explicit(&st->waiting_cond, memory_order_seq_cst);
        }
    }
}

static int cond_wait(struct pcond *pc, pthread_mutex_t *pm, uint64_t deadline)
{
    weft_cond_t *c = &pc->c;
    weft_mutex_t *m = WM(pm);
    if (atomic_load_explicit(WEFT__ATOMIC(void *, &m->owner), memory_order_relaxed) != weft__self_token() || m->depth != 1)
        return EPERM;
    struct pt *st = weft__pt_self();
    uint32_t seq = atomic_load_explicit(WEFT__AT(&c->seq), memory_order_relaxed);
    atomic_fetch_add_explicit(WEFT__AT(&c->waiters), 1, memory_order_relaxed);
    if (st) {
        atomic_store_explicit(&st->waiting_cond, c, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst); /* pairs with the requester's: set, then poke */
    }
    int r = 0;
    bool asked = st && weft__pt_asked(st);
    weft_mutex_unlock(m);
    if (!asked)
        r = weft_futex_wait(&c->seq, seq, deadline);
    if (st)
        unpublish_wait(st);
    atomic_fetch_sub_explicit(WEFT__AT(&c->waiters), 1, memory_order_release); /* last touch of c */
    asked = st && weft__pt_asked(st);
    if (WEFT__UNLIKELY(asked))
        weft__pt_signals(st); /* handlers first: they must not need m */
    weft_mutex_lock(m);
    if (WEFT__UNLIKELY(asked))
        weft__pt_requests(st); /* may not return: cancelled, holding m */
    return r == ETIMEDOUT || r == ENOMEM ? ETIMEDOUT : 0;
}

int weft_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    return cond_wait(PC(c), m, WEFT_FOREVER);
}

int weft_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
                                const struct timespec *abs)
{
    uint64_t d;
    int r = weft__pt_deadline(clock, abs, &d);
    return r ? r : cond_wait(PC(c), m, d);
}

int weft_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abs)
{
    return weft_pthread_cond_clockwait(c, m, (clockid_t)PC(c)->clock, abs);
}

int weft_pthread_cond_signal(pthread_cond_t *c) { return weft_cond_signal(&PC(c)->c); }
int weft_pthread_cond_broadcast(pthread_cond_t *c) { return weft_cond_broadcast(&PC(c)->c); }

/* ---- rwlock ------------------------------------------------------------------------ */

int weft_pthread_rwlockattr_init(pthread_rwlockattr_t *a) { memset(a, 0, sizeof *a); return 0; }
int weft_pthread_rwlockattr_destroy(pthread_rwlockattr_t *a) { (void)a; return 0; }
int weft_pthread_rwlockattr_setpshared(pthread_rwlockattr_t *a, int p)
{
    if (p != PTHREAD_PROCESS_PRIVATE && p != PTHREAD_PROCESS_SHARED)
        return EINVAL;
    MA(a) = p == PTHREAD_PROCESS_SHARED;
    return 0;
}
int weft_pthread_rwlockattr_getpshared(const pthread_rwlockattr_t *a, int *p)
{
    *p = CMA(a) ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE;
    return 0;
}

#define RWP(l) ((weft_rwlock_t *_Atomic *)(void *)(l))

/* rw(): l's weft rwlock, made on first use (a static initialiser is zeros). */
static weft_rwlock_t *rw(pthread_rwlock_t *l)
{
    weft_rwlock_t *w = atomic_load_explicit(RWP(l), memory_order_acquire);
    if (WEFT__LIKELY(w != NULL))
        return w;
    weft_rwlock_t *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    weft_rwlock_init(n);
    if (atomic_compare_exchange_strong_explicit(RWP(l), &w, n, memory_order_acq_rel, memory_order_acquire))
        return n;
    free(n); /* another thread made it first: w is theirs */
    return w;
}

int weft_pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *a)
{
    if (a && CMA(a))
        return ENOTSUP; /* process-shared */
    memset(l, 0, sizeof *l);
    return rw(l) ? 0 : ENOMEM;
}

int weft_pthread_rwlock_destroy(pthread_rwlock_t *l)
{
    weft_rwlock_t *w = atomic_load_explicit(RWP(l), memory_order_acquire);
    if (!w)
        return 0;
    int r = weft_rwlock_destroy(w);
    if (r)
        return r;
    atomic_store_explicit(RWP(l), NULL, memory_order_relaxed);
    free(w);
    return 0;
}

#define RW_CALL(call)                \
    do {                             \
        weft_rwlock_t *w_ = rw(l);   \
        if (!w_)                     \
            return ENOMEM;           \
        return call;                 \
    } while (0)

int weft_pthread_rwlock_rdlock(pthread_rwlock_t *l) { RW_CALL(weft_rwlock_rdlock(w_)); }
int weft_pthread_rwlock_wrlock(pthread_rwlock_t *l) { RW_CALL(weft_rwlock_wrlock(w_)); }
int weft_pthread_rwlock_tryrdlock(pthread_rwlock_t *l) { RW_CALL(weft_rwlock_tryrdlock(w_)); }
int weft_pthread_rwlock_trywrlock(pthread_rwlock_t *l) { RW_CALL(weft_rwlock_trywrlock(w_)); }
int weft_pthread_rwlock_unlock(pthread_rwlock_t *l) { RW_CALL(weft_rwlock_unlock(w_)); }

int weft_pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
    weft_rwlock_t *w = rw(l);
    if (!w)
        return ENOMEM;
    if (weft_rwlock_tryrdlock(w) == 0)
        return 0;
    uint64_t d;
    int r = weft__pt_deadline(clock, abs, &d);
    return r ? r : weft_rwlock_timedrdlock(w, d);
}

int weft_pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clock, const struct timespec *abs)
{
    weft_rwlock_t *w = rw(l);
    if (!w)
        return ENOMEM;
    if (weft_rwlock_trywrlock(w) == 0)
        return 0;
    uint64_t d;
    int r = weft__pt_deadline(clock, abs, &d);
    return r ? r : weft_rwlock_timedwrlock(w, d);
}

int weft_pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abs)
{
    return weft_pthread_rwlock_clockrdlock(l, CLOCK_REALTIME, abs);
}

int weft_pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abs)
{
    return weft_pthread_rwlock_clockwrlock(l, CLOCK_REALTIME, abs);
}

/* ---- barrier ------------------------------------------------------------------------ */

#define WB(b) ((weft_barrier_t *)(void *)(b))
_Static_assert(sizeof(weft_barrier_t) <= sizeof(pthread_barrier_t), "pthread_barrier_t too small");
_Static_assert(PTHREAD_BARRIER_SERIAL_THREAD == WEFT_BARRIER_SERIAL, "serial values differ");

int weft_pthread_barrierattr_init(pthread_barrierattr_t *a) { MA(a) = 0; return 0; }
int weft_pthread_barrierattr_destroy(pthread_barrierattr_t *a) { (void)a; return 0; }
int weft_pthread_barrierattr_setpshared(pthread_barrierattr_t *a, int p)
{
    if (p != PTHREAD_PROCESS_PRIVATE && p != PTHREAD_PROCESS_SHARED)
        return EINVAL;
    MA(a) = p == PTHREAD_PROCESS_SHARED;
    return 0;
}
int weft_pthread_barrierattr_getpshared(const pthread_barrierattr_t *a, int *p)
{
    *p = CMA(a) ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE;
    return 0;
}
int weft_pthread_barrier_init(pthread_barrier_t *b, const pthread_barrierattr_t *a, unsigned count)
{
    if (a && CMA(a))
        return ENOTSUP;
    if (count == 0 || count > INT_MAX)
        return EINVAL;
    return weft_barrier_init(WB(b), count);
}
int weft_pthread_barrier_destroy(pthread_barrier_t *b) { return weft_barrier_destroy(WB(b)); }
int weft_pthread_barrier_wait(pthread_barrier_t *b) { return weft_barrier_wait(WB(b)); }

/* ---- spinlock: a word; contended, spin a little, then yield -------------------------- */

#define SPIN(s) ((_Atomic int *)(void *)(s))

int weft_pthread_spin_init(pthread_spinlock_t *s, int pshared)
{
    (void)pshared; /* a plain word in shared memory works across processes too */
    atomic_store_explicit(SPIN(s), 0, memory_order_relaxed);
    return 0;
}
int weft_pthread_spin_destroy(pthread_spinlock_t *s) { (void)s; return 0; }
int weft_pthread_spin_trylock(pthread_spinlock_t *s)
{
    int z = 0;
    return atomic_compare_exchange_strong_explicit(SPIN(s), &z, 1, memory_order_acquire,
                                                   memory_order_relaxed) ? 0 : EBUSY;
}
int weft_pthread_spin_lock(pthread_spinlock_t *s)
{
    for (unsigned i = 0; weft_pthread_spin_trylock(s) != 0; i++) {
        if (i < 100)
            weft__cpu_relax();
        else
            weft_sched_yield(); /* the holder may wait for this vcore (spin, then yield) */
    }
    return 0;
}
int weft_pthread_spin_unlock(pthread_spinlock_t *s)
{
    atomic_store_explicit(SPIN(s), 0, memory_order_release);
    return 0;
}

/* ---- unnamed semaphores ------------------------------------------------------------------ */

#define WS(s) ((weft_sem_t *)(void *)(s))
_Static_assert(sizeof(weft_sem_t) <= sizeof(sem_t), "sem_t too small");

static int sem_ret(int r)
{
    if (!r)
        return 0;
    errno = r;
    return -1;
}

int weft_psem_init(sem_t *s, int pshared, unsigned value)
{
    if (pshared)
        return sem_ret(ENOTSUP);
    if (value > (unsigned)SEM_VALUE_MAX || value > WEFT_SEM_VALUE_MAX)
        return sem_ret(EINVAL);
    return sem_ret(weft_sem_init(WS(s), (int)value));
}
int weft_psem_destroy(sem_t *s) { return sem_ret(weft_sem_destroy(WS(s))); }
int weft_psem_trywait(sem_t *s) { return sem_ret(weft_sem_trywait(WS(s))); }
int weft_psem_post(sem_t *s) { return sem_ret(weft_sem_post(WS(s))); }
int weft_psem_getvalue(sem_t *s, int *v) { *v = weft_sem_value(WS(s)); return 0; }

int weft_psem_wait(sem_t *s)
{
    struct pt *st = weft__pt_self();
    if (st)
        weft__pt_requests(st); /* a cancellation point */
    return sem_ret(weft_sem_wait(WS(s)));
}

int weft_psem_clockwait(sem_t *s, clockid_t clock, const struct timespec *abs)
{
    struct pt *st = weft__pt_self();
    if (st)
        weft__pt_requests(st);
    if (weft_sem_trywait(WS(s)) == 0)
        return 0;
    uint64_t d;
    int r = weft__pt_deadline(clock, abs, &d);
    return sem_ret(r ? r : weft_sem_timedwait(WS(s), d));
}

int weft_psem_timedwait(sem_t *s, const struct timespec *abs)
{
    return weft_psem_clockwait(s, CLOCK_REALTIME, abs);
}

sem_t *weft_psem_open(const char *name, int oflag, ...)
{
    (void)name;
    (void)oflag;
    errno = ENOTSUP; /* named semaphores are shared between processes */
    return SEM_FAILED;
}

/* ---- the C library's names (libweft-pthread.so interposes them) ---- */

PT_ALIAS(pthread_mutexattr_init, weft_pthread_mutexattr_init)
PT_ALIAS(pthread_mutexattr_destroy, weft_pthread_mutexattr_destroy)
PT_ALIAS(pthread_mutexattr_settype, weft_pthread_mutexattr_settype)
PT_ALIAS(pthread_mutexattr_gettype, weft_pthread_mutexattr_gettype)
PT_ALIAS(pthread_mutexattr_setpshared, weft_pthread_mutexattr_setpshared)
PT_ALIAS(pthread_mutexattr_getpshared, weft_pthread_mutexattr_getpshared)
PT_ALIAS(pthread_mutexattr_setprotocol, weft_pthread_mutexattr_setprotocol)
PT_ALIAS(pthread_mutexattr_getprotocol, weft_pthread_mutexattr_getprotocol)
PT_ALIAS(pthread_mutexattr_setprioceiling, weft_pthread_mutexattr_setprioceiling)
PT_ALIAS(pthread_mutexattr_getprioceiling, weft_pthread_mutexattr_getprioceiling)
PT_ALIAS(pthread_mutexattr_setrobust, weft_pthread_mutexattr_setrobust)
PT_ALIAS(pthread_mutexattr_getrobust, weft_pthread_mutexattr_getrobust)
PT_ALIAS(pthread_mutex_init, weft_pthread_mutex_init)
PT_ALIAS(pthread_mutex_destroy, weft_pthread_mutex_destroy)
PT_ALIAS(pthread_mutex_lock, weft_pthread_mutex_lock)
PT_ALIAS(pthread_mutex_trylock, weft_pthread_mutex_trylock)
PT_ALIAS(pthread_mutex_timedlock, weft_pthread_mutex_timedlock)
PT_ALIAS(pthread_mutex_clocklock, weft_pthread_mutex_clocklock)
PT_ALIAS(pthread_mutex_unlock, weft_pthread_mutex_unlock)
PT_ALIAS(pthread_mutex_consistent, weft_pthread_mutex_consistent)
PT_ALIAS(pthread_mutex_getprioceiling, weft_pthread_mutex_getprioceiling)
PT_ALIAS(pthread_mutex_setprioceiling, weft_pthread_mutex_setprioceiling)
PT_ALIAS(pthread_condattr_init, weft_pthread_condattr_init)
PT_ALIAS(pthread_condattr_destroy, weft_pthread_condattr_destroy)
PT_ALIAS(pthread_condattr_setclock, weft_pthread_condattr_setclock)
PT_ALIAS(pthread_condattr_getclock, weft_pthread_condattr_getclock)
PT_ALIAS(pthread_condattr_setpshared, weft_pthread_condattr_setpshared)
PT_ALIAS(pthread_condattr_getpshared, weft_pthread_condattr_getpshared)
PT_ALIAS(pthread_cond_init, weft_pthread_cond_init)
PT_ALIAS(pthread_cond_destroy, weft_pthread_cond_destroy)
PT_ALIAS(pthread_cond_wait, weft_pthread_cond_wait)
PT_ALIAS(pthread_cond_timedwait, weft_pthread_cond_timedwait)
PT_ALIAS(pthread_cond_clockwait, weft_pthread_cond_clockwait)
PT_ALIAS(pthread_cond_signal, weft_pthread_cond_signal)
PT_ALIAS(pthread_cond_broadcast, weft_pthread_cond_broadcast)
PT_ALIAS(pthread_rwlockattr_init, weft_pthread_rwlockattr_init)
PT_ALIAS(pthread_rwlockattr_destroy, weft_pthread_rwlockattr_destroy)
PT_ALIAS(pthread_rwlockattr_setpshared, weft_pthread_rwlockattr_setpshared)
PT_ALIAS(pthread_rwlockattr_getpshared, weft_pthread_rwlockattr_getpshared)
PT_ALIAS(pthread_rwlock_init, weft_pthread_rwlock_init)
PT_ALIAS(pthread_rwlock_destroy, weft_pthread_rwlock_destroy)
PT_ALIAS(pthread_rwlock_rdlock, weft_pthread_rwlock_rdlock)
PT_ALIAS(pthread_rwlock_wrlock, weft_pthread_rwlock_wrlock)
PT_ALIAS(pthread_rwlock_tryrdlock, weft_pthread_rwlock_tryrdlock)
PT_ALIAS(pthread_rwlock_trywrlock, weft_pthread_rwlock_trywrlock)
PT_ALIAS(pthread_rwlock_timedrdlock, weft_pthread_rwlock_timedrdlock)
PT_ALIAS(pthread_rwlock_timedwrlock, weft_pthread_rwlock_timedwrlock)
PT_ALIAS(pthread_rwlock_clockrdlock, weft_pthread_rwlock_clockrdlock)
PT_ALIAS(pthread_rwlock_clockwrlock, weft_pthread_rwlock_clockwrlock)
PT_ALIAS(pthread_rwlock_unlock, weft_pthread_rwlock_unlock)
PT_ALIAS(pthread_barrierattr_init, weft_pthread_barrierattr_init)
PT_ALIAS(pthread_barrierattr_destroy, weft_pthread_barrierattr_destroy)
PT_ALIAS(pthread_barrierattr_setpshared, weft_pthread_barrierattr_setpshared)
PT_ALIAS(pthread_barrierattr_getpshared, weft_pthread_barrierattr_getpshared)
PT_ALIAS(pthread_barrier_init, weft_pthread_barrier_init)
PT_ALIAS(pthread_barrier_destroy, weft_pthread_barrier_destroy)
PT_ALIAS(pthread_barrier_wait, weft_pthread_barrier_wait)
PT_ALIAS(pthread_spin_init, weft_pthread_spin_init)
PT_ALIAS(pthread_spin_destroy, weft_pthread_spin_destroy)
PT_ALIAS(pthread_spin_lock, weft_pthread_spin_lock)
PT_ALIAS(pthread_spin_trylock, weft_pthread_spin_trylock)
PT_ALIAS(pthread_spin_unlock, weft_pthread_spin_unlock)
PT_ALIAS(sem_init, weft_psem_init)
PT_ALIAS(sem_destroy, weft_psem_destroy)
PT_ALIAS(sem_wait, weft_psem_wait)
PT_ALIAS(sem_trywait, weft_psem_trywait)
PT_ALIAS(sem_timedwait, weft_psem_timedwait)
PT_ALIAS(sem_clockwait, weft_psem_clockwait)
PT_ALIAS(sem_post, weft_psem_post)
PT_ALIAS(sem_getvalue, weft_psem_getvalue)
PT_ALIAS(sem_open, weft_psem_open)
