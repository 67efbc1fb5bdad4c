// Loops whose maximum trip count ScalarEvolution proves to be at most
// -weft-yield-small-trip (default 64) get no check; larger or unknown ones
// get one. -fno-unroll-loops keeps the small loop a loop.
//
// RUN: %weftcc -O2 -fno-unroll-loops -S -emit-llvm %s -o - | %FileCheck %s
// RUN: %weftcc -O2 -fno-unroll-loops -mllvm -weft-yield-stats -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=STATS
// The bound is the option: at 4 the 8-trip loop is checked, at 1000 the
// 1000-trip one is not, at 0 every loop is.
// RUN: %weftcc -O2 -fno-unroll-loops -mllvm -weft-yield-small-trip=4 -mllvm -weft-yield-stats \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=N4
// RUN: %weftcc -O2 -fno-unroll-loops -mllvm -weft-yield-small-trip=1000 -mllvm -weft-yield-stats \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=N1000
// RUN: %weftcc -O2 -fno-unroll-loops -mllvm -weft-yield-small-trip=0 -mllvm -weft-yield-stats \
// RUN:   -c %s -o /dev/null 2>&1 | %FileCheck %s --check-prefix=N0

volatile int sink;

void trip8(void)
{
    for (int i = 0; i < 8; i++)
        sink = i;
}

void trip1000(void)
{
    for (int i = 0; i < 1000; i++)
        sink = i;
}

void unknown(int n)
{
    for (int i = 0; i < n; i++)
        sink = i;
}

// A small inner loop is skipped, its outer loop is not.
void nest(int n)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 16; i++)
            sink = i + j;
}

// CHECK-LABEL: define {{.*}}void @trip8(
// CHECK-NOT: asm sideeffect
// CHECK: ret void
// CHECK-LABEL: define {{.*}}void @trip1000(
// CHECK: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
// CHECK-NOT: asm sideeffect
// CHECK-LABEL: define {{.*}}void @unknown(
// CHECK: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
// CHECK-NOT: asm sideeffect
// CHECK-LABEL: define {{.*}}void @nest(
// CHECK: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
// CHECK-NOT: asm sideeffect
// CHECK-LABEL: define internal void @weft.yield.ctor()

// STATS: weft-yield: trip8: checks 0 (entry 0, latch 0); loops skipped: small-trip 1,
// STATS: weft-yield: trip1000: checks 1 (entry 0, latch 1); loops skipped: small-trip 0,
// STATS: weft-yield: unknown: checks 1 (entry 0, latch 1); loops skipped: small-trip 0,
// STATS: weft-yield: nest: checks 1 (entry 0, latch 1); loops skipped: small-trip 1,
// N4: weft-yield: trip8: checks 1 (entry 0, latch 1); loops skipped: small-trip 0,
// N4: weft-yield: trip1000: checks 1 (entry 0, latch 1); loops skipped: small-trip 0,
// N1000: weft-yield: trip8: checks 0 (entry 0, latch 0); loops skipped: small-trip 1,
// N1000: weft-yield: trip1000: checks 0 (entry 0, latch 0); loops skipped: small-trip 1,
// N0: weft-yield: trip8: checks 1 (entry 0, latch 1); loops skipped: small-trip 0,
// N0: weft-yield: nest: checks 2 (entry 0, latch 2); loops skipped: small-trip 0,
