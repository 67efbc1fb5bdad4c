// Functions that can recurse (a cycle in the call graph, a direct
// self-call included) get a check at entry, and a loop whose body always
// calls one gets no latch check: the callee's entry check runs every
// iteration. Recursion through function pointers is not seen.
//
// RUN: %weftcc -O2 -S -emit-llvm %s -o - | %FileCheck %s --check-prefix=CHECK
// RUN: %weftcc -O0 -S -emit-llvm %s -o - | %FileCheck %s --check-prefixes=CHECK,O0
// RUN: %weftcc -O2 -mllvm -weft-yield-stats -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=STATS
// RUN: %weftcc -O0 -mllvm -weft-yield-stats -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=STATS

struct node { struct node *l, *r; };

int depth(struct node *n)
{
    if (!n)
        return 0;
    int a = depth(n->l);
    int b = depth(n->r);
    return 1 + (a > b ? a : b);
}

int total(struct node **trees, unsigned long n)
{
    int t = 0;
    for (unsigned long i = 0; i < n; i++)
        t += depth(trees[i]);
    return t;
}

// Mutual recursion: both are in one SCC.
__attribute__((noinline)) int is_odd(unsigned n);
__attribute__((noinline)) int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1) + 0 * n; }
__attribute__((noinline)) int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1) + 0 * n; }

// Not recursive: no entry check.
int leaf(int x) { return x * 3; }

// The check follows the entry block's allocas and the flag offset's load.
// CHECK-LABEL: define {{.*}}i32 @depth(
// O0-NEXT: alloca
// O0-NEXT: alloca
// O0-NEXT: alloca
// O0-NEXT: alloca
// CHECK-NEXT: call i64 asm "movq weft__yield_flag@gottpoff
// CHECK-NEXT: call i32 asm sideeffect "cmpb $$0, %fs:($1)"
// CHECK-NOT: asm sideeffect
// CHECK-LABEL: define {{.*}}i32 @total(
// CHECK-NOT: asm sideeffect
// CHECK: call i32 @depth(
// CHECK-NOT: asm sideeffect
// CHECK-LABEL: define {{.*}}i32 @is_even(
// CHECK: asm sideeffect
// CHECK-LABEL: define {{.*}}i32 @is_odd(
// CHECK: asm sideeffect
// CHECK-LABEL: define {{.*}}i32 @leaf(
// CHECK-NOT: asm sideeffect
// CHECK: ret i32

// STATS-DAG: weft-yield: depth: checks 1 (entry 1, latch 0)
// STATS-DAG: weft-yield: total: checks 0 (entry 0, latch 0); loops skipped: small-trip 0, checked-call 1,
// STATS-DAG: weft-yield: is_even: checks 1 (entry 1, latch 0)
// STATS-DAG: weft-yield: is_odd: checks 1 (entry 1, latch 0)
// STATS-DAG: weft-yield: leaf: checks 0 (entry 0, latch 0)
