/*
 * barrier.c — weft_barrier_t: an arrival counter and a phase word. The last
 * to arrive resets the counter, bumps the phase and wakes every sleeper by
 * address; a sleeper returns as soon as it is woken (or finds the phase
 * moved) without reading the barrier again, so the barrier may be destroyed
 * or reused as soon as weft_barrier_wait() returns anywhere.
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
    return 0;
}

int weft_barrier_destroy(weft_barrier_t *b)
{
    return atomic_load(WEFT__AT(&b->arrived)) ? EBUSY : 0;
}

int weft_barrier_wait(weft_barrier_t *b)
{
    uint32_t *phase = &b->phase;
    uint32_t ph = atomic_load_explicit(WEFT__AT(phase), memory_order_acquire);
    if (atomic_fetch_add_explicit(WEFT__AT(&b->arrived), 1, memory_order_acq_rel) + 1 == b->count) {
        atomic_store_explicit(WEFT__AT(&b->arrived), 0, memory_order_relaxed);
        atomic_fetch_add_explicit(WEFT__AT(phase), 1, memory_order_release);
        weft_futex_wake(phase, INT_MAX);
        return WEFT_BARRIER_SERIAL;
    }
    /* Woken (0) or the phase already moved (EAGAIN): either way we are through. */
    weft_futex_wait(phase, ph, WEFT_FOREVER);
    return 0;
}
