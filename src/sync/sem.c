/*
 * sem.c — weft_sem_t, a counting semaphore in one 64-bit word: the units
 * (low 32 bits, also the futex word sleepers wait on) and the sleepers
 * (high 32 bits). A post adds a unit and learns whether anyone sleeps in the
 * same atomic step, then wakes one sleeper by address: it never touches the
 * semaphore after the unit is visible, so the thread it wakes may destroy it.
 * A sleeper registers, then takes a unit and deregisters in one CAS.
 */
#include <errno.h>

#include "internal.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sem.c sleeps on the low half of a 64-bit word: little-endian only"
#endif

#define STATE(s)   ((_Atomic uint64_t *)(void *)&(s)->state)
#define UNITS(v)   ((uint32_t)(v))
#define SLEEPERS(v) ((uint32_t)((v) >> 32))
#define ONE_SLEEPER (1ull << 32)

int weft_sem_init(weft_sem_t *s, int value)
{
    if (value < 0)
        return EINVAL;
    *s = (weft_sem_t)WEFT_SEM_INIT(value);
    return 0;
}

int weft_sem_destroy(weft_sem_t *s)
{
    return SLEEPERS(atomic_load_explicit(STATE(s), memory_order_seq_cst)) ? EBUSY : 0;
}

/* take() takes a unit if there is one; dereg also drops our sleeper count. */
static bool take(weft_sem_t *s, uint64_t dereg)
{
    uint64_t v = atomic_load_explicit(STATE(s), memory_order_relaxed);
    while (UNITS(v) > 0)
        if (atomic_compare_exchange_weak_explicit(STATE(s), &v, v - 1 - dereg,
                                                  memory_order_acquire, memory_order_relaxed))
            return true;
    return false;
}

int weft_sem_trywait(weft_sem_t *s)
{
    return take(s, 0) ? 0 : EAGAIN;
}

int weft_sem_timedwait(weft_sem_t *s, uint64_t deadline_ns)
{
    if (weft__deadline_check(deadline_ns))
        return EINVAL;
    if (take(s, 0))
        return 0;
    if (WEFT__UNLIKELY(weft__refused_here()))
        return EDEADLK; /* a signal handler that interrupted weft */
    atomic_fetch_add_explicit(STATE(s), ONE_SLEEPER, memory_order_relaxed);
    for (;;) {
        if (take(s, ONE_SLEEPER))
            return 0;
        int w = weft__futex_wait_checked((uint32_t *)(void *)&s->state, 0, deadline_ns);
        if (w != ETIMEDOUT && w != ENOMEM) /* ENOMEM: no timer for the deadline */
            continue;
        /* Out of time: leave, unless a unit came meanwhile (then take it,
         * so a post that woke us is not stranded). */
        uint64_t v = atomic_load_explicit(STATE(s), memory_order_relaxed);
        for (;;) {
            uint64_t next = UNITS(v) ? v - 1 - ONE_SLEEPER : v - ONE_SLEEPER;
            if (atomic_compare_exchange_weak_explicit(STATE(s), &v, next, memory_order_acquire,
                                                      memory_order_relaxed))
                return UNITS(v) ? 0 : w;
        }
    }
}

int weft_sem_wait(weft_sem_t *s)
{
    return weft_sem_timedwait(s, WEFT_FOREVER);
}

int weft_sem_post(weft_sem_t *s)
{
    uint32_t *word = (uint32_t *)(void *)&s->state;
    uint64_t v = atomic_load_explicit(STATE(s), memory_order_relaxed);
    do {
        if (UNITS(v) >= WEFT_SEM_VALUE_MAX)
            return EOVERFLOW;
    } while (!atomic_compare_exchange_weak_explicit(STATE(s), &v, v + 1, memory_order_release,
                                                    memory_order_relaxed));
    if (SLEEPERS(v))
        weft_futex_wake(word, 1); /* by address: s itself may be gone already */
    return 0;
}

int weft_sem_value(weft_sem_t *s)
{
    return (int)UNITS(atomic_load_explicit(STATE(s), memory_order_relaxed));
}
