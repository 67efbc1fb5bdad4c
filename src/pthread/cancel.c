/*
 * cancel.c — cleanup handlers, deferred cancellation, exit, and signals sent
 * to uthreads with pthread_kill.
 *
 * Cleanup handlers form one chain per thread (struct pt's `cleanup`, newest
 * first) of two kinds of node: those of <weft/pthread.h>'s macros (struct
 * weft_pthread_cleanup, whose handler the unwinder calls), and those of the
 * C library's own macros in code compiled without weft's header (glibc's
 * __pthread_register_cancel with a __pthread_unwind_buf_t, whose frame the
 * unwinder longjmps back into: the macro runs the handler there and calls
 * __pthread_unwind_next, which carries on). A node's first word links to
 * the one below, its second says its kind.
 *
 * Requests from other threads (a cancellation, a signal) set a flag on the
 * target's state and then poke it: its wake word, and the condition
 * variable it may be waiting on (a broadcast-like bump: spurious wake-ups
 * are allowed). The target looks at its flags at its cancellation points,
 * after it has published where it waits, so a request is never missed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pt.h"

static char kind_weft; /* node kinds: their addresses */
#ifdef WEFT_PTHREAD_INTERPOSE
static char kind_glibc;
#endif

struct node {
    struct node *prev;
    void *kind;
};

void weft_pthread_cleanup_push_(struct weft_pthread_cleanup *c)
{
    struct pt *st = weft__pt_self();
    c->kind = &kind_weft;
    if (!st) { /* a kernel thread: no cancellation, the pop runs it if asked */
        c->prev = NULL;
        return;
    }
    c->prev = st->cleanup;
    st->cleanup = c;
}

void weft_pthread_cleanup_pop_(struct weft_pthread_cleanup *c, int execute)
{
    struct pt *st = weft__pt_self();
    if (st && st->cleanup == c)
        st->cleanup = c->prev;
    if (execute)
        c->fn(c->arg);
}

/* ---- unwinding ---------------------------------------------------------------------- */

