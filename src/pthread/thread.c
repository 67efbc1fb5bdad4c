/*
 * thread.c — the pthread layer's threads: create, join, detach, exit, self,
 * attributes, scheduling stubs, keys, signals between uthreads.
 *
 * Lifetime of struct pt (pt.h): pthread_create allocates it and hangs it
 * on the new uthread (under its jlock) before anyone can join; the thread
 * also sets the layer's key to it, whose destructor (run as the uthread
 * finishes, with the other keys) marks it exited. A joinable thread's pt
 * is freed by pthread_join after the uthread is gone; a detached one's by
 * whichever comes second of the destructor and the detach.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pt.h"

struct weft__pt_real weft__pt_real;
#ifdef WEFT_PTHREAD_INTERPOSE
/* Tells libweft (src/sys.c) to call the C library's own thread functions. */
const int weft_pthread_interposes = 1;
#endif
static weft_key_t pt_key;
static weft_once_t pt_once = WEFT_ONCE_INIT;
static _Atomic int concurrency;

static void pt_key_dtor(void *v);

static void pt_init(void)
{
    if (weft_key_create(&pt_key, pt_key_dtor) != 0)
        weft__panic("the pthread layer cannot make its key");
}

#ifdef WEFT_PTHREAD_INTERPOSE
#define REAL(f) weft__pt_real.f = (__typeof__(weft__pt_real.f))dlsym(RTLD_NEXT, #f)
#else
#define REAL(f) weft__pt_real.f = f
#endif
__attribute__((constructor)) static void pt_resolve(void)
{
    REAL(pthread_self);
    REAL(pthread_kill);
    REAL(pthread_sigmask);
    REAL(pthread_join);
    REAL(pthread_detach);
    REAL(sched_yield);
    REAL(pthread_exit);
    REAL(pthread_getattr_np);
    REAL(pthread_setname_np);
    REAL(pthread_getname_np);
    REAL(pthread_setschedparam);
    REAL(pthread_getschedparam);
    REAL(pthread_getcpuclockid);
    REAL(pthread_setaffinity_np);
    REAL(pthread_getaffinity_np);
    REAL(pthread_tryjoin_np);
    REAL(pthread_timedjoin_np);
    if (!weft__pt_real.pthread_self || !weft__pt_real.pthread_exit)
        weft__panic("libweft-pthread: cannot find the C library's pthread calls");
    /* Threads expect their own __thread variables: per-uthread TLS unless
     * WEFT_TLS or weft_config.tls says otherwise (or it is refused here). */
    weft__tls_default_uthread = true;
}
#undef REAL

/* ---- state ------------------------------------------------------------------------ */

bool weft__pt_is_uthread(pthread_t t)
{
    /* A uthread lies at the top of its own stack mapping (stack.c); a C
     * library thread's descriptor has no such self-consistent fields
     * where ours are (its thread control block: zeros and self pointers). */
    struct weft_uthread *u = (struct weft_uthread *)t;
    if (!u || ((uintptr_t)u & 7))
        return false;
    return u->map && u->map_size >= 16384 && u->map < (char *)u &&
           (char *)u < u->map + u->map_size && u->stack_lo >= u->map &&
           u->stack_lo + u->stack_size == (char *)u;
}

/* Not inlined (nor weft_pthread_join, pt_detach_state): they take
 * spinlocks, which count themselves in TLS, and callers reach them after a
 * switch (invariant 2: no TLS address computed before it may be reused). */
WEFT__NOINLINE struct pt *weft__pt_self(void)
{
    struct weft_uthread *ut = weft_self();
    if (!ut)
        return NULL;
    struct pt *st = atomic_load_explicit(WEFT__ATOMIC(void *, &ut->pthread), memory_order_acquire);
    if (WEFT__LIKELY(st != NULL))
        return st;
    /* A uthread made by weft_spawn, or one past its destructor. */
    weft_once(&pt_once, pt_init);
    if (!(st = calloc(1, sizeof *st)))
        return NULL;
    st->lazy = true;
    weft__spin_lock(&ut->jlock);
    atomic_store_explicit(WEFT__ATOMIC(void *, &ut->pthread), st, memory_order_release);
    weft__spin_unlock(&ut->jlock);
    weft_key_setspecific(pt_key, st);
    return st;
}

