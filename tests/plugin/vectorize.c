// The pass runs at the end of the pipeline, so -O2 still vectorises; the
// vector loop gets its check afterwards.
//
// RUN: %weftcc -O2 -S -emit-llvm %s -o - | %FileCheck %s
// RUN: %weftcc -O2 -mllvm -weft-yield-mode=counter -S -emit-llvm %s -o - | %FileCheck %s

void add(int *restrict a, const int *restrict b, unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        a[i] += b[i];
}

// CHECK-LABEL: define {{.*}}void @add(
// CHECK: load <4 x i32>
// CHECK: {{add (nsw )?<4 x i32>}}
// CHECK: store <4 x i32>
// CHECK: asm sideeffect "{{cmpb|movq weft__yield_count@gottpoff}}
// CHECK: ret void
