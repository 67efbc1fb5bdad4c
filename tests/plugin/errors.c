// Bad input is a compile-time error naming the option, with clang exiting
// non-zero and no crash report ("PLEASE submit a bug report").
//
// An unknown mode (cl::opt enum), a zero or negative threshold
// (LLVMContext::emitError), a non-number:
// RUN: %not %weftcc -O2 -mllvm -weft-yield-mode=bogus -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=MODE --implicit-check-not=PLEASE
// RUN: %not %weftcc -O2 -mllvm -weft-yield-mode=counter -mllvm -weft-yield-threshold=0 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=ZERO --implicit-check-not=PLEASE
// RUN: %not %weftcc -O2 -mllvm -weft-yield-mode=counter -mllvm -weft-yield-threshold=-5 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=NEG --implicit-check-not=PLEASE
// RUN: %not %weftcc -O0 -mllvm -weft-yield-threshold=-5 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=NEG --implicit-check-not=PLEASE
// RUN: %not %weftcc -O2 -mllvm -weft-yield-threshold=ten -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=NAN --implicit-check-not=PLEASE
// RUN: %clang -O0 -Xclang -disable-O0-optnone -S -emit-llvm %s -o %t.ll
// RUN: %not %opt -load-pass-plugin=%plugin -passes=weft-yield -weft-yield-threshold=-5 %t.ll -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=NEG --implicit-check-not=PLEASE
//
// A target without an inline check is an error naming the triple:
// RUN: %not %weftcc --target=riscv64-linux-gnu -O2 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=TARGET --implicit-check-not=PLEASE
// RUN: %not %weftcc --target=x86_64-linux-gnux32 -O2 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=X32 --implicit-check-not=PLEASE
//
// -mllvm options are only known once the plugin is loaded: -fpass-plugin
// alone loads it too late (this is why weft-cc adds -fplugin):
// RUN: %not %clang -O2 -fpass-plugin=%plugin -mllvm -weft-yield-mode=counter -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=LATE
// RUN: %clang -O2 -fplugin=%plugin -fpass-plugin=%plugin -mllvm -weft-yield-mode=counter -c %s -o /dev/null
//
// A plugin built for another LLVM major version refuses to load:
// RUN: %not %clang -O2 -fpass-plugin=%plugin18 -c %s -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=VERSION --implicit-check-not=PLEASE
// RUN: %not %opt -load-pass-plugin=%plugin18 -passes=weft-yield %t.ll -o /dev/null 2>&1 \
// RUN:   | %FileCheck %s --check-prefix=VERSION-OPT --implicit-check-not=PLEASE
//
// weft-cc refuses a clang of another major version:
// RUN: printf '#!/bin/sh\necho 18.1.8\n' > %t.clang && chmod +x %t.clang
// RUN: %not env WEFT_CLANG=%t.clang %weftcc -c %s 2>&1 | %FileCheck %s --check-prefix=WRONGCC

volatile unsigned long counter;

void count(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        counter++;
}

// MODE: for the --weft-yield-mode option: Cannot find option named 'bogus'!
// ZERO: error: weft-yield: --weft-yield-threshold must be a positive number of checks, got 0
// NEG: error: weft-yield: --weft-yield-threshold must be a positive number of checks, got -5
// NAN: for the --weft-yield-threshold option: 'ten' value invalid for integer argument!
// TARGET: error: weft-yield: no inline check for target 'riscv64-unknown-linux-gnu' (supported: ELF x86_64 and aarch64)
// X32: error: weft-yield: no inline check for target 'x86_64-unknown-linux-gnux32'
// LATE: Unknown command line argument '-weft-yield-mode=counter'
// VERSION: weft-yield: built for LLVM 18, loaded into LLVM 19
// VERSION: error: unable to load plugin '{{.*}}weft-yield-llvm18.so': 'Wrong API version on plugin
// VERSION-OPT: weft-yield: built for LLVM 18, loaded into LLVM 19
// VERSION-OPT: Wrong API version on plugin
// WRONGCC: weft-cc: {{.*}} is clang 18.1.8; weft-yield.so is built for clang/LLVM 19
