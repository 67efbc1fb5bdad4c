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
    if (atomic_compare_exchange_strong(a, &s, ONCE_RUNNING)) {
        fn();
        if (atomic_exchange_explicit(a, ONCE_DONE, memory_order_acq_rel) == ONCE_WAITED)
            weft_futex_wake(o, INT_MAX);
        return 0;
    }
    for (;;) {
        if (s == ONCE_DONE)
            return 0;
        if (s == ONCE_RUNNING && !atomic_compare_exchange_strong(a, &s, ONCE_WAITED))
            continue; /* s reloaded */
        weft_futex_wait(o, ONCE_WAITED, WEFT_FOREVER);
        s = atomic_load_explicit(a, memory_order_acquire);
    }
}

int weft_wg_add(weft_wg_t *wg, int delta)
{
    _Atomic uint32_t *a = WEFT__AT(&wg->count);
    uint32_t old = atomic_load_explicit(a, memory_order_relaxed);
    int64_t next;
    do {
        next = (int64_t)old + delta;
        if (next < 0 || next > INT32_MAX)
            return EINVAL;
    } while (!atomic_compare_exchange_weak_explicit(a, &old, (uint32_t)next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (next == 0 && old != 0) {
        uint32_t *gen = &wg->gen;
        atomic_fetch_add_explicit(WEFT__AT(gen), 1, memory_order_release);
        weft_futex_wake(gen, INT_MAX);
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
    uint32_t g = atomic_load_explicit(WEFT__AT(&wg->gen), memory_order_acquire);
    if (atomic_load_explicit(WEFT__AT(&wg->count), memory_order_acquire) == 0)
        return 0;
    while (atomic_load_explicit(WEFT__AT(&wg->gen), memory_order_acquire) == g)
        weft_futex_wait(&wg->gen, g, WEFT_FOREVER);
    return 0;
}