static void pt_key_dtor(void *v)
{
    struct pt *st = v;
    struct weft_uthread *ut = weft_self();
    weft__spin_lock(&ut->jlock);
    st->exited = true;
    bool free_it = st->lazy || st->detached;
    if (free_it)
        atomic_store_explicit(WEFT__ATOMIC(void *, &ut->pthread), NULL, memory_order_release);
    weft__spin_unlock(&ut->jlock);
    if (free_it)
        free(st);
}

static void *pt_start(void *arg)
{
    struct pt *st = arg;
    struct weft_uthread *ut = weft_self();
    weft__spin_lock(&ut->jlock);
    atomic_store_explicit(WEFT__ATOMIC(void *, &ut->pthread), st, memory_order_release);
    weft__spin_unlock(&ut->jlock);
    weft_key_setspecific(pt_key, st);
    return st->fn(st->arg); /* returning runs no cleanup handler (POSIX) */
}

/* ---- attributes --------------------------------------------------------------------- */

struct pattr {
    uint32_t magic;
    int detach;
    size_t stacksize, guardsize;
    void *stackaddr;
    int scope, inherit, policy;
    struct sched_param param;
};
_Static_assert(sizeof(struct pattr) <= sizeof(pthread_attr_t), "pthread_attr_t too small");
#define ATTR_MAGIC 0x57415454u
#define PA(a) ((struct pattr *)(void *)(a))
#define CPA(a) ((const struct pattr *)(const void *)(a))

int weft_pthread_attr_init(pthread_attr_t *a)
{
    memset(a, 0, sizeof *a);
    *PA(a) = (struct pattr){ .magic = ATTR_MAGIC, .detach = PTHREAD_CREATE_JOINABLE,
                             .guardsize = 4096, .scope = PTHREAD_SCOPE_SYSTEM,
                             .inherit = PTHREAD_INHERIT_SCHED, .policy = SCHED_OTHER };
    return 0;
}

int weft_pthread_attr_destroy(pthread_attr_t *a)
{
    PA(a)->magic = 0;
    return 0;
}

int weft_pthread_attr_setdetachstate(pthread_attr_t *a, int s)
{
    if (s != PTHREAD_CREATE_JOINABLE && s != PTHREAD_CREATE_DETACHED)
        return EINVAL;
    PA(a)->detach = s;
    return 0;
}
int weft_pthread_attr_getdetachstate(const pthread_attr_t *a, int *s) { *s = CPA(a)->detach; return 0; }

