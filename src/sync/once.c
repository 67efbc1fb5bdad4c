/*
 * once.c — weft_once() and the wait group, both built on weft_futex.
 */
#include <errno.h>
#include <limits.h>

#include "internal.h"

enum { ONCE_NEW = 0, ONCE_RUNNING = 1, ONCE_DONE = 2, ONCE_WAITED = 3 };

int weft_once(weft_once_t *o, void (*fn)(void))
{
    if (!fn || !o)
        return EINVAL;
    _Atomic uint32_t *a = WEFT__AT(o);
    uint32_t s = atomic_load_explicit(a, memory_order_acquire);
    if (WEFT__LIKELY(s == ONCE_DONE))
        return 0;
    s = ONCE_NEW;
    if (atomic_compare_exchange_strong_explicit(a, &s, ONCE_RUNNING, memory_order_seq_cst, memory_order_seq_cst)) {
        fn();
        if (atomic_exchange_explicit(a, ONCE_DONE, memory_order_acq_rel) == ONCE_WAITED)
            weft_futex_wake(o, INT_MAX);
        return 0;
    }
    for (;;) {
        if (s == ONCE_DONE)
            return 0;
        if (s == ONCE_RUNNING && !atomic_compare_exchange_strong_explicit(a, &s, ONCE_WAITED, memory_order_seq_cst, memory_order_seq_cst))
            continue; /* s reloaded */
        weft_futex_wait(o, ONCE_WAITED, WEFT_FOREVER);
        s = atomic_load_explicit(a, memory_order_acquire);
    }
}

/* The wait group is one 64-bit word, the count above the generation, so the
 * step that brings the count to 0 also bumps the generation: after it the
 * waker touches only the futex bucket of the address (weft_futex_wake reads
 * nothing at it), and a released waiter may free the wait group. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "once.c sleeps on the low half of the wait group's word: little-endian only"
#endif
#define WG_STATE(wg) ((_Atomic uint64_t *)(void *)&(wg)->state)
#define WG_GEN_WORD(wg) ((uint32_t *)(void *)&(wg)->state)
#define WG_COUNT(v) ((uint32_t)((v) >> 32))
#define WG_GEN(v) ((uint32_t)(v))

int weft_wg_add(weft_wg_t *wg, int delta)
{
    uint64_t old = atomic_load_explicit(WG_STATE(wg), memory_order_relaxed), next;
    int64_t count;
    do {
        count = (int64_t)WG_COUNT(old) + delta;
        if (count < 0 || count > INT32_MAX)
            return EINVAL;
        next = (uint64_t)count << 32 | WG_GEN(old);
        if (count == 0 && WG_COUNT(old) != 0)
            next = WG_GEN(old) + 1u; /* count 0, next generation (wraps in 32 bits) */
    } while (!atomic_compare_exchange_weak_explicit(WG_STATE(wg), &old, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (count == 0 && WG_COUNT(old) != 0) {
        weft_futex_wake(WG_GEN_WORD(wg), INT_MAX); /* by address only */
        weft__resched_point();
    }
    return 0;
}

int weft_wg_done(weft_wg_t *wg)
{
    return weft_wg_add(wg, -1);
}

/* Sleep on the generation, not the count: a zero that an add undoes before
 * we run again still ends the wait. */
int weft_wg_wait(weft_wg_t *wg)
{
    uint64_t v = atomic_load_explicit(WG_STATE(wg), memory_order_acquire);
    if (WG_COUNT(v) == 0)
        return 0;
    uint32_t g = WG_GEN(v);
    for (;;) {
        weft_futex_wait(WG_GEN_WORD(wg), g, WEFT_FOREVER);
        v = atomic_load_explicit(WG_STATE(wg), memory_order_acquire);
        if (WG_GEN(v) != g)
            return 0;
    }
}
