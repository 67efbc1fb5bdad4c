/*
 * arch/ctx.h — the machine-dependent context switch (arch/<cpu>/ctx.S).
 *
 * A saved context is one stack pointer: the callee-saved registers of the ABI
 * and the FP control words (x86-64: MXCSR and the x87 control word; aarch64:
 * FPCR) live on the saved stack itself. There is no ucontext and no signal
 * mask syscall.
 */
#ifndef WEFT_ARCH_CTX_H
#define WEFT_ARCH_CTX_H

#include <stddef.h>
#include <stdint.h>

struct weft__ctx {
    void *sp;               /* saved stack pointer; valid while switched out */
};

/* weft__ctx_save_and_call() saves the caller's context in *save, switches to
 * the stack whose top is stack_top (16-byte aligned) and calls fn(arg) there;
 * fn must not return. The caller resumes, as if this call returned, when
 * someone weft__ctx_restore()s *save. */
void weft__ctx_save_and_call(struct weft__ctx *save, void *stack_top,
                             void (*fn)(void *), void *arg);

/* weft__ctx_save_and_call_here() saves the caller's context in *save and
 * calls fn(arg) on the same stack, just below the saved frame. The caller
 * resumes, as if this call returned, when someone weft__ctx_restore()s *save
 * (anywhere, from any stack), or when fn returns (the stack pointer is then
 * where fn began: the frames on the stack are intact, whichever kernel
 * thread runs it). */
void weft__ctx_save_and_call_here(struct weft__ctx *save, void (*fn)(void *), void *arg);

/* weft__ctx_switch() saves the caller's context in *save, moves to the
 * stack of the saved or made context whose stack pointer is to_sp, calls
 * fn(arg) there (below that context's saved frame, so the stack we left is
 * no longer in use while fn runs), and when fn returns resumes that context.
 * The caller resumes, as if this call returned, when someone resumes *save. */
void weft__ctx_switch(struct weft__ctx *save, void *to_sp, void (*fn)(void *), void *arg);

/* weft__ctx_swap() saves the caller's context in *save and resumes the
 * saved or made context whose stack pointer is to_sp: weft__ctx_switch
 * with nothing to run in between. The caller resumes, as if this call
 * returned, when someone resumes *save. */
void weft__ctx_swap(struct weft__ctx *save, void *to_sp);

/* weft__ctx_swap_park() is weft__ctx_swap() that publishes the caller once
 * its context is saved: on to_sp's stack, before resuming that context, it
 * changes *word from 0 to 2 with a sequentially consistent compare-and-swap,
 * after which another thread may resume *save. If *word was not 0 it is
 * left as it was and fn(arg) runs there first (as weft__ctx_switch's fn). */
void weft__ctx_swap_park(struct weft__ctx *save, void *to_sp, _Atomic int *word,
                         void (*fn)(void *), void *arg);

/* weft__ctx_swap_unlock() is weft__ctx_swap() that releases spinlock *lock
 * (a release store of 0, as weft__spin_unlock's) once the caller's context
 * is saved, on to_sp's stack; from then on another thread may resume *save.
 * The crit count is the caller's to lower. */
void weft__ctx_swap_unlock(struct weft__ctx *save, void *to_sp, uint32_t *lock);

/* weft__ctx_restore() resumes the context saved in *ctx. */
_Noreturn void weft__ctx_restore(struct weft__ctx *ctx);

/* weft__ctx_make() prepares a fresh context on the stack whose top is
 * stack_top so that weft__ctx_restore() starts fn(arg) there with the FP
 * control state of the caller; fn must not return. */
void weft__ctx_make(struct weft__ctx *ctx, void *stack_top, void (*fn)(void *), void *arg);

#endif