int weft_pthread_attr_setstacksize(pthread_attr_t *a, size_t size)
{
    if (size < (size_t)PTHREAD_STACK_MIN || size > ((size_t)1 << 30))
        return EINVAL;
    PA(a)->stacksize = size;
    return 0;
}
int weft_pthread_attr_getstacksize(const pthread_attr_t *a, size_t *size)
{
    size_t dflt = weft__stack_default();
    *size = CPA(a)->stacksize ? CPA(a)->stacksize : dflt ? dflt : 256 * 1024;
    return 0;
}
int weft_pthread_attr_setstack(pthread_attr_t *a, void *addr, size_t size)
{
    if (size < (size_t)PTHREAD_STACK_MIN)
        return EINVAL;
    PA(a)->stackaddr = (char *)addr + size;
    PA(a)->stacksize = size;
    return 0;
}
int weft_pthread_attr_getstack(const pthread_attr_t *a, void **addr, size_t *size)
{
    *size = CPA(a)->stacksize;
    *addr = CPA(a)->stackaddr ? (char *)CPA(a)->stackaddr - CPA(a)->stacksize : NULL;
    return 0;
}
int weft_pthread_attr_setstackaddr(pthread_attr_t *a, void *addr) { PA(a)->stackaddr = addr; return 0; }
int weft_pthread_attr_getstackaddr(const pthread_attr_t *a, void **addr) { *addr = CPA(a)->stackaddr; return 0; }
int weft_pthread_attr_setguardsize(pthread_attr_t *a, size_t size) { PA(a)->guardsize = size; return 0; }
int weft_pthread_attr_getguardsize(const pthread_attr_t *a, size_t *size) { *size = CPA(a)->guardsize; return 0; }
int weft_pthread_attr_setscope(pthread_attr_t *a, int scope)
{
    if (scope == PTHREAD_SCOPE_PROCESS)
        return ENOTSUP; /* as glibc: every thread competes system-wide (its vcore does) */
    if (scope != PTHREAD_SCOPE_SYSTEM)
        return EINVAL;
    PA(a)->scope = scope;
    return 0;
}
int weft_pthread_attr_getscope(const pthread_attr_t *a, int *scope) { *scope = CPA(a)->scope; return 0; }
int weft_pthread_attr_setinheritsched(pthread_attr_t *a, int inherit)
{
    if (inherit != PTHREAD_INHERIT_SCHED && inherit != PTHREAD_EXPLICIT_SCHED)
        return EINVAL;
    PA(a)->inherit = inherit;
    return 0;
}
int weft_pthread_attr_getinheritsched(const pthread_attr_t *a, int *inherit) { *inherit = CPA(a)->inherit; return 0; }
int weft_pthread_attr_setschedpolicy(pthread_attr_t *a, int policy)
{
    if (policy != SCHED_OTHER && policy != SCHED_FIFO && policy != SCHED_RR && policy != SCHED_BATCH &&
        policy != SCHED_IDLE)
        return EINVAL;
    PA(a)->policy = policy; /* a real-time one is refused by pthread_create */
    return 0;
}
int weft_pthread_attr_getschedpolicy(const pthread_attr_t *a, int *policy) { *policy = CPA(a)->policy; return 0; }
int weft_pthread_attr_setschedparam(pthread_attr_t *a, const struct sched_param *p) { PA(a)->param = *p; return 0; }
int weft_pthread_attr_getschedparam(const pthread_attr_t *a, struct sched_param *p) { *p = CPA(a)->param; return 0; }

/* ---- create, join, detach, exit ------------------------------------------------------ */

/* pt_detach_state(t): st's detach bookkeeping (jlock); frees st if its
 * thread's destructor has run. */
static WEFT__NOINLINE void pt_detach_state(struct weft_uthread *t)
{
    weft__spin_lock(&t->jlock);
    struct pt *st = atomic_load_explicit(WEFT__ATOMIC(void *, &t->pthread), memory_order_acquire);
    bool free_it = st && st->exited && !st->lazy;
    if (st && !st->lazy)
        st->detached = true;
    if (free_it)
        atomic_store_explicit(WEFT__ATOMIC(void *, &t->pthread), NULL, memory_order_release);
    weft__spin_unlock(&t->jlock);
    if (free_it)
        free(st);
}

int weft_pthread_create(pthread_t *out, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    weft_once(&pt_once, pt_init);
    /* Always a stack of its own, whatever WEFT_STACK_COPY says: POSIX
     * threads may hand each other pointers into their stacks, which a
     * stack-copy uthread's stack does not keep while it waits (and
     * weft__pt_is_uthread knows a uthread by the stack it sits on). */
    weft_attr_t wa = { .flags = WEFT_STACK_OWN };
    bool detached = false;
    if (attr) {
        const struct pattr *a = CPA(attr);
        if (a->magic != ATTR_MAGIC)
            return EINVAL;
        if (a->stackaddr)
            return ENOTSUP; /* weft allocates every stack */
        if (a->inherit == PTHREAD_EXPLICIT_SCHED && (a->policy == SCHED_FIFO || a->policy == SCHED_RR))
            return ENOTSUP; /* real-time priorities */
        /* POSIX's stack size is a minimum: weft keeps the uthread and up to a
         * page of cache colouring at the top of the mapping (stack.c). */
        wa.stack_size = a->stacksize ? a->stacksize + 2 * 4096 : 0;
        detached = a->detach == PTHREAD_CREATE_DETACHED;
    }
    struct pt *st = calloc(1, sizeof *st);
    if (!st)
        return EAGAIN;
    st->fn = fn;
    st->arg = arg;
    struct pt *me = weft_self() ? weft__pt_self() : NULL;
    if (me) { /* the creator's signal mask, as POSIX says */
        st->mask = me->mask;
    } else {
        sigset_t cur;
        weft__pt_real.pthread_sigmask(SIG_BLOCK, NULL, &cur);
        for (int s = 1; s <= 64 && s < NSIG; s++)
            if (sigismember(&cur, s) == 1)
                st->mask |= (uint64_t)1 << (s - 1);
    }
    weft_t t;
    int r = weft_spawn(&t, &wa, pt_start, st);
    if (r) {
        free(st);
        return r == ENOMEM ? EAGAIN : r;
    }
    weft__spin_lock(&t->jlock);
    atomic_store_explicit(WEFT__ATOMIC(void *, &t->pthread), st, memory_order_release); /* pt_start sets the same */
    weft__spin_unlock(&t->jlock);
    *out = (pthread_t)t; /* before a detached thread can finish and be reused */
    if (detached) {
        pt_detach_state(t);
        weft_detach(t);
    }
    return 0;
}