_Noreturn void weft__pt_unwind(struct pt *st)
{
    st->unwinding = true;
    st->cancel_disabled = true;
    while (st->cleanup) {
        struct node *n = st->cleanup;
        st->cleanup = n->prev;
        if (n->kind == &kind_weft) {
            struct weft_pthread_cleanup *c = (struct weft_pthread_cleanup *)(void *)n;
            c->fn(c->arg);
        } else {
#ifdef WEFT_PTHREAD_INTERPOSE
            /* the node is __pad[0] of glibc's __pthread_unwind_buf_t */
            __pthread_unwind_buf_t *b =
                WEFT__CONTAINER(n, __pthread_unwind_buf_t, __pad);
            /* glibc's cancel buffer is a jmp_buf without the saved signal
             * mask, which longjmp reads only when __mask_was_saved is set
             * (never here): the size warning does not apply. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
            longjmp((struct __jmp_buf_tag *)(void *)b->__cancel_jmp_buf, 1);
#pragma GCC diagnostic pop
#else
            weft__panic("a C library cleanup handler without the interposing layer");
#endif
        }
    }
    weft_exit(st->exit_value); /* the key destructors run there */
}

#ifdef WEFT_PTHREAD_INTERPOSE
/* The C library's cleanup ABI (pthread_cleanup_push/pop of <pthread.h>). */
void __pthread_register_cancel(__pthread_unwind_buf_t *b);
void __pthread_unregister_cancel(__pthread_unwind_buf_t *b);
_Noreturn void __pthread_unwind_next(__pthread_unwind_buf_t *b);

void __pthread_register_cancel(__pthread_unwind_buf_t *b)
{
    struct pt *st = weft__pt_self();
    struct node *n = (struct node *)(void *)b->__pad;
    n->kind = &kind_glibc;
    n->prev = st ? st->cleanup : NULL;
    if (st)
        st->cleanup = n;
}

void __pthread_unregister_cancel(__pthread_unwind_buf_t *b)
{
    struct pt *st = weft__pt_self();
    struct node *n = (struct node *)(void *)b->__pad;
    if (st && st->cleanup == n)
        st->cleanup = n->prev;
}

_Noreturn void __pthread_unwind_next(__pthread_unwind_buf_t *b)
{
    (void)b; /* already unlinked: carry on with the rest */
    struct pt *st = weft__pt_self();
    if (!st)
        abort();
    weft__pt_unwind(st);
}
#endif

/* ---- cancellation ------------------------------------------------------------------- */

/* poke(t): wake t where it may sleep for a request (t's jlock held, so its
 * state stays). */
static void poke(struct pt *st)
{
    atomic_store_explicit(WEFT__AT(&st->wake), 1, memory_order_seq_cst);
    weft_futex_wake(&st->wake, 1);
    /* Claim the cond the owner waits on (PT_POKING keeps it from leaving
     * the wait, so the cond stays alive), bump it, give it back. */
    weft_cond_t *c = atomic_load_explicit(&st->waiting_cond, memory_order_seq_cst);
    while (c && c != PT_POKING && !atomic_compare_exchange_weak_explicit(&st->waiting_cond, &c, PT_POKING, memory_order_seq_cst, memory_order_seq_cst))
        ;
    if (c && c != PT_POKING) {
        atomic_fetch_add_explicit(WEFT__AT(&c->seq), 1, memory_order_seq_cst);
        weft_futex_wake(&c->seq, INT32_MAX);
        atomic_store_explicit(&st->waiting_cond, c, memory_order_seq_cst);
    }
}

int weft_pthread_cancel(pthread_t th)
{
    if (!weft__pt_is_uthread(th))
        return ESRCH; /* only uthreads are cancellable */
    struct weft_uthread *t = (struct weft_uthread *)th;
    if (atomic_load_explicit(&t->state, memory_order_relaxed) == WEFT__FREE)
        return ESRCH;
    weft__spin_lock(&t->jlock);
    struct pt *st = atomic_load_explicit(WEFT__ATOMIC(void *, &t->pthread), memory_order_acquire);
    if (st && !st->exited) {
        atomic_store_explicit(&st->cancel_pending, 1, memory_order_seq_cst);
        poke(st);
    }
    weft__spin_unlock(&t->jlock);
    return 0;
}

int weft_pthread_setcancelstate(int state, int *old)
{
    if (state != PTHREAD_CANCEL_ENABLE && state != PTHREAD_CANCEL_DISABLE)
        return EINVAL;
    struct pt *st = weft__pt_self();
    if (!st) {
        if (old)
            *old = PTHREAD_CANCEL_ENABLE;
        return 0;
    }
    if (old)
        *old = st->cancel_disabled ? PTHREAD_CANCEL_DISABLE : PTHREAD_CANCEL_ENABLE;
    if (!st->unwinding)
        st->cancel_disabled = state == PTHREAD_CANCEL_DISABLE;
    return 0;
}

int weft_pthread_setcanceltype(int type, int *old)
{
    if (type == PTHREAD_CANCEL_ASYNCHRONOUS)
        return ENOTSUP; /* deferred cancellation only */
    if (type != PTHREAD_CANCEL_DEFERRED)
        return EINVAL;
    if (old)
        *old = PTHREAD_CANCEL_DEFERRED;
    return 0;
}

void weft_pthread_testcancel(void)
{
    struct pt *st = weft__pt_self();
    if (st)
        weft__pt_requests(st);
}

/* ---- signals ------------------------------------------------------------------------ */

#define BIT(sig) ((uint64_t)1 << ((sig) - 1))

/* run_handler(): sig's disposition on the calling uthread. */
static void run_handler(struct pt *st, int sig)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) != 0 || sa.sa_handler == SIG_IGN)
        return;
    if (sa.sa_handler == SIG_DFL) {
        if (sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT)
            return; /* ignored by default */
        raise(sig); /* the default action concerns the process: terminate, stop */
        return;
    }
    uint64_t saved = st->mask;
    for (int s = 1; s <= 64 && s < NSIG; s++)
        if (sigismember(&sa.sa_mask, s) == 1)
            st->mask |= BIT(s);
    if (!(sa.sa_flags & SA_NODEFER))
        st->mask |= BIT(sig);
    if (sa.sa_flags & SA_SIGINFO) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        si.si_signo = sig;
        si.si_code = SI_TKILL;
        si.si_pid = getpid();
        si.si_uid = getuid();
        sa.sa_sigaction(sig, &si, NULL);
    } else {
        sa.sa_handler(sig);
    }
    st->mask = saved;
}

void weft__pt_signals(struct pt *st)
{
    uint64_t p;
    while ((p = atomic_load_explicit(&st->sigpending, memory_order_acquire) & ~st->mask) != 0) {
        int sig = __builtin_ctzll(p) + 1;
        atomic_fetch_and_explicit(&st->sigpending, ~BIT(sig), memory_order_seq_cst);
        run_handler(st, sig);
    }
}

void weft__pt_requests(struct pt *st)
{
    weft__pt_signals(st);
    if (WEFT__UNLIKELY(atomic_load_explicit(&st->cancel_pending, memory_order_seq_cst)) && !st->cancel_disabled) {
        st->exit_value = PTHREAD_CANCELED;
        weft__pt_unwind(st);
    }
}

