// The inline assembly assembles to initial-exec TLS accesses relative to the
// thread pointer: %fs on x86_64, tpidr_el0 on aarch64, and the slow call is
// out of the loop's straight line.
//
// RUN: %weftcc -O2 -c %s -o %t.x86.o
// RUN: %llvm-objdump -dr --no-show-raw-insn %t.x86.o | %FileCheck %s --check-prefix=X86
// RUN: %llvm-objdump -t %t.x86.o | %FileCheck %s --check-prefix=SYM
// RUN: %weftcc -O2 -mllvm -weft-yield-mode=counter -c %s -o %t.x86c.o
// RUN: %llvm-objdump -dr --no-show-raw-insn %t.x86c.o | %FileCheck %s --check-prefix=X86C
// RUN: %weftcc --target=aarch64-linux-gnu -O2 -c %s -o %t.a64.o
// RUN: %llvm-objdump -dr --no-show-raw-insn %t.a64.o | %FileCheck %s --check-prefix=A64

volatile unsigned long counter;

void count(unsigned long n)
{
    for (unsigned long i = 0; i < n; i++)
        counter++;
}

struct node { struct node *link[2]; };

struct node *walk(struct node *p, unsigned long n)
{
    unsigned k = 0, d = 0;
    for (unsigned long i = 0; i < n; i++) {
        p = p->link[d];
        if (++k == 4096) {
            k = 0;
            d ^= 1;
        }
    }
    return p;
}

// x86_64 flag mode: the offset is loaded once, out of the loop; the check in
// the loop is two instructions.
// X86-LABEL: <count>:
// X86: movq (%rip), %[[R:[a-z0-9]+]]
// X86-NEXT: R_X86_64_GOTTPOFF weft__yield_flag-0x4
// X86: cmpb $0x0, %fs:(%[[R]])
// X86-NEXT: jne
// X86-NOT: weft__yield_slow
// X86: jmp
// X86: callq
// X86-NEXT: R_X86_64_PLT32 weft__yield_slow-0x4
// A loop with compares of its own at the latch (pointer chasing with a lap
// counter): the check's jne must test the check's own flags. Without the
// asm's flags clobber the scheduler put the loop's cmp between the two.
// X86-LABEL: <walk>:
// X86: cmpb $0x0, %fs:
// X86-NEXT: jne
// X86-LABEL: <weft.yield.ctor>:
// X86: R_X86_64_{{PLT32|PC32}} weft__yield_register

// SYM: *UND* {{0+}} weft__yield_flag

// X86C-LABEL: <count>:
// X86C: movq (%rip), %[[R:[a-z0-9]+]]
// X86C-NEXT: R_X86_64_GOTTPOFF weft__yield_count-0x4
// X86C-NEXT: movl $0x1, %[[V:[a-z0-9]+]]
// X86C-NEXT: xaddl %[[V]], %fs:(%[[R]])
// X86C-NEXT: addl $0x1, %[[V]]
// X86C-NEXT: cmpl $0x270f, %[[V]]
// X86C: R_X86_64_PLT32 weft__yield_count_slow-0x4

// A64-LABEL: <count>:
// A64: mrs [[TP:x[0-9]+]], TPIDR_EL0
// A64-NEXT: adrp [[OFF:x[0-9]+]],
// A64-NEXT: R_AARCH64_TLSIE_ADR_GOTTPREL_PAGE21 weft__yield_flag
// A64-NEXT: ldr [[OFF]], [[[OFF]]]
// A64-NEXT: R_AARCH64_TLSIE_LD64_GOTTPREL_LO12_NC weft__yield_flag
// A64-NEXT: ldrb w{{[0-9]+}}, [[[TP]], [[OFF]]]
// A64-NEXT: cbnz
// A64: R_AARCH64_CALL26 weft__yield_slow