WEFT__NOINLINE int weft_pthread_join(pthread_t th, void **result)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_join(th, result);
    struct weft_uthread *t = (struct weft_uthread *)th;
    struct pt *me = weft__pt_self();
    if (me)
        weft__pt_requests(me); /* a cancellation point */
    if (t == weft_self())
        return EDEADLK;
    if (atomic_load_explicit(&t->state, memory_order_relaxed) == WEFT__FREE)
        return ESRCH;
    weft__spin_lock(&t->jlock);
    struct pt *st = atomic_load_explicit(WEFT__ATOMIC(void *, &t->pthread), memory_order_acquire);
    weft__spin_unlock(&t->jlock);
    int r = weft_join(t, result);
    if (r == 0 && st && !st->lazy)
        free(st);
    return r;
}

int weft_pthread_detach(pthread_t th)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_detach(th);
    struct weft_uthread *t = (struct weft_uthread *)th;
    if (atomic_load_explicit(&t->state, memory_order_relaxed) == WEFT__FREE)
        return ESRCH;
    weft__spin_lock(&t->jlock);
    bool refused = t->jflags & (WEFT__J_DETACHED | WEFT__J_JOINING);
    weft__spin_unlock(&t->jlock);
    if (refused)
        return EINVAL;
    pt_detach_state(t);
    return weft_detach(t);
}

_Noreturn void weft_pthread_exit(void *result)
{
    struct pt *st = weft__pt_self();
    if (st) {
        st->exit_value = result;
        weft__pt_unwind(st);
    }
    if (weft_self())
        weft_exit(result); /* no memory for the state: no handlers either */
    if (getpid() == (pid_t)syscall(SYS_gettid)) {
        /* main, the last kernel thread the program made: the process lives
         * on while uthreads do, then ends as when the last thread exits. */
        weft_shutdown();
        exit(0);
    }
    weft__pt_real.pthread_exit(result);
}

pthread_t weft_pthread_self(void)
{
    weft_t t = weft_self();
    return t ? (pthread_t)t : weft__pt_real.pthread_self();
}

int weft_pthread_equal(pthread_t a, pthread_t b)
{
    return a == b;
}

int weft_pthread_once(pthread_once_t *o, void (*fn)(void))
{
    _Static_assert(sizeof(pthread_once_t) >= sizeof(weft_once_t), "pthread_once_t");
    return weft_once((weft_once_t *)(void *)o, fn);
}

int weft_sched_yield(void)
{
    struct pt *st = weft_self() ? weft__pt_self() : NULL;
    if (!st)
        return weft__pt_real.sched_yield();
    weft_yield();
    if (WEFT__UNLIKELY(atomic_load_explicit(&st->sigpending, memory_order_relaxed)))
        weft__pt_requests(st);
    return 0;
}

int weft_pthread_getattr_np(pthread_t th, pthread_attr_t *attr)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_getattr_np(th, attr);
    struct weft_uthread *t = (struct weft_uthread *)th;
    weft_pthread_attr_init(attr);
    struct pattr *a = PA(attr);
    a->stackaddr = t->stack_lo + t->stack_size; /* the top, as glibc stores it */
    a->stacksize = t->stack_size;
    a->guardsize = t->guarded ? (size_t)(t->stack_lo - t->map) : 0;
    a->detach = (t->jflags & WEFT__J_DETACHED) ? PTHREAD_CREATE_DETACHED : PTHREAD_CREATE_JOINABLE;
    return 0;
}

