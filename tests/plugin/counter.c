// Counter mode: the same places get a thread-pointer-relative increment of
// weft__yield_count (one xaddl), an unsigned compare with the threshold and
// an unlikely branch to a cold call of weft__yield_count_slow; the
// constructor registers counter mode (2).
//
// RUN: %weftcc -O2 -mllvm -weft-yield-mode=counter -mllvm -weft-yield-threshold=500 \
// RUN:   -S -emit-llvm %s -o - | %FileCheck %s
// RUN: %weftcc -O0 -mllvm -weft-yield-mode=counter -mllvm -weft-yield-threshold=500 \
// RUN:   -S -emit-llvm %s -o - | %FileCheck %s
// Without a threshold, the default (10000):
// RUN: %weftcc -O2 -mllvm -weft-yield-mode=counter -S -emit-llvm %s -o - \
// RUN:   | %FileCheck %s --check-prefix=DEFAULT
// aarch64: tpidr_el0 plus the initial-exec GOT offset, ldr/add/str.
// RUN: %weftcc --target=aarch64-linux-gnu -O2 -mllvm -weft-yield-mode=counter \
// RUN:   -mllvm -weft-yield-threshold=7 -S -emit-llvm %s -o - | %FileCheck %s --check-prefix=A64

volatile unsigned long counter;

void count(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        counter++;
}

// CHECK-LABEL: define {{.*}}void @count(
// CHECK: [[R:%.*]] = call { i32, i64 } asm sideeffect "movq weft__yield_count@gottpoff(%rip), $1\0A\09movl $$1, $0\0A\09xaddl $0, %fs:($1)\0A\09addl $$1, $0", "=&r,=&r,~{flags}"()
// CHECK-NEXT: [[V:%.*]] = extractvalue { i32, i64 } [[R]], 0
// CHECK-NEXT: [[C:%.*]] = icmp uge i32 [[V]], 500
// CHECK-NEXT: br i1 [[C]], label %[[SLOW:[-a-z0-9.]+]], label %{{[-a-z0-9.]+}}, !prof ![[PROF:[0-9]+]]
// CHECK-NOT: asm sideeffect
// CHECK: [[SLOW]]:
// CHECK-NEXT: call void @weft__yield_count_slow() #[[COLD:[0-9]+]]
// CHECK-NOT: weft__yield_slow
// CHECK-LABEL: define internal void @weft.yield.ctor()
// CHECK: call void @weft__yield_register(i32 2)
// CHECK: attributes #[[COLD]] = { cold noinline nounwind }
// CHECK: ![[PROF]] = !{!"branch_weights", i32 1, i32 1048575}

// DEFAULT: icmp uge i32 %{{.*}}, 10000

// A64-LABEL: define {{.*}}void @count(
// A64: call { i32, i64 } asm sideeffect "mrs $1, tpidr_el0\0A\09adrp ${0:x}, :gottprel:weft__yield_count\0A\09ldr ${0:x}, [${0:x}, #:gottprel_lo12:weft__yield_count]\0A\09add $1, $1, ${0:x}\0A\09ldr ${0:w}, [$1]\0A\09add ${0:w}, ${0:w}, #1\0A\09str ${0:w}, [$1]", "=&r,=&r"()
// A64: icmp uge i32 %{{.*}}, 7
// A64: call void @weft__yield_count_slow()
// A64: call void @weft__yield_register(i32 2)
