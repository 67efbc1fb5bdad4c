/*
 * stackcopy.h — stack-copying uthreads (WEFT_STACK_COPY): run stacks, the
 * copies of parked stacks, and the pools they come from (stackcopy.c).
 *
 * Included by internal.h, which embeds struct weft__sc_vcore in every vcore.
 */
#ifndef WEFT_STACKCOPY_H
#define WEFT_STACKCOPY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct weft_uthread;
struct weft__vcore;

/* A run stack: a guarded mapping that stack-copy uthreads execute on. The
 * frames of a uthread that ran on it hold addresses inside it, so once
 * started a stack-copy uthread only ever runs on this same run stack (at the
 * same address), whichever vcore runs it. */
struct weft__runstack {
    char *map;                       /* fixed: the mapping, its guard (RS_GUARD) first */
    size_t map_size;                 /* fixed */
    char *lo, *top;                  /* fixed: the usable stack [lo, top) */
    _Atomic int holder;              /* vcore that may execute on it now, -1 if none: taken
                                        with a CAS, released with a store (stackcopy.c) */
    unsigned vg_id;                  /* Valgrind stack id; fixed */
};

/* Size classes of the copies and of stack-copy uthreads' structs. */
#define WEFT__SC_CLASSES 52

/* A vcore's part (owned by that vcore; read by nobody else). */
struct weft__sc_vcore {
    struct weft__runstack *held;     /* the run stack this vcore holds, or NULL */
    struct weft__runstack *fresh;    /* the one its new stack-copy uthreads start on */
    unsigned fresh_left;             /* how many more may start there */
    unsigned rr;                     /* where its search for a free run stack begins */
    void *cache[WEFT__SC_CLASSES];   /* free blocks per size class, linked by first word */
    uint16_t ncache[WEFT__SC_CLASSES];
};

/* Per-uthread copy_flags. */
#define WEFT__SC_EXITING   0x1       /* finishing: nothing to copy out */
#define WEFT__SC_FORWARDED 0x2       /* pinned for now to its run stack's holder */
#define WEFT__SC_INLINE    0x4       /* run by its joiner on the joiner's stack (uthread.c) */

/* weft__sc_size: the run stacks' usable size (2 MiB, or the default stack
 * size if larger); fixed while the runtime runs. */
extern size_t weft__sc_size;
/* weft__sc_default: WEFT_STACK_COPY is the process default (weft_config,
 * WEFT_STACK_COPY=1); fixed while the runtime runs. */
extern bool weft__sc_default;

/* weft__sc_uthread_alloc() returns a zeroed stack-copy uthread shell from
 * the struct pool, or NULL (ENOMEM). weft__sc_uthread_free() gives it back.
 * vc is the caller's vcore (weft__vc()), or NULL outside the vcores. */
struct weft_uthread *weft__sc_uthread_alloc(struct weft__vcore *vc);
void weft__sc_uthread_free(struct weft__vcore *vc, struct weft_uthread *t);

/* weft__sc_leave() is the stack check of a stack-copy uthread ut that just
 * switched out on vc: its used stack, from its saved stack pointer to the
 * top of its run stack, is copied to a buffer of its size (unless it is
 * exiting). The run stack stays held by vc. Vcore-context rules. */
void weft__sc_leave(struct weft__vcore *vc, struct weft_uthread *ut);

/* weft__sc_enter() gets t (stack-copy, runnable, dequeued by vc) ready to
 * be resumed on vc: vc holds t's run stack (a fresh t gets one and a new
 * context at its top), and t's saved stack is copied back. False if another
 * vcore holds t's run stack: t was handed to that vcore instead (or, if it
 * is pinned here, queued again here). Vcore context. */
bool weft__sc_enter(struct weft__vcore *vc, struct weft_uthread *t, void (*start)(void *));

/* weft__sc_wake() is called as t (stack-copy, started) is made runnable by
 * vcore me (-1: an outside thread): if another vcore holds t's run stack,
 * t is pinned to that vcore until it runs (it could not run elsewhere). */
void weft__sc_wake(int me, struct weft_uthread *t);

/* weft__sc_release() lets go of the run stack vc holds (vc->sc.held). */
void weft__sc_release(struct weft__vcore *vc);

/* weft__sc_check() aborts with a message naming what if p lies on a run
 * stack: something that outlives a switch (a waiter, a futex word, an armed
 * alarm) was put on a stack-copy uthread's stack, which is only valid while
 * that uthread runs. One load when no run stack exists. */
extern _Atomic int weft__sc_nstacks;
void weft__sc_check_slow(const void *p, const char *what);
static inline void weft__sc_check(const void *p, const char *what)
{
    if (__builtin_expect(atomic_load_explicit(&weft__sc_nstacks, memory_order_relaxed) != 0, 0))
        weft__sc_check_slow(p, what);
}
/* weft__sc_on_run_stack(): [p, p+n) overlaps a run stack. */
bool weft__sc_on_run_stack(const void *p, size_t n);

/* Set-up: weft__sc_vcore_fini() hands a stopping vcore's caches back to the
 * pools; weft__sc_forked() forgets the parent's run stacks and pools in a
 * fork child (the caller may be running on one). */
void weft__sc_vcore_fini(struct weft__vcore *vc);
void weft__sc_forked(void);

#endif