int weft_pthread_setname_np(pthread_t th, const char *name)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_setname_np(th, name);
    struct weft_uthread *t = (struct weft_uthread *)th;
    if (strlen(name) >= 16)
        return ERANGE; /* as Linux's limit */
    strcpy(t->name, name);
    return 0;
}

int weft_pthread_getname_np(pthread_t th, char *buf, size_t len)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_getname_np(th, buf, len);
    struct weft_uthread *t = (struct weft_uthread *)th;
    if (strlen(t->name) >= len)
        return ERANGE;
    strcpy(buf, t->name);
    return 0;
}

int weft_pthread_setschedparam(pthread_t th, int policy, const struct sched_param *p)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_setschedparam(th, policy, p);
    if (policy != SCHED_OTHER)
        return ENOTSUP; /* real-time policies */
    if (p->sched_priority != 0)
        return EINVAL;
    return 0;
}

int weft_pthread_getschedparam(pthread_t th, int *policy, struct sched_param *p)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_getschedparam(th, policy, p);
    *policy = SCHED_OTHER;
    p->sched_priority = 0;
    return 0;
}

int weft_pthread_setschedprio(pthread_t th, int prio)
{
    (void)th;
    return prio == 0 ? 0 : ENOTSUP;
}

int weft_pthread_setconcurrency(int level)
{
    if (level < 0)
        return EINVAL;
    atomic_store_explicit(&concurrency, level, memory_order_relaxed);
    return 0;
}

int weft_pthread_getconcurrency(void)
{
    return atomic_load_explicit(&concurrency, memory_order_relaxed);
}

/* The C library's calls that take a pthread_t and would read a uthread's
 * memory as its own thread descriptor: answered for uthreads here. */
int weft_pthread_getcpuclockid(pthread_t th, clockid_t *clock)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_getcpuclockid(th, clock);
    (void)clock;
    return ENOENT; /* a uthread's CPU time is not counted apart from its vcore's */
}

int weft_pthread_setaffinity_np(pthread_t th, size_t size, const cpu_set_t *set)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_setaffinity_np(th, size, set);
    (void)size;
    (void)set;
    return 0; /* accepted: the vcores are pinned, a uthread runs where the scheduler puts it */
}

int weft_pthread_getaffinity_np(pthread_t th, size_t size, cpu_set_t *set)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_getaffinity_np(th, size, set);
    return sched_getaffinity(0, size, set) == 0 ? 0 : errno; /* the process's CPUs */
}

int weft_pthread_tryjoin_np(pthread_t th, void **result)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_tryjoin_np(th, result);
    struct weft_uthread *t = (struct weft_uthread *)th;
    if (atomic_load_explicit(&t->state, memory_order_acquire) != WEFT__DONE)
        return EBUSY;
    return weft_pthread_join(th, result);
}

int weft_pthread_timedjoin_np(pthread_t th, void **result, const struct timespec *abs)
{
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_timedjoin_np(th, result, abs);
    uint64_t d;
    int r = weft__pt_deadline(CLOCK_REALTIME, abs, &d);
    if (r)
        return r;
    struct weft_uthread *t = (struct weft_uthread *)th;
    /* weft_join has no deadline: look every millisecond until it */
    while (atomic_load_explicit(&t->state, memory_order_acquire) != WEFT__DONE) {
        if (weft_now_ns() >= d)
            return ETIMEDOUT;
        weft__pt_sleep_until(weft_now_ns() + 1000000 < d ? weft_now_ns() + 1000000 : d);
    }
    return weft_pthread_join(th, result);
}

/* ---- keys ------------------------------------------------------------------------------ */

int weft_pthread_key_create(pthread_key_t *k, void (*destructor)(void *))
{
    weft_key_t wk;
    int r = weft_key_create(&wk, destructor);
    if (!r)
        *k = wk;
    return r;
}
int weft_pthread_key_delete(pthread_key_t k) { return weft_key_delete(k); }
void *weft_pthread_getspecific(pthread_key_t k) { return weft_key_getspecific(k); }
int weft_pthread_setspecific(pthread_key_t k, const void *v) { return weft_key_setspecific(k, v); }

