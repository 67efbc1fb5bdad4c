/*
 * time.h — clocks, sleeping and alarms.
 *
 * All times are nanoseconds on CLOCK_MONOTONIC (weft_now_ns()). Deadlines are
 * absolute, durations relative; WEFT_FOREVER means "never". A deadline or
 * duration with the top bit set (a negative number cast to uint64_t) other
 * than WEFT_FOREVER is rejected with EINVAL.
 *
 * Timers need no thread of their own. Each vcore keeps a heap of the alarms
 * started on it; a busy vcore runs its due alarms every few scheduling
 * decisions, and the one parked vcore that holds the timer duty (asleep on
 * its futex, or in the I/O poller once a descriptor is in use) uses the
 * nearest deadline of all heaps as its timeout and runs whatever is due on
 * any heap. A vcore that runs one uthread for a long time without a
 * scheduling decision delays its own alarms only while no other vcore is
 * idle (until preemption arrives).
 */
#ifndef WEFT_TIME_H
#define WEFT_TIME_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef WEFT_FOREVER
#define WEFT_FOREVER UINT64_MAX
#endif

/* weft_now_ns() returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t weft_now_ns(void);

/* weft_sleep_ns() sleeps at least ns nanoseconds. Returns 0, EINVAL if ns
 * has the top bit set, or ENOMEM at once if no memory can be had for the
 * timer (a uthread's sleep), or EDEADLK from a signal handler that interrupted
 * weft. weft_sleep_ns(0) yields. Outside a uthread it sleeps the kernel
 * thread. */
int weft_sleep_ns(uint64_t ns);

/* weft_sleep_until_ns() sleeps until weft_now_ns() >= deadline. Returns 0
 * (at once if the deadline has passed), EINVAL for WEFT_FOREVER or a
 * deadline with the top bit set, or ENOMEM and EDEADLK as weft_sleep_ns. */
int weft_sleep_until_ns(uint64_t deadline);

/* ---- alarms ------------------------------------------------------------- */

/* An alarm is a one-shot timer whose callback runs in vcore context (never
 * in a uthread): the callback must not block, and should be short. It may
 * wake uthreads (weft_unpark, weft_sem_post, ...), start other alarms, and
 * start or reset its own alarm again (a periodic alarm). Embed one anywhere;
 * it must stay alive until weft_alarm_stop() returned or its callback ran.
 * Fields are private; set them only through these calls. `data` is free for
 * the application. */
struct weft_alarm {
    uint64_t deadline;                    /* set_abs / set_rel */
    void (*cb)(struct weft_alarm *);      /* weft_alarm_init */
    void *data;                           /* application's */
    void *heap;                           /* heap it is armed on; private */
    int idx;                              /* heap index; private */
    int state;                            /* idle / armed / firing; private, atomic */
};
typedef struct weft_alarm weft_alarm_t;

/* weft_alarm_init() prepares a with callback cb, no deadline, not armed. */
void weft_alarm_init(struct weft_alarm *a, void (*cb)(struct weft_alarm *));

/* weft_alarm_set_abs() sets the deadline of an alarm that is not armed.
 * Returns 0, EBUSY if a is armed, or EINVAL for a bad deadline. */
int weft_alarm_set_abs(struct weft_alarm *a, uint64_t deadline);

/* weft_alarm_set_rel() sets the deadline to now + ns. Returns as set_abs. */
int weft_alarm_set_rel(struct weft_alarm *a, uint64_t ns);

/* weft_alarm_start() arms a on the calling vcore's heap (a round-robin one
 * from outside threads). Returns 0, EBUSY if already armed, EINVAL if no
 * deadline or callback was set, ENOMEM if its heap cannot grow (also from
 * its own callback: the restart is refused then), or ESHUTDOWN from an outside thread while
 * weft_shutdown() stops the vcores. A deadline already past fires at the next
 * scheduling decision. Starting an alarm from its own callback is allowed. */
int weft_alarm_start(struct weft_alarm *a);

/* weft_alarm_stop() disarms a. Returns true if it stopped a before its
 * callback ran (the callback will not run), false if a was not armed or has
 * fired. From a uthread or a kernel thread, if the callback is running on
 * another vcore, it waits (spins briefly, then sleeps) until it has
 * returned, so a may be freed afterwards. From vcore context (any alarm
 * callback, a's own included, or an event handler) it never waits: a
 * callback running elsewhere may still be running when it returns false,
 * and a start under way on another thread wins (a stays armed), so vcore
 * context must not free a after stopping it. */
bool weft_alarm_stop(struct weft_alarm *a);

/* weft_alarm_reset_abs() moves a to a new deadline, armed: stop, set, start
 * in one call. Returns true if the old arming was stopped before it fired
 * (so exactly one callback results from the two armings), false if it was
 * not armed or had fired. A bad deadline (EINVAL for set_abs) changes
 * nothing and returns false. */
bool weft_alarm_reset_abs(struct weft_alarm *a, uint64_t deadline);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_TIME_H */
