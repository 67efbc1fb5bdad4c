/*
 * x86-64 System V context switch. Saved on the switched-out stack, from high
 * to low addresses: the return address, rbp, rbx, r12, r13, r14, r15, then
 * one 8-byte slot holding MXCSR (low 4 bytes) and the x87 control word.
 * The saved stack pointer points at that slot.
 */
    .section weft_text, "ax", %progbits   /* weft's code section: see src/preempt.c */

/* SAVE_CALLER pushes the caller's frame (above) and stores the stack
 * pointer, now at the frame's lowest slot, in the ctx at (%rdi). */
.macro SAVE_CALLER
    pushq   %rbp
    pushq   %rbx
    pushq   %r12
    pushq   %r13
    pushq   %r14
    pushq   %r15
    subq    $8, %rsp
    stmxcsr (%rsp)
    fnstcw  4(%rsp)
    movq    %rsp, (%rdi)
.endm
/* SAVE_AND_MOVE saves the caller (SAVE_CALLER), keeps its FP control words
 * in r12d/r13d for .Lresume's compare (r12-r15 are saved, free now) and
 * moves to the saved or made frame at %rsi. */
.macro SAVE_AND_MOVE
    SAVE_CALLER
    movl    (%rsp), %r12d
    movzwl  4(%rsp), %r13d
    movq    %rsi, %rsp
.endm
/* CALL_AND_RESUME fn, arg calls fn(arg) below the frame at %rsp (16-byte
 * aligned: a made context is 8 mod 16) and then resumes that frame. */
.macro CALL_AND_RESUME fn, arg
    movq    %rsp, %rbx          /* callee-saved: the frame to resume, across fn */
    andq    $-16, %rsp
    movq    \arg, %rdi
    callq   *\fn
    movq    %rbx, %rsp
    jmp     .Lresume
.endm

/* void weft__ctx_save_and_call(ctx *save, void *stack_top, void (*fn)(void*), void *arg) */
    .globl  weft__ctx_save_and_call
    .hidden weft__ctx_save_and_call
    .type   weft__ctx_save_and_call, @function
    .p2align 4
weft__ctx_save_and_call:
    .cfi_startproc
    SAVE_CALLER
    movq    %rsi, %rsp          /* new stack: 16-byte aligned before the call */
    movq    %rcx, %rdi
    xorl    %ebp, %ebp          /* end the frame chain for debuggers */
    callq   *%rdx
    ud2
    .cfi_endproc
    .size   weft__ctx_save_and_call, .-weft__ctx_save_and_call

/* void weft__ctx_save_and_call_here(ctx *save, void (*fn)(void*), void *arg)
 * Saves the caller in *save as weft__ctx_save_and_call does, then calls
 * fn(arg) on the same stack, right below the saved frame (which stays
 * intact while fn runs). If fn returns, the saved context resumes (as a
 * weft__ctx_restore of *save would, by plain returns). */
    .globl  weft__ctx_save_and_call_here
    .hidden weft__ctx_save_and_call_here
    .type   weft__ctx_save_and_call_here, @function
    .p2align 4
weft__ctx_save_and_call_here:
    .cfi_startproc
    SAVE_CALLER
    movq    %rdx, %rdi
    movq    %rsp, %rbx          /* callee-saved: the frame to resume, if fn returns */
    andq    $-16, %rsp          /* 16-byte aligned before the call (it is already) */
    callq   *%rsi
    movq    %rbx, %rsp
    jmp     .Lresume_here
    .cfi_endproc
    .size   weft__ctx_save_and_call_here, .-weft__ctx_save_and_call_here

/* void weft__ctx_switch(ctx *save, void *to_sp, void (*fn)(void*), void *arg)
 * Saves the caller in *save as weft__ctx_save_and_call does, moves to the
 * stack of a context saved there (or made by weft__ctx_make) whose stack
 * pointer is to_sp, calls fn(arg) on that stack below its saved frame, and,
 * when fn returns, resumes that context.
 *
 * The FP control state is restored only when it differs from ours: the
 * ABI makes MXCSR's control bits (6-15) and the x87 control word
 * callee-saved, MXCSR's status flags (0-5) caller-saved, and ldmxcsr/fldcw
 * cost more than the rest of the switch. Both words are compared through
 * loads of the size they were stored with (store forwarding). */
    .globl  weft__ctx_switch
    .hidden weft__ctx_switch
    .type   weft__ctx_switch, @function
    .p2align 4
weft__ctx_switch:
    .cfi_startproc
    SAVE_AND_MOVE
    CALL_AND_RESUME %rdx, %rcx
    .cfi_endproc
    .size   weft__ctx_switch, .-weft__ctx_switch

/* void weft__ctx_swap(ctx *save, void *to_sp)
 * weft__ctx_switch without a function to call: save, move, resume. */
    .globl  weft__ctx_swap
    .hidden weft__ctx_swap
    .type   weft__ctx_swap, @function
    .p2align 4
weft__ctx_swap:
    .cfi_startproc
    SAVE_AND_MOVE
    jmp     .Lresume
    .cfi_endproc
    .size   weft__ctx_swap, .-weft__ctx_swap