/* ---- the C library's names (libweft-pthread.so interposes them) ---- */

PT_ALIAS(pthread_create, weft_pthread_create)
PT_ALIAS(pthread_join, weft_pthread_join)
PT_ALIAS(pthread_detach, weft_pthread_detach)
PT_ALIAS(pthread_exit, weft_pthread_exit)
PT_ALIAS(pthread_self, weft_pthread_self)
PT_ALIAS(pthread_equal, weft_pthread_equal)
PT_ALIAS(pthread_once, weft_pthread_once)
PT_ALIAS(sched_yield, weft_sched_yield)
PT_ALIAS(pthread_yield, weft_sched_yield)
PT_ALIAS(pthread_getattr_np, weft_pthread_getattr_np)
PT_ALIAS(pthread_setname_np, weft_pthread_setname_np)
PT_ALIAS(pthread_getname_np, weft_pthread_getname_np)
PT_ALIAS(pthread_setschedparam, weft_pthread_setschedparam)
PT_ALIAS(pthread_getschedparam, weft_pthread_getschedparam)
PT_ALIAS(pthread_setschedprio, weft_pthread_setschedprio)
PT_ALIAS(pthread_setconcurrency, weft_pthread_setconcurrency)
PT_ALIAS(pthread_getconcurrency, weft_pthread_getconcurrency)
PT_ALIAS(pthread_attr_init, weft_pthread_attr_init)
PT_ALIAS(pthread_attr_destroy, weft_pthread_attr_destroy)
PT_ALIAS(pthread_attr_setdetachstate, weft_pthread_attr_setdetachstate)
PT_ALIAS(pthread_attr_getdetachstate, weft_pthread_attr_getdetachstate)
PT_ALIAS(pthread_attr_setstacksize, weft_pthread_attr_setstacksize)
PT_ALIAS(pthread_attr_getstacksize, weft_pthread_attr_getstacksize)
PT_ALIAS(pthread_attr_setstack, weft_pthread_attr_setstack)
PT_ALIAS(pthread_attr_getstack, weft_pthread_attr_getstack)
PT_ALIAS(pthread_attr_setstackaddr, weft_pthread_attr_setstackaddr)
PT_ALIAS(pthread_attr_getstackaddr, weft_pthread_attr_getstackaddr)
PT_ALIAS(pthread_attr_setguardsize, weft_pthread_attr_setguardsize)
PT_ALIAS(pthread_attr_getguardsize, weft_pthread_attr_getguardsize)
PT_ALIAS(pthread_attr_setscope, weft_pthread_attr_setscope)
PT_ALIAS(pthread_attr_getscope, weft_pthread_attr_getscope)
PT_ALIAS(pthread_attr_setinheritsched, weft_pthread_attr_setinheritsched)
PT_ALIAS(pthread_attr_getinheritsched, weft_pthread_attr_getinheritsched)
PT_ALIAS(pthread_attr_setschedpolicy, weft_pthread_attr_setschedpolicy)
PT_ALIAS(pthread_attr_getschedpolicy, weft_pthread_attr_getschedpolicy)
PT_ALIAS(pthread_attr_setschedparam, weft_pthread_attr_setschedparam)
PT_ALIAS(pthread_attr_getschedparam, weft_pthread_attr_getschedparam)
PT_ALIAS(pthread_key_create, weft_pthread_key_create)
PT_ALIAS(pthread_key_delete, weft_pthread_key_delete)
PT_ALIAS(pthread_getspecific, weft_pthread_getspecific)
PT_ALIAS(pthread_setspecific, weft_pthread_setspecific)
PT_ALIAS(pthread_getcpuclockid, weft_pthread_getcpuclockid)
PT_ALIAS(pthread_setaffinity_np, weft_pthread_setaffinity_np)
PT_ALIAS(pthread_getaffinity_np, weft_pthread_getaffinity_np)
PT_ALIAS(pthread_tryjoin_np, weft_pthread_tryjoin_np)
PT_ALIAS(pthread_timedjoin_np, weft_pthread_timedjoin_np)
