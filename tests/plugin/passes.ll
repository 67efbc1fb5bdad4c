; The pass alone (opt), on IR shapes clang does not easily produce.
;
; RUN: %opt -load-pass-plugin=%plugin -passes=weft-yield -S %s -o - | %FileCheck %s
; RUN: %opt -load-pass-plugin=%plugin -passes=weft-yield -weft-yield-stats -disable-output %s 2>&1 \
; RUN:   | %FileCheck %s --check-prefix=STATS
; Running it twice changes nothing more (the constructor marks the module):
; RUN: %opt -load-pass-plugin=%plugin -passes=weft-yield,weft-yield -S %s -o - | %FileCheck %s
; aarch64: mrs tpidr_el0, the GOT offset, ldrb.
; RUN: sed 's/x86_64-unknown-linux-gnu/aarch64-unknown-linux-gnu/' %s \
; RUN:   | %opt -load-pass-plugin=%plugin -passes=weft-yield -S -o - | %FileCheck %s --check-prefix=A64
; Another target is an error only if something would be checked:
; RUN: sed 's/x86_64-unknown-linux-gnu/riscv64-unknown-linux-gnu/' %s \
; RUN:   | %not %opt -load-pass-plugin=%plugin -passes=weft-yield -disable-output 2>&1 \
; RUN:   | %FileCheck %s --check-prefix=RISCV
; RUN: printf 'target triple = "riscv64-unknown-linux-gnu"\ndefine i32 @f(i32 %%x) {\n  ret i32 %%x\n}\n' \
; RUN:   | %opt -load-pass-plugin=%plugin -passes=weft-yield -S -o - | %FileCheck %s --check-prefix=NOLOOP

target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

@sink = global i32 0

; Not in loop-simplify form: two latches, each gets a check.
define void @two_latches(i32 %n) {
entry:
  br label %head
head:
  %i = phi i32 [ 0, %entry ], [ %i1, %a ], [ %i1, %b ]
  %i1 = add i32 %i, 1
  store volatile i32 %i, ptr @sink
  %odd = trunc i32 %i to i1
  br i1 %odd, label %a, label %b
a:
  %ca = icmp slt i32 %i1, %n
  br i1 %ca, label %head, label %exit
b:
  %cb = icmp slt i32 %i1, %n
  br i1 %cb, label %head, label %exit
exit:
  ret void
}
; CHECK-LABEL: define void @two_latches(
; CHECK: a:
; CHECK-NEXT: %ca = icmp
; CHECK-NEXT: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
; CHECK: b:
; CHECK-NEXT: %cb = icmp
; CHECK-NEXT: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
; CHECK: weft.yield.slow:
; CHECK-NEXT: call void @weft__yield_slow()
; CHECK: weft.yield.slow{{[0-9]+}}:
; CHECK-NEXT: call void @weft__yield_slow()
; CHECK-NEXT: br label %weft.yield.cont{{[0-9]+}}
; CHECK-NEXT: }

; One block is the latch of the inner and of the outer loop: one check.
define void @shared_latch(i32 %n) {
entry:
  br label %outer
outer:
  %j = phi i32 [ 0, %entry ], [ %j1, %latch ]
  br label %inner
inner:
  %i = phi i32 [ 0, %outer ], [ %i1, %latch ]
  store volatile i32 %i, ptr @sink
  %i1 = add i32 %i, 1
  %j1 = add i32 %j, 1
  br label %latch
latch:
  %k = load volatile i32, ptr @sink
  switch i32 %k, label %inner [ i32 0, label %outer
                                i32 1, label %exit ]
exit:
  ret void
}
; CHECK-LABEL: define void @shared_latch(
; CHECK: latch:
; CHECK-NEXT: %k = load volatile
; CHECK-NEXT: call i32 asm sideeffect
; CHECK-NOT: call i32 asm sideeffect
; CHECK: ret void

; Recursive: the entry check goes after the static allocas, which are moved
; up to stay static; a latch that is an invoke of it needs no check.
define i32 @rec(i32 %n) personality ptr @pers {
entry:
  %a = alloca i32
  store i32 %n, ptr %a
  %b = alloca i64
  %c = icmp eq i32 %n, 0
  br i1 %c, label %done, label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %loop.latch ]
  %i1 = add i32 %i, 1
  %r = invoke i32 @rec(i32 %i)
          to label %loop.latch unwind label %lpad
loop.latch:
  %m = icmp slt i32 %i1, %n
  br i1 %m, label %loop, label %done
lpad:
  %lp = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %lp
done:
  ret i32 0
}
; CHECK-LABEL: define i32 @rec(
; CHECK-NEXT: entry:
; CHECK-NEXT: %a = alloca i32
; CHECK-NEXT: %b = alloca i64
; CHECK-NEXT: call i64 asm "movq weft__yield_flag@gottpoff
; CHECK-NEXT: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
; CHECK-NOT: call i32 asm sideeffect
; CHECK: ret i32 0

; A loop whose latch is an invoke of a checked function: covered.
define void @loop_invokes(i32 %n) personality ptr @pers {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %i1, %loop ]
  %i1 = add i32 %i, 1
  %r = invoke i32 @rec(i32 %i)
          to label %loop unwind label %lpad
lpad:
  %lp = landingpad { ptr, i32 } cleanup
  resume { ptr, i32 } %lp
}
; CHECK-LABEL: define void @loop_invokes(
; CHECK-NOT: asm sideeffect
; CHECK: resume

; naked: nothing may be added.
define void @naked_loop() naked {
entry:
  call void asm sideeffect "1: jmp 1b", ""()
  unreachable
}
; CHECK-LABEL: define void @naked_loop(
; CHECK-NOT: weft__yield
; CHECK: unreachable

declare i32 @pers(...)

; CHECK-LABEL: define internal void @weft.yield.ctor()
; CHECK-NOT: define internal void @weft.yield.ctor

; STATS-DAG: weft-yield: two_latches: checks 2 (entry 0, latch 2)
; STATS-DAG: weft-yield: shared_latch: checks 1 (entry 0, latch 1)
; STATS-DAG: weft-yield: rec: checks 1 (entry 1, latch 0); loops skipped: small-trip 0, checked-call 1, eh-pad 0
; STATS-DAG: weft-yield: loop_invokes: checks 0 (entry 0, latch 0); loops skipped: small-trip 0, checked-call 1, eh-pad 0
; STATS-DAG: weft-yield: naked_loop: excluded

; A64-LABEL: define void @two_latches(
; A64: call { i32, i64 } asm sideeffect "mrs $1, tpidr_el0\0A\09adrp ${0:x}, :gottprel:weft__yield_flag\0A\09ldr ${0:x}, [${0:x}, #:gottprel_lo12:weft__yield_flag]\0A\09ldrb ${0:w}, [$1, ${0:x}]", "=&r,=&r"()
; A64-NEXT: extractvalue { i32, i64 } %{{.*}}, 0
; A64-NEXT: icmp ne i32 %{{.*}}, 0

; RISCV: error: weft-yield: no inline check for target 'riscv64-unknown-linux-gnu'

; NOLOOP-NOT: weft
; NOLOOP: define i32 @f(
; NOLOOP-NOT: weft