/* void weft__ctx_swap_park(ctx *save, void *to_sp, int *word,
 *                          void (*fn)(void*), void *arg)
 * weft__ctx_swap that publishes the caller once it is saved: on to_sp's
 * stack (the one we leave is no longer in use: a signal lands on the new
 * one), it changes *word from 0 to 2 with a locked compare-and-swap (a full
 * barrier, as a seq_cst one in C) and resumes that context; when *word was
 * not 0 it leaves it and calls fn(arg) there first. */
    .globl  weft__ctx_swap_park
    .hidden weft__ctx_swap_park
    .type   weft__ctx_swap_park, @function
    .p2align 4
weft__ctx_swap_park:
    .cfi_startproc
    SAVE_AND_MOVE
    xorl    %eax, %eax          /* expected: 0 */
    movl    $2, %esi
    lock cmpxchgl %esi, (%rdx)
    je      .Lresume
    CALL_AND_RESUME %rcx, %r8
    .cfi_endproc
    .size   weft__ctx_swap_park, .-weft__ctx_swap_park
/* void weft__ctx_swap_unlock(ctx *save, void *to_sp, uint32_t *lock)
 * weft__ctx_swap that releases a spinlock once the caller is saved: on
 * to_sp's stack it stores 0 to *lock (a release store, as
 * weft__spin_unlock's) and resumes that context. */
    .globl  weft__ctx_swap_unlock
    .hidden weft__ctx_swap_unlock
    .type   weft__ctx_swap_unlock, @function
    .p2align 4
weft__ctx_swap_unlock:
    .cfi_startproc
    SAVE_AND_MOVE
    movl    $0, (%rdx)
    jmp     .Lresume
    .cfi_endproc
    .size   weft__ctx_swap_unlock, .-weft__ctx_swap_unlock
/* void weft__ctx_restore(ctx *ctx) */
    .globl  weft__ctx_restore
    .hidden weft__ctx_restore
    .type   weft__ctx_restore, @function
    .p2align 4
weft__ctx_restore:
    .cfi_startproc
    movq    (%rdi), %rsp
.Lresume_here:                  /* rsp at a saved frame, FP control not yet read */
    stmxcsr -8(%rsp)            /* ours, in the red zone below the frame */
    fnstcw  -4(%rsp)
    movl    -8(%rsp), %r12d
    movzwl  -4(%rsp), %r13d
.Lresume:                       /* rsp at a saved frame; r12d/r13d: our MXCSR, x87 CW */
    movl    (%rsp), %eax
    xorl    %r12d, %eax
    testl   $0xffc0, %eax
    jne     .Lfpctl
    cmpw    4(%rsp), %r13w
    jne     .Lfpctl
.Lpop:
    addq    $8, %rsp
    popq    %r15
    popq    %r14
    popq    %r13
    popq    %r12
    popq    %rbx
    popq    %rbp
    ret
.Lfpctl:
    ldmxcsr (%rsp)
    fldcw   4(%rsp)
    jmp     .Lpop
    .cfi_endproc
    .size   weft__ctx_restore, .-weft__ctx_restore

/* First code of a new context: r12 = fn, r13 = arg (see weft__ctx_make).
 * fn is entered by a jump, with a return address of 0 pushed as a call
 * would (the end of a backtrace): fn never returns, and a call would leave
 * an entry on the CPU's return stack that the returns of whichever
 * uthread the new one later switches to would be predicted with. */
    .globl  weft__ctx_trampoline
    .hidden weft__ctx_trampoline
    .type   weft__ctx_trampoline, @function
    .p2align 4
weft__ctx_trampoline:
    .cfi_startproc
    .cfi_undefined rip
    movq    %r13, %rdi
    andq    $-16, %rsp
    pushq   $0
    jmpq    *%r12
    .cfi_endproc
    .size   weft__ctx_trampoline, .-weft__ctx_trampoline

/* void weft__ctx_make(ctx *ctx, void *stack_top, void (*fn)(void*), void *arg) */
    .globl  weft__ctx_make
    .hidden weft__ctx_make
    .type   weft__ctx_make, @function
    .p2align 4
weft__ctx_make:
    .cfi_startproc
    andq    $-16, %rsi
    movq    $0, -8(%rsi)                        /* fake return address of the trampoline */
    leaq    weft__ctx_trampoline(%rip), %rax
    movq    %rax, -16(%rsi)                     /* "return address" popped by ret */
    movq    $0, -24(%rsi)                       /* rbp */
    movq    $0, -32(%rsi)                       /* rbx */
    movq    %rdx, -40(%rsi)                     /* r12 = fn */
    movq    %rcx, -48(%rsi)                     /* r13 = arg */
    movq    $0, -56(%rsi)                       /* r14 */
    movq    $0, -64(%rsi)                       /* r15 */
    stmxcsr -72(%rsi)                           /* inherit the caller's FP control */
    fnstcw  -68(%rsi)
    leaq    -72(%rsi), %rax
    movq    %rax, (%rdi)
    ret
    .cfi_endproc
    .size   weft__ctx_make, .-weft__ctx_make

    .section .note.GNU-stack,"",@progbits
