/*
 * pt.h — the pthread layer's private state (libweft-pthread; the public
 * contract is <weft/pthread.h>).
 *
 * pthread_t of a uthread is its weft_t. Its layer state, struct pt, hangs
 * off struct weft_uthread's `pthread` field (guarded by the uthread's jlock)
 * and off a weft key of the layer's own, whose destructor runs when the
 * uthread finishes. A pthread_t that is not a uthread is a kernel thread's
 * (main's, or one the C library made): those calls go to the C library.
 */
#ifndef WEFT_PT_H
#define WEFT_PT_H

#define WEFT_PTHREAD_NO_MACROS
#include <weft/pthread.h>

#include "../internal.h"

struct pt {
    /* fixed at create */
    void *(*fn)(void *);
    void *arg;
    bool lazy;                       /* made on first use by a uthread pthread_create did not
                                        make: freed by the key destructor */
    /* guarded by the uthread's jlock */
    bool detached;                   /* freed by the thread's destructor, not by a join */
    bool exited;                     /* the key destructor has run */
    /* requests from other threads */
    _Atomic int cancel_pending;      /* pthread_cancel */
    _Atomic uint64_t sigpending;     /* pthread_kill: bit sig-1 */
    uint32_t wake;                   /* futex word: 1 = a request for a sleeping owner */
    weft_cond_t *_Atomic waiting_cond; /* a cond the owner waits on; set and cleared by
                                        the owner, PT_POKING while a request bumps it
                                        (sync.c, cancel.c) */
    /* owner only */
    bool cancel_disabled;
    bool unwinding;                  /* exit or cancellation runs the cleanup handlers */
    void *exit_value;
    void *cleanup;                   /* top handler node (see cancel.c) */
    uint64_t mask;                   /* blocked signals, bit sig-1 */
};

/* waiting_cond while another thread bumps it: the owner waits for that to
 * end before it clears the word (and may let the cond go). */
#define PT_POKING ((weft_cond_t *)1)

/* weft__pt_asked(st): a signal or a cancellation waits for st's owner. */
static inline bool weft__pt_asked(struct pt *st)
{
    return (atomic_load_explicit(&st->sigpending, memory_order_relaxed) & ~st->mask) ||
           (atomic_load_explicit(&st->cancel_pending, memory_order_relaxed) && !st->cancel_disabled);
}

/* weft__pt_self(): the calling uthread's state (made on first use), or NULL
 * outside a uthread or without memory. */
struct pt *weft__pt_self(void);
/* weft__pt_is_uthread(t): t names a uthread (or a uthread's memory). */
bool weft__pt_is_uthread(pthread_t t);
/* weft__pt_requests(st): act on what other threads asked of the caller: runs
 * pending signals' handlers, and if cancellation is pending and enabled
 * unwinds (never returns then). A cancellation point. */
void weft__pt_requests(struct pt *st);
/* weft__pt_signals(st): only the pending signals' handlers (what the mask lets
 * through). */
void weft__pt_signals(struct pt *st);
/* weft__pt_unwind(st): run the cleanup handlers, then end the uthread with
 * st->exit_value. */
_Noreturn void weft__pt_unwind(struct pt *st);
/* weft__pt_sleep_until(deadline): sleep, woken early by a request (0), or until
 * deadline (ETIMEDOUT). */
int weft__pt_sleep_until(uint64_t deadline);
/* weft__pt_deadline(clock, abstime, &d): an absolute time on clock as a
 * CLOCK_MONOTONIC deadline; 0 or EINVAL. */
int weft__pt_deadline(clockid_t clock, const struct timespec *abstime, uint64_t *d);

/* The C library's own calls, for kernel threads (resolved with RTLD_NEXT). */
struct weft__pt_real {
    pthread_t (*pthread_self)(void);
    int (*pthread_kill)(pthread_t, int);
    int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
    int (*pthread_join)(pthread_t, void **);
    int (*pthread_detach)(pthread_t);
    int (*sched_yield)(void);
    void (*pthread_exit)(void *) __attribute__((noreturn));
    int (*pthread_getattr_np)(pthread_t, pthread_attr_t *);
    int (*pthread_setname_np)(pthread_t, const char *);
    int (*pthread_getname_np)(pthread_t, char *, size_t);
    int (*pthread_setschedparam)(pthread_t, int, const struct sched_param *);
    int (*pthread_getschedparam)(pthread_t, int *, struct sched_param *);
    int (*pthread_getcpuclockid)(pthread_t, clockid_t *);
    int (*pthread_setaffinity_np)(pthread_t, size_t, const cpu_set_t *);
    int (*pthread_getaffinity_np)(pthread_t, size_t, cpu_set_t *);
    int (*pthread_tryjoin_np)(pthread_t, void **);
    int (*pthread_timedjoin_np)(pthread_t, void **, const struct timespec *);
};
extern struct weft__pt_real weft__pt_real;

/* PT_ALIAS(name, target): in the interposing build, the C library's name
 * is another name of weft's function. */
#ifdef WEFT_PTHREAD_INTERPOSE
#define PT_ALIAS(name, target) \
    extern __typeof__(target) name __attribute__((alias(#target), visibility("default")));
#else
#define PT_ALIAS(name, target)
#endif

#endif
