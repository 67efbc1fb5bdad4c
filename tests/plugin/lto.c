// -flto and -flto=thin: clang's pre-link pipelines run the OptimizerLast
// callbacks, so the bitcode is already instrumented (the link step needs no
// plugin), at -O2 and -O0.
//
// RUN: %weftcc -O2 -flto -c %s -o %t.full.bc
// RUN: %llvm-dis %t.full.bc -o - | %FileCheck %s
// RUN: %weftcc -O2 -flto=thin -c %s -o %t.thin.bc
// RUN: %llvm-dis %t.thin.bc -o - | %FileCheck %s
// RUN: %weftcc -O0 -flto -c %s -o %t.o0.bc
// RUN: %llvm-dis %t.o0.bc -o - | %FileCheck %s

volatile unsigned long counter;

void count(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        counter++;
}

// CHECK: @llvm.global_ctors = {{.*}}@weft.yield.ctor
// CHECK-LABEL: define {{.*}}void @count(
// CHECK: asm sideeffect "cmpb $$0, %fs:($1)"
// CHECK-NOT: asm sideeffect
// CHECK: call void @weft__yield_slow()
