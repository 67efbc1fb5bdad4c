/*
 * yield.h — the runtime side of the yield pass (plugin/, `weft-cc`).
 *
 * Code compiled with the pass checks, at loop latches and at the entry of
 * functions that can recurse, whether it should yield, and calls into weft
 * when it should. Two modes:
 *
 *  - Flag mode (the default): the check loads this kernel thread's
 *    weft__yield_flag and branches (marked unlikely) to weft__yield_slow()
 *    when it is not zero. weft sets the flag of a vcore when the uthread
 *    running there has used up its quantum (the preemption period,
 *    weft_set_preempt_period()): instrumented code then yields at its next
 *    check without taking a signal. Signal preemption (<weft/event.h>)
 *    remains the fallback for code that does not check.
 *  - Counter mode (-mllvm -weft-yield-mode=counter
 *    -mllvm -weft-yield-threshold=N): every check adds one to this kernel
 *    thread's weft__yield_count and calls weft__yield_count_slow() when it
 *    reaches N: a yield every N checks on a vcore, whatever the clock says
 *    (the scheme of the EPFL report, kept for comparison).
 *
 * The flag and the counter are initial-exec TLS: the pass reads them with
 * an explicit thread-pointer-relative load at every check (inline assembly),
 * never through an address computed earlier, because the uthread may have
 * moved to another vcore's kernel thread since.
 *
 * Excluding code: WEFT_NOYIELD on a function (an annotate attribute the pass
 * reads) leaves it without checks. weft's own library is never compiled with
 * the pass. A uthread inside weft_notifs_disable() does not yield at a check:
 * the yield is taken at the outermost weft_notifs_enable(), as a deferred
 * preemption is. A yield, like every scheduling decision, starts a new
 * quantum, so a uthread that blocked and was woken is not preempted at its
 * first check.
 *
 * Everything named weft__ here is the contract between the pass and the
 * runtime, not for applications to call.
 */
#ifndef WEFT_YIELD_H
#define WEFT_YIELD_H

/* The library is built with hidden symbols; what this header declares is its API. */
#pragma GCC visibility push(default)

#ifdef __cplusplus
extern "C" {
#endif

/* WEFT_NOYIELD: the yield pass leaves this function without checks. */
#define WEFT_NOYIELD __attribute__((annotate("weft_noyield")))

/* Modes, as passed to weft__yield_register(). */
#define WEFT_YIELD_FLAG    1
#define WEFT_YIELD_COUNTER 2

/* Non-zero: the uthread running on this kernel thread should yield at its
 * next check (flag mode). Written by weft; read by instrumented code. */
extern __thread unsigned char weft__yield_flag __attribute__((tls_model("initial-exec")));

/* Checks passed since the last counter-mode yield on this kernel thread. */
extern __thread unsigned weft__yield_count __attribute__((tls_model("initial-exec")));

/* weft__yield_slow() is the flag-mode slow path: clears the flag and, if the
 * caller is a uthread with notifications enabled whose quantum has expired,
 * yields as a preemption (the uthread goes to the back of its queue and the
 * vcore's preempt_taken grows). Anywhere else (vcore context, a kernel
 * thread that is not a vcore, a disabled region) it only clears the flag;
 * a disabled region takes the yield at its outermost enable. */
void weft__yield_slow(void);

/* weft__yield_count_slow() is the counter-mode slow path: resets this
 * kernel thread's count and yields as weft__yield_slow() does (the quantum
 * plays no part). */
void weft__yield_count_slow(void);

/* weft__yield_register() is called once by each instrumented module's
 * constructor, with its mode: weft then sets the flags (flag mode) from a
 * ticker thread, so instrumented code is preempted without signals. Safe
 * before weft_init(). */
void weft__yield_register(int mode);

#ifdef __cplusplus
}
#endif

#pragma GCC visibility pop

#endif /* WEFT_YIELD_H */
