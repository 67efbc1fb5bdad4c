// Flag mode: a counting loop gets exactly one check, at -O2 and at -O0
// (where clang marks the function optnone: the pass is required). The check
// is a compare of the byte at the thread pointer plus the flag's offset
// (inline asm, the result in ZF: a flag output), an unlikely branch to a cold
// call of weft__yield_slow that branches back; the offset (from the GOT, the
// same in every thread) is loaded once, at the function's entry, by an asm
// that is not a side effect. The module gets a constructor registering flag
// mode (1).
// At -O2 the loop is unrolled by 4 and its remainder loop (at most 3 trips)
// is skipped as small.
//
// RUN: %weftcc -O2 -S -emit-llvm %s -o - | %FileCheck %s --check-prefix=CHECK
// RUN: %weftcc -O0 -S -emit-llvm %s -o - | %FileCheck %s --check-prefixes=CHECK,O0
// RUN: %weftcc -O2 -mllvm -weft-yield-stats -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=STATS-O2
// RUN: %weftcc -O0 -mllvm -weft-yield-stats -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=STATS-O0
// The same through opt on clang's unoptimised IR:
// RUN: %clang -O0 -Xclang -disable-O0-optnone -S -emit-llvm %s -o %t.ll
// RUN: %opt -load-pass-plugin=%plugin -passes=weft-yield -S %t.ll -o - \
// RUN:   | %FileCheck %s --check-prefix=CHECK

volatile unsigned long counter;

void count(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        counter++;
}

// CHECK: @llvm.global_ctors = appending global [1 x { i32, ptr, ptr }] [{ i32, ptr, ptr } { i32 65535, ptr @weft.yield.ctor, ptr null }]
// CHECK-LABEL: define {{.*}}void @count(
// O0-SAME: #[[FN:[0-9]+]]
// CHECK: [[OFF:%.*]] = call i64 asm "movq weft__yield_flag@gottpoff(%rip), $0", "=r"() #[[OFFA:[0-9]+]]
// CHECK-NOT: asm sideeffect
// CHECK: [[V:%.*]] = call i32 asm sideeffect "cmpb $$0, %fs:($1)", "={@ccne},r,~{dirflag},~{fpsr},~{flags}"(i64 [[OFF]]) #[[ASM:[0-9]+]]
// CHECK-NEXT: [[C:%.*]] = icmp ne i32 [[V]], 0
// CHECK-NEXT: br i1 [[C]], label %[[SLOW:[-a-z0-9.]+]], label %[[CONT:[-a-z0-9.]+]], !prof ![[PROF:[0-9]+]]
// CHECK-NOT: asm sideeffect
// The slow block is the function's last.
// CHECK: [[SLOW]]:
// CHECK-NEXT: call void @weft__yield_slow() #[[COLD:[0-9]+]]
// CHECK-NEXT: br label %[[CONT]]
// CHECK-NEXT: }
// CHECK-NOT: asm sideeffect
// CHECK: declare void @weft__yield_slow() #[[DECL:[0-9]+]]
// CHECK-LABEL: define internal void @weft.yield.ctor()
// CHECK: call void @weft__yield_register(i32 1)
// CHECK-NEXT: ret void
// O0: attributes #[[FN]] = { {{.*}}optnone
// CHECK: attributes #[[DECL]] = { cold nounwind }
// CHECK: attributes #[[OFFA]] = { nounwind memory(none) }
// CHECK: attributes #[[ASM]] = { nounwind memory(inaccessiblemem: readwrite) }
// CHECK: attributes #[[COLD]] = { cold noinline nounwind }
// CHECK: ![[PROF]] = !{!"branch_weights", i32 1, i32 1048575}

// STATS-O2: weft-yield: count: checks 1 (entry 0, latch 1); loops skipped: small-trip 1, checked-call 0, eh-pad 0
// STATS-O0: weft-yield: count: checks 1 (entry 0, latch 1); loops skipped: small-trip 0, checked-call 0, eh-pad 0
