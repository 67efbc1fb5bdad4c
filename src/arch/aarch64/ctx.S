/*
 * aarch64 (AAPCS64) context switch. Saved frame of 176 bytes at the saved
 * stack pointer: x19..x28, x29 (fp), x30 (lr), d8..d15, FPCR.
 */
    .section weft_text, "ax", %progbits   /* weft's code section: see src/preempt.c */

#define SAVE_FRAME \
    sub     sp, sp, #176;            \
    stp     x19, x20, [sp, #0];      \
    stp     x21, x22, [sp, #16];     \
    stp     x23, x24, [sp, #32];     \
    stp     x25, x26, [sp, #48];     \
    stp     x27, x28, [sp, #64];     \
    stp     x29, x30, [sp, #80];     \
    stp     d8,  d9,  [sp, #96];     \
    stp     d10, d11, [sp, #112];    \
    stp     d12, d13, [sp, #128];    \
    stp     d14, d15, [sp, #144];    \
    mrs     x9, fpcr;                \
    str     x9, [sp, #160]

/* SAVE_CALLER saves the caller's frame (above) and stores the stack pointer,
 * now at the frame, in the ctx at x0. */
#define SAVE_CALLER \
    SAVE_FRAME;                      \
    mov     x9, sp;                  \
    str     x9, [x0]
/* SAVE_AND_MOVE saves the caller (SAVE_CALLER) and moves to the stack at
 * x1: a saved or made frame, or a fresh stack's top (16-byte aligned). */
#define SAVE_AND_MOVE \
    SAVE_CALLER;                     \
    mov     sp, x1

/* void weft__ctx_save_and_call(ctx *save, void *stack_top, void (*fn)(void*), void *arg) */
    .globl  weft__ctx_save_and_call
    .hidden weft__ctx_save_and_call
    .type   weft__ctx_save_and_call, %function
    .p2align 4
weft__ctx_save_and_call:
    .cfi_startproc
    SAVE_AND_MOVE
    mov     x0, x3
    mov     x29, #0
    mov     x30, #0
    blr     x2
    brk     #0
    .cfi_endproc
    .size   weft__ctx_save_and_call, .-weft__ctx_save_and_call

/* void weft__ctx_save_and_call_here(ctx *save, void (*fn)(void*), void *arg)
 * Saves the caller in *save, then calls fn(arg) right below the saved frame
 * on the same stack. If fn returns, the saved context resumes. */
    .globl  weft__ctx_save_and_call_here
    .hidden weft__ctx_save_and_call_here
    .type   weft__ctx_save_and_call_here, %function
    .p2align 4
weft__ctx_save_and_call_here:
    .cfi_startproc
    SAVE_CALLER
    mov     x0, x2
    blr     x1
    b       weft__ctx_resume_sp /* fn returned: sp is at the saved frame again */
    .cfi_endproc
    .size   weft__ctx_save_and_call_here, .-weft__ctx_save_and_call_here

/* void weft__ctx_switch(ctx *save, void *to_sp, void (*fn)(void*), void *arg)
 * Saves the caller in *save, moves to the saved (or made) context whose
 * stack pointer is to_sp, calls fn(arg) there below its frame, then resumes
 * that context. */
    .globl  weft__ctx_switch
    .hidden weft__ctx_switch
    .type   weft__ctx_switch, %function
    .p2align 4
weft__ctx_switch:
    .cfi_startproc
    SAVE_AND_MOVE
    mov     x0, x3
    blr     x2
    b       weft__ctx_resume_sp
    .cfi_endproc
    .size   weft__ctx_switch, .-weft__ctx_switch

/* void weft__ctx_swap(ctx *save, void *to_sp)
 * weft__ctx_switch without a function to call: save, move, resume. */
    .globl  weft__ctx_swap
    .hidden weft__ctx_swap
    .type   weft__ctx_swap, %function
    .p2align 4
weft__ctx_swap:
    .cfi_startproc
    SAVE_AND_MOVE
    b       weft__ctx_resume_sp
    .cfi_endproc
    .size   weft__ctx_swap, .-weft__ctx_swap

/* void weft__ctx_swap_park(ctx *save, void *to_sp, int *word,
 *                          void (*fn)(void*), void *arg)
 * weft__ctx_swap that publishes the caller once it is saved: on to_sp's
 * stack, it changes *word from 0 to 2 (load-acquire/store-release
 * exclusive pair, as a seq_cst compare-and-swap in C) and resumes that
 * context; when *word was not 0 it leaves it and calls fn(arg) there
 * first. */
    .globl  weft__ctx_swap_park
    .hidden weft__ctx_swap_park
    .type   weft__ctx_swap_park, %function
    .p2align 4
weft__ctx_swap_park:
    .cfi_startproc
    SAVE_AND_MOVE
    mov     w10, #2
1:  ldaxr   w9, [x2]
    cbnz    w9, 2f
    stlxr   w11, w10, [x2]
    cbnz    w11, 1b
    b       weft__ctx_resume_sp
2:  clrex
    mov     x0, x4
    blr     x3
    b       weft__ctx_resume_sp
    .cfi_endproc
    .size   weft__ctx_swap_park, .-weft__ctx_swap_park
/* void weft__ctx_swap_unlock(ctx *save, void *to_sp, uint32_t *lock)
 * weft__ctx_swap that releases a spinlock once the caller is saved: on
 * to_sp's stack it stores 0 to *lock with a store-release (as
 * weft__spin_unlock's) and resumes that context. */
    .globl  weft__ctx_swap_unlock
    .hidden weft__ctx_swap_unlock
    .type   weft__ctx_swap_unlock, %function
    .p2align 4
weft__ctx_swap_unlock:
    .cfi_startproc
    SAVE_AND_MOVE
    stlr    wzr, [x2]
    b       weft__ctx_resume_sp
    .cfi_endproc
    .size   weft__ctx_swap_unlock, .-weft__ctx_swap_unlock
/* void weft__ctx_restore(ctx *ctx) */
    .globl  weft__ctx_restore
    .hidden weft__ctx_restore
    .type   weft__ctx_restore, %function
    .p2align 4
weft__ctx_restore:
    .cfi_startproc
    ldr     x9, [x0]
    mov     sp, x9
weft__ctx_resume_sp:            /* sp at a saved frame: resume it */
    ldp     x19, x20, [sp, #0]
    ldp     x21, x22, [sp, #16]
    ldp     x23, x24, [sp, #32]
    ldp     x25, x26, [sp, #48]
    ldp     x27, x28, [sp, #64]
    ldp     x29, x30, [sp, #80]
    ldp     d8,  d9,  [sp, #96]
    ldp     d10, d11, [sp, #112]
    ldp     d12, d13, [sp, #128]
    ldp     d14, d15, [sp, #144]
    ldr     x9, [sp, #160]
    mrs     x10, fpcr           /* write FPCR only when it differs: msr may serialize */
    cmp     x9, x10
    b.eq    1f
    msr     fpcr, x9
1:  add     sp, sp, #176
    ret
    .cfi_endproc
    .size   weft__ctx_restore, .-weft__ctx_restore

/* First code of a new context: x19 = fn, x20 = arg (see weft__ctx_make).
 * fn is entered by a branch with lr = 0 (the end of a backtrace), not a
 * call: it never returns, and a call would leave a return prediction that
 * the uthread it later switches to would mispredict with (x86-64's note). */
    .globl  weft__ctx_trampoline
    .hidden weft__ctx_trampoline
    .type   weft__ctx_trampoline, %function
    .p2align 4
weft__ctx_trampoline:
    .cfi_startproc
    .cfi_undefined x30
    mov     x0, x20
    mov     x30, #0
    mov     x16, x19            /* br through x16: a landing pad for calls accepts it */
    br      x16
    .cfi_endproc
    .size   weft__ctx_trampoline, .-weft__ctx_trampoline

/* void weft__ctx_make(ctx *ctx, void *stack_top, void (*fn)(void*), void *arg) */
    .globl  weft__ctx_make
    .hidden weft__ctx_make
    .type   weft__ctx_make, %function
    .p2align 4
weft__ctx_make:
    .cfi_startproc
    and     x1, x1, #~15
    sub     x1, x1, #176
    mov     x9, #0
    mov     x10, #0
    stp     x2, x3,  [x1, #0]     /* x19 = fn, x20 = arg */
    stp     x9, x10, [x1, #16]
    stp     x9, x10, [x1, #32]
    stp     x9, x10, [x1, #48]
    stp     x9, x10, [x1, #64]
    adrp    x11, weft__ctx_trampoline
    add     x11, x11, :lo12:weft__ctx_trampoline
    stp     x9, x11, [x1, #80]    /* x29 = 0, x30 = trampoline */
    stp     x9, x10, [x1, #96]
    stp     x9, x10, [x1, #112]
    stp     x9, x10, [x1, #128]
    stp     x9, x10, [x1, #144]
    mrs     x9, fpcr               /* inherit the caller's FP control */
    str     x9, [x1, #160]
    str     x1, [x0]
    ret
    .cfi_endproc
    .size   weft__ctx_make, .-weft__ctx_make

    .section .note.GNU-stack,"",@progbits
