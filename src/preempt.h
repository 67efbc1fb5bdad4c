/*
 * preempt.h — preempt.c's part of every vcore: its tick and retry timers
 * and what the ticks remember, and the yield pass's flag.
 *
 * Included by internal.h, which embeds struct weft__vcore_tick in every
 * vcore; the notification functions themselves are declared there.
 */
#ifndef WEFT_PREEMPT_H
#define WEFT_PREEMPT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct weft__vcore_tick {
    uint64_t preempt_for;            /* the nrun the pending preemption is meant for;
                                        written by the tick (this thread's handler) */
    uint64_t nrun;                   /* nrun at the last tick; handler only */
    bool retry_pending;              /* the retry timer is armed; handler only */
    uint64_t stretch_start;          /* time nrun last changed, as seen by the ticks */
    void *ptimer;                    /* timer_t of the periodic tick; fixed after start */
    void *rtimer;                    /* timer_t of the retry of a deferred notification */
    _Atomic bool has_timers;         /* both timers were created */
    unsigned char *yield_flagp;      /* this vcore thread's weft__yield_flag; fixed
                                        after start (yield.c, the yield pass) */
    _Atomic uint64_t yield_for;      /* the nrun the flag was set for; the ticker */
    uint64_t sigmask;                /* signals 1..64 the vcore thread blocked when it
                                        started (bit n-1: signal n); fixed after start */
};

#endif
