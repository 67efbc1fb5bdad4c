/*
 * spin.c — the spinlock's slow path, the public spinlock and the futex
 * wrappers (spin.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

void weft__spin_lock_slow(uint32_t *l)
{
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(WEFT__AT(l), memory_order_relaxed) == 0 &&
            !atomic_exchange_explicit(WEFT__AT(l), 1, memory_order_acquire))
            return;
        if (i < 1000)
            weft__cpu_relax();
        else
            weft__sys.sched_yield(); /* the holder's kernel thread may be descheduled */
    }
}

/* The public spinlock: weft's own, with notifications held off while a
 * uthread holds it (see <weft/sched.h>). No delivery at unlock: a scheduler
 * op called from a uthread may hold it, and must not be switched away from. */
void weft_spin_lock(weft_spinlock_t *l)
{
    struct weft__vcore *vc = weft__vc_at_entry();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (ut) {
        ut->notif_depth++;
        atomic_signal_fence(memory_order_seq_cst); /* the handler reads the depth */
    }
    weft__spin_lock(&l->v);
}

void weft_spin_unlock(weft_spinlock_t *l)
{
    weft__spin_unlock(&l->v);
    struct weft__vcore *vc = weft__vc_at_entry();
    struct weft_uthread *ut = vc ? vc->current : NULL;
    if (ut) {
        atomic_signal_fence(memory_order_seq_cst);
        ut->notif_depth--;
    }
}

/* The futex wrappers leave errno as they found it: weft's sync calls promise
 * not to touch it, also on outside kernel threads. */
int weft__futex_wait(uint32_t *addr, uint32_t val, uint64_t deadline_ns)
{
    struct timespec ts, *tp = NULL;
    if (deadline_ns != UINT64_MAX) {
        ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
        ts.tv_nsec = (long)(deadline_ns % 1000000000u);
        tp = &ts;
    }
    int saved = errno;
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
    weft__san_blocking_begin();
    long r = syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, tp, NULL,
                     FUTEX_BITSET_MATCH_ANY);
    int e = r == 0 ? 0 : errno;
    weft__san_blocking_end();
    errno = saved;
    return e == ETIMEDOUT || e == EAGAIN || e == EINTR ? e : 0;
}

void weft__futex_wake(uint32_t *addr, int n)
{
    int saved = errno;
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;
}