int weft_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    struct pt *st = weft_self() ? weft__pt_self() : NULL;
    if (!st)
        return weft__pt_real.pthread_sigmask(how, set, old);
    if (set && how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
        return EINVAL;
    if (old) {
        sigemptyset(old);
        for (int s = 1; s <= 64 && s < NSIG; s++)
            if (st->mask & BIT(s))
                sigaddset(old, s);
    }
    if (set) {
        uint64_t m = 0;
        for (int s = 1; s <= 64 && s < NSIG; s++)
            if (sigismember(set, s) == 1)
                m |= BIT(s);
        m &= ~(BIT(SIGKILL) | BIT(SIGSTOP)); /* cannot be blocked */
        st->mask = how == SIG_BLOCK ? st->mask | m : how == SIG_UNBLOCK ? st->mask & ~m : m;
        weft__pt_requests(st); /* what the new mask lets through runs now */
    }
    return 0;
}

int weft_pthread_kill(pthread_t th, int sig)
{
    if (sig < 0 || sig >= NSIG || sig > 64)
        return EINVAL;
    if (!weft__pt_is_uthread(th))
        return weft__pt_real.pthread_kill(th, sig);
    struct weft_uthread *t = (struct weft_uthread *)th;
    int state = atomic_load_explicit(&t->state, memory_order_relaxed);
    if (state == WEFT__FREE)
        return ESRCH;
    if (sig == 0 || state == WEFT__DONE)
        return 0;
    if (t == weft_self()) { /* to itself: at once, as raise() would */
        struct pt *st = weft__pt_self();
        if (!st)
            return EAGAIN;
        atomic_fetch_or_explicit(&st->sigpending, BIT(sig), memory_order_seq_cst);
        weft__pt_requests(st);
        return 0;
    }
    weft__spin_lock(&t->jlock);
    struct pt *st = atomic_load_explicit(WEFT__ATOMIC(void *, &t->pthread), memory_order_acquire);
    if (st && !st->exited) {
        atomic_fetch_or_explicit(&st->sigpending, BIT(sig), memory_order_seq_cst);
        poke(st);
    }
    weft__spin_unlock(&t->jlock);
    return 0;
}

/* ---- sleeping ------------------------------------------------------------------------ */

int weft__pt_sleep_until(uint64_t deadline)
{
    struct pt *st = weft__pt_self();
    if (!st)
        return weft_sleep_until_ns(deadline) ? EINVAL : ETIMEDOUT;
    for (;;) {
        atomic_store_explicit(WEFT__AT(&st->wake), 0, memory_order_seq_cst);
        weft__pt_requests(st);
        if (atomic_load_explicit(&st->sigpending, memory_order_relaxed) & ~st->mask)
            continue;
        int r = weft_futex_wait(&st->wake, 0, deadline);
        if (r == ETIMEDOUT || r == EINVAL || r == ENOMEM)
            return ETIMEDOUT;
        if (atomic_load_explicit(WEFT__AT(&st->wake), memory_order_seq_cst)) {
            weft__pt_requests(st);
            return 0; /* a signal's handler ran: interrupted (EINTR) */
        }
    }
}

int weft__pt_deadline(clockid_t clock, const struct timespec *ts, uint64_t *d)
{
    if (!ts || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L)
        return EINVAL;
    if (clock != CLOCK_REALTIME && clock != CLOCK_MONOTONIC)
        return EINVAL;
    struct timespec now;
    clock_gettime(clock, &now);
    int64_t left_s = (int64_t)ts->tv_sec - (int64_t)now.tv_sec;
    int64_t left_ns = left_s * 1000000000 + (ts->tv_nsec - now.tv_nsec);
    if (left_s > INT64_MAX / 2000000000) {
        *d = WEFT_FOREVER;
        return 0;
    }
    uint64_t mono = weft_now_ns();
    *d = left_ns <= 0 ? mono : mono + (uint64_t)left_ns;
    return 0;
}

/* ---- the C library's names (libweft-pthread.so interposes them) ---- */

PT_ALIAS(pthread_cancel, weft_pthread_cancel)
PT_ALIAS(pthread_setcancelstate, weft_pthread_setcancelstate)
PT_ALIAS(pthread_setcanceltype, weft_pthread_setcanceltype)
PT_ALIAS(pthread_testcancel, weft_pthread_testcancel)
PT_ALIAS(pthread_sigmask, weft_pthread_sigmask)
PT_ALIAS(pthread_kill, weft_pthread_kill)
