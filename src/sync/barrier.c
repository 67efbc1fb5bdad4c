/*
 * barrier.c — weft_barrier_t: an arrival counter and a phase word. The last
 * to arrive resets the counter, bumps the phase and wakes every sleeper by
 * address. Wakes go by address, so a sleeper of the next phase may be woken
 * too: a sleeper leaves only once the phase it arrived in is over. Every
 * caller counts itself in `inside` until its last touch of the barrier, and
 * weft_barrier_destroy() waits for that count, so the barrier may be freed
 * as soon as destroy returns 0.
 */
#include <errno.h>
#include <limits.h>

#include "internal.h"

int weft_barrier_init(weft_barrier_t *b, unsigned count)
{
    if (count == 0)
        return EINVAL;
    b->count = count;
    b->arrived = 0;
    b->phase = 0;
    b->inside = 0;
    return 0;
}

int weft_barrier_destroy(weft_barrier_t *b)
{
    if (atomic_load_explicit(WEFT__AT(&b->arrived), memory_order_seq_cst))
        return EBUSY;
    while (atomic_load_explicit(WEFT__AT(&b->inside), memory_order_acquire)) {
        if (atomic_load_explicit(WEFT__AT(&b->arrived), memory_order_seq_cst))
            return EBUSY; /* someone arrived meanwhile: a phase is under way */
        weft_yield(); /* released threads on their way out: a few instructions each */
    }
    return 0;
}

int weft_barrier_wait(weft_barrier_t *b)
{
    int r = 0;
    atomic_fetch_add_explicit(WEFT__AT(&b->inside), 1, memory_order_relaxed);
    uint32_t ph = atomic_load_explicit(WEFT__AT(&b->phase), memory_order_acquire);
    if (atomic_fetch_add_explicit(WEFT__AT(&b->arrived), 1, memory_order_acq_rel) + 1 == b->count) {
        atomic_store_explicit(WEFT__AT(&b->arrived), 0, memory_order_relaxed);
        atomic_fetch_add_explicit(WEFT__AT(&b->phase), 1, memory_order_release);
        weft_futex_wake(&b->phase, INT_MAX);
        r = WEFT_BARRIER_SERIAL;
    } else {
        while (atomic_load_explicit(WEFT__AT(&b->phase), memory_order_acquire) == ph)
            weft_futex_wait(&b->phase, ph, WEFT_FOREVER);
    }
    atomic_fetch_sub_explicit(WEFT__AT(&b->inside), 1, memory_order_release); /* last touch */
    if (r == WEFT_BARRIER_SERIAL)
        weft__resched_point();
    return r;
}
