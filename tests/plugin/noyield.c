// WEFT_NOYIELD functions get no check (not even an entry check when they
// recurse), and are kept out of their callers (noinline), so their loops are
// not instrumented there either. weft__ functions are left alone too.
//
// RUN: %weftcc -O2 -I%include -S -emit-llvm %s -o - | %FileCheck %s
// RUN: %weftcc -O0 -I%include -S -emit-llvm %s -o - | %FileCheck %s
// RUN: %weftcc -O2 -I%include -mllvm -weft-yield-stats -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=STATS

#include <weft/yield.h>

volatile unsigned long sink;

WEFT_NOYIELD void quiet(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink = i;
}

WEFT_NOYIELD unsigned long quiet_rec(unsigned long n)
{
    if (n < 2)
        return n;
    unsigned long a = quiet_rec(n - 1);
    sink = a;
    return a + quiet_rec(n - 2);
}

void loud(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink = i;
}

void weft__runtime_loop(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        sink = i;
}

void caller(unsigned long n)
{
    quiet(n);
    sink = quiet_rec(n);
}

// CHECK-LABEL: define {{.*}}void @quiet(
// CHECK-SAME: #[[NOINL:[0-9]+]]
// CHECK-NOT: asm sideeffect
// CHECK: ret void
// CHECK-LABEL: define {{.*}}i64 @quiet_rec(
// CHECK-NOT: asm sideeffect
// CHECK: ret i64
// CHECK-LABEL: define {{.*}}void @loud(
// CHECK: asm sideeffect "cmpb $$0, %fs:($1)"
// CHECK-NOT: asm sideeffect
// CHECK-LABEL: define {{.*}}void @weft__runtime_loop(
// CHECK-NOT: asm sideeffect
// CHECK: ret void
// CHECK-LABEL: define {{.*}}void @caller(
// CHECK-NOT: asm sideeffect
// CHECK: call void @quiet(
// CHECK-NOT: asm sideeffect
// CHECK: ret void
// CHECK: attributes #[[NOINL]] = { {{.*}}noinline

// STATS-DAG: weft-yield: quiet: excluded
// STATS-DAG: weft-yield: quiet_rec: excluded
// STATS-DAG: weft-yield: weft__runtime_loop: excluded
// STATS-DAG: weft-yield: loud: checks 1 (entry 0, latch 1)
// STATS-DAG: weft-yield: caller: checks 0 (entry 0, latch 0)
