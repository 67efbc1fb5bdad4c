#!/usr/bin/env python3
"""check-tp-reuse.py — find a thread pointer kept across a uthread switch.

A uthread may resume on another kernel thread after any call that can switch
it out (weft_yield, weft_park, a wait...). Code that read the thread pointer
before such a call and uses that value (or an address derived from it: a TLS
variable's address) after it reads or writes the thread-local storage of the
kernel thread it left (docs/ARCHITECTURE.md, invariant 2). Compilers treat the
thread pointer as constant within a function, so they do keep it: GCC kept
aarch64's `mrs xN, tpidr_el0` in a callee-saved register across weft_yield()
in alarm.c's stop(), and the crit count then went wrong on another thread.

This reads the libraries' code (`objdump -dr`) for the thread pointer:
  aarch64: `mrs xN, tpidr_el0`;
  x86-64:  `mov %fs:0x0, %reg` or `add %fs:0x0, %reg` (how TSan builds and
           address-taking code read it; plain `%fs:off` accesses read the
           base afresh each time);
  both:    the result of __tls_get_addr (general-dynamic TLS).
The switching functions are those that reach a context-switch primitive
(weft__ctx_*) through direct calls and tail calls, in the call graph of all
the libraries given (libweft's calls to read or usleep switch under the
pthread layer, which defines them), except through OUTSIDE_ONLY. In each
function a forward data-flow over its basic blocks tracks, per register,
whether it holds the thread pointer or a value made from it by an add, lea
or move, and whether a call that may switch came since; a read of such a
register after such a call is reported. Stack slots are not followed (an
unoptimised build spills the pointer; every build here is optimised, and
tp-reuse-fixture checks that the checker sees the fault in its code).
Calls that never return (by the libraries' own code, or NORETURN's names
outside them) end a path. The vcore's own thread routines, which never
change threads, are exempt by name (EXEMPT).

  usage: check-tp-reuse.py [--expect-some] [--objdump=CMD] aarch64|x86_64 LIB...

--expect-some inverts the verdict (the self-test: tests/tp_reuse_fixture.c
must be reported). Exit 0: nothing found; 1: a line per finding; 2: bad
input.
CHECK_TP_DEBUG=FN prints FN's instructions with the state before each.
"""
USAGE = "usage: check-tp-reuse.py [--expect-some] [--objdump=CMD] aarch64|x86_64 LIB..."
import os
import re
import subprocess
import sys

EXEMPT = {
    "vcore_thread",   # a vcore's kernel thread: vcore context stays on it
    "vcore_idle",     # vcore context (never a uthread): its own kernel thread
}
# Functions only kernel threads that are not uthreads enter (those never change
# threads), though their callees may switch when a uthread calls them: under
# the pthread layer, weft_init's usleep is the layer's, which parks a uthread.
OUTSIDE_ONLY = {
    "weft__outside_enter",  # the gate for a kernel thread that is not a uthread
    "weft_init",            # a uthread never starts the runtime: it runs in it
}
SWITCH_PRIMITIVES = {"weft__ctx_switch", "weft__ctx_swap", "weft__ctx_swap_park",
                     "weft__ctx_save_and_call", "weft__ctx_save_and_call_here",
                     "weft__ctx_restore"}  # src/arch/ctx.h
# Calls that do not return: no path goes on past them.
NORETURN = re.compile(r"(__asan_report_|__ubsan_handle_\w*_abort$|abort$|__stack_chk_fail$|"
                      r"__assert_fail$|weft__panic$|weft__die\w*$|_?exit$|pthread_exit$)")
TLS_GET_ADDR = {"__tls_get_addr"}  # target() drops @plt
CALL_RELOCS = {"R_AARCH64_CALL26", "R_AARCH64_JUMP26", "R_X86_64_PLT32", "R_X86_64_PC32"}


def parse(lines):
    """Functions as lists of (address, text); call/branch targets resolved
    from relocations where the object left them unresolved."""
    funcs, fn = {}, None
    for line in lines:
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            fn = m.group(2)
            if fn in funcs:  # the same name in another object or library
                fn = "%s\0%d" % (fn, len(funcs))
            funcs[fn] = []
            continue
        if fn is None:
            continue
        m = re.match(r"^\s+[0-9a-f]+: (R_\w+)\s+(\S+)", line)
        if m:
            if m.group(1) in CALL_RELOCS and funcs[fn]:
                a, t = funcs[fn][-1]
                sym = re.split(r"[-+]", m.group(2))[0]
                if re.match(r"(bl?|call|jmp)\b", t):
                    funcs[fn][-1] = (a, re.sub(r"<[^>]*>", "<%s>" % sym, t))
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)", line)
        if m:
            text = m.group(2).split("//")[0].split(" #")[0].strip()
            text = re.sub(r"^((data16|rex\.?\w*|cs|ds|notrack|bnd)\s+)+", "", text)  # prefixes
            funcs[fn].append((int(m.group(1), 16), text))
    return funcs


def target(arch, t):
    """(kind, symbol or address): kind 'call', 'tail' (a jump to another
    function's start), 'jump' (within the function), 'cond', or None."""
    if arch == "aarch64":
        m = re.match(r"(bl|b|b\.\w+|cbn?z|tbn?z)\s+(?:\S+,\s*)*([0-9a-f]+) <([^>]*)>", t)
        call_op, jump_op = "bl", "b"
    else:
        m = re.match(r"(call|jmp|j\w+)\s+([0-9a-f]+) <([^>]*)>", t)
        call_op, jump_op = "call", "jmp"
    if not m:
        return None
    op, addr, sym = m.groups()
    name = sym.split("@")[0]  # foo@plt: foo
    if op == call_op:
        return ("call", name.split("+")[0])
    if op == jump_op:
        return ("tail", name) if "+" not in sym else ("jump", int(addr, 16))
    return ("cond", int(addr, 16))


def base(key):
    """A function's name (parse() keys a second one of a name apart)."""
    return key.split("\0")[0]


def returning_set(arch, funcs):
    """Functions that can return: a ret (or an indirect jump), or a tail call
    to a function that can; outside the archive, all but NORETURN's."""
    ret = re.compile(r"(ret|br)\b" if arch == "aarch64" else r"(ret\b|jmp\s+\*)")
    tails = {}
    rets = set()
    for key, ins in funcs.items():
        f = base(key)
        tails.setdefault(f, set())
        for _, t in ins:
            if ret.match(t):
                rets.add(f)
            k = target(arch, t)
            if k and k[0] == "tail":
                tails[f].add(k[1])
    changed = True
    while changed:
        changed = False
        for f, ts in tails.items():
            if f in rets:
                continue
            if any((g in rets) if g in tails else not NORETURN.match(g) for g in ts):
                rets.add(f)
                changed = True
    return rets


def switching_set(arch, funcs):
    calls = {}
    for key, ins in funcs.items():
        cs = calls.setdefault(base(key), set())
        for _, t in ins:
            k = target(arch, t)
            if k and k[0] in ("call", "tail"):
                cs.add(k[1])
    sw = {f: None for f in SWITCH_PRIMITIVES}  # function -> the callee through which
    changed = True
    while changed:
        changed = False
        for f, cs in calls.items():
            if f not in sw and f not in OUTSIDE_ONLY:
                via = sorted(cs & sw.keys())
                if via:
                    sw[f] = via[0]
                    changed = True
    return sw


def chain(sw, f):
    """How f reaches a switch primitive: f -> g -> ... -> weft__ctx_*."""
    out = [f]
    while sw.get(out[-1]) and len(out) < 12:
        out.append(sw[out[-1]])
    return " -> ".join(out)


args = sys.argv[1:]
EXPECT_SOME = "--expect-some" in args
objdump = "objdump"
for a in list(args):
    if a.startswith("--objdump="):
        objdump = a.split("=", 1)[1]
        args.remove(a)
if EXPECT_SOME:
    args.remove("--expect-some")
if len(args) < 2 or args[0] not in ("aarch64", "x86_64"):
    print(USAGE, file=sys.stderr)
    sys.exit(2)
ARCH = args[0]
DEBUG = os.environ.get("CHECK_TP_DEBUG")
if ARCH == "aarch64":
    CALLEE_SAVED = ["x%d" % i for i in range(19, 29)]
    READ_TP = re.compile(r"mrs\s+(x\d+), tpidr_el0$")
    RET = re.compile(r"ret\b")
else:
    CALLEE_SAVED = ["%rbx", "%rbp", "%r12", "%r13", "%r14", "%r15"]
    READ_TP = re.compile(r"(?:mov|add)\s+%fs:0x0,(%r\w+)$")
    RET = re.compile(r"(ret|ud2)\b")


X86_NAMES = {}
for n, subs in {"%rax": "eax ax al", "%rbx": "ebx bx bl", "%rcx": "ecx cx cl", "%rdx": "edx dx dl",
                "%rsi": "esi si sil", "%rdi": "edi di dil", "%rbp": "ebp bp bpl", "%rsp": "esp sp spl"}.items():
    for sub in subs.split():
        X86_NAMES["%" + sub] = n
for i in range(8, 16):
    for suf in "dwb":
        X86_NAMES["%%r%d%s" % (i, suf)] = "%%r%d" % i


def reg(name):
    """A register by its 64-bit name (a write to a part overwrites it)."""
    if ARCH == "aarch64":
        return "x" + name[1:] if name[0] == "w" else name
    return X86_NAMES.get(name, name)


def regs_in(t):
    pat = r"\b[xw]\d+\b" if ARCH == "aarch64" else r"%[a-z]\w*"
    return set(reg(r) for r in re.findall(pat, t))


def dest(t):
    """The registers an instruction writes (none for stores, compares,
    branches; ldp writes two)."""
    parts = t.split(None, 1)
    if len(parts) < 2:
        return []
    op, ops = parts
    if ARCH == "aarch64":
        if re.match(r"(st\w*|cmp|cmn|tst|cbn?z|tbn?z|b\b|b\.|bl|prfm|dmb|dsb|isb|ret|br|blr)", op):
            return []
        regs = [o.strip() for o in ops.split(",")]
        if op.startswith("ldp") or op.startswith("ldaxp") or op.startswith("ldxp"):
            return [reg(r) for r in regs[:2]]
        return [reg(r) for r in regs[:1]]
    if re.match(r"(cmp|test|push|j|call|ret|bt\b|prefetch|nop)", op):
        return []
    if op.startswith("pop"):
        return [reg(ops.strip())]
    if op.startswith("xchg"):
        return [reg(o.strip()) for o in ops.split(",")]
    last = ops.split(",")[-1].strip()
    return [reg(last)] if re.match(r"%[a-z]\w*$", last) else []


def operands(t):
    """Top-level operands (commas inside brackets or parentheses kept)."""
    parts = t.split(None, 1)
    if len(parts) < 2:
        return []
    out, depth, cur = [], 0, ""
    for ch in parts[1]:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def reads(t, ds):
    """Registers t reads: every register operand but those it only writes."""
    ops = operands(t)
    op = t.split(None, 1)[0]
    if ARCH == "aarch64":
        nw = len(ds)  # written operands come first
        pure = [o for o in ops[:nw] if "[" not in o and not o.startswith("#")]
        rest = ops[len(pure):]
    else:
        overwrite = re.match(r"(mov|lea|pop|set|cmov)", op) and not op.startswith("cmov")
        if ds and overwrite and "(" not in ops[-1]:
            rest = ops[:-1]
        else:
            rest = ops
    return set(r for o in rest for r in regs_in(o))


def derived_state(t, d, st):
    """The state of d after t writes it: an add, lea or register move keeps
    the thread pointer's state of its sources (an address computed from the
    thread pointer is as stale as the pointer); anything else clears it."""
    op = t.split(None, 1)[0]
    if not re.match(r"(add|lea|mov)$|movq?$", op):
        return None
    ops = operands(t)
    if ARCH == "aarch64":
        srcs = [r for o in ops[1:] for r in regs_in(o)]  # add/mov: registers only
    else:
        src = ops[:-1]
        if op.startswith("mov") and any("(" in o for o in src):
            return None  # a load: a value from memory, not an address
        srcs = [r for o in src for r in regs_in(o) if r != "%rip"]
        if op.startswith("add"):
            srcs.append(d)  # two-operand: d + source
    rank = {None: 0, "tp": 1, "stale": 2}
    best = None
    for r in srcs:
        if rank[st.get(r)] > rank[best]:
            best = st.get(r)
    return best


def check(fn, ins, sw):
    """Forward data-flow over fn's blocks: state per callee-saved register,
    None (nothing of interest), 'tp' (the thread pointer or an address
    derived from it) or 'stale' (that, after a switching call)."""
    addrs = [a for a, _ in ins]
    index = {a: i for i, a in enumerate(addrs)}
    leaders = {0}
    for i, (_, t) in enumerate(ins):
        k = target(ARCH, t)
        if k and k[0] in ("jump", "cond") and k[1] in index:
            leaders.add(index[k[1]])
        if k or RET.match(t):
            leaders.add(i + 1)
    leaders = sorted(l for l in leaders if l < len(ins))
    block_of = {}
    for b, start in enumerate(leaders):
        end = leaders[b + 1] if b + 1 < len(leaders) else len(ins)
        block_of[start] = end
    state_in = {0: {}}
    work = [0]
    found = []
    why = {}  # register -> the switching call that made it stale (for the report)
    while work:
        start = work.pop()
        st = dict(state_in[start])
        i = start
        end = block_of[start]
        succ = []
        while i < end:
            a, t = ins[i]
            if DEBUG == fn:
                print("  %x %-50s %s" % (a, t, {r: v for r, v in st.items() if v}), file=sys.stderr)
            ds = dest(t)
            for r in reads(t, ds):
                if st.get(r) == "stale":
                    found.append("%s+0x%x: %s holds the thread pointer read before a call that may "
                                 "switch (%s): %s" % (fn, a - addrs[0], r, chain(sw, why.get(r, "?")), t))
                    st[r] = None
            m = READ_TP.match(t)
            if m:
                st[reg(m.group(1))] = "tp"
            else:
                for d in ds:
                    st[d] = derived_state(t, d, st)
            k = target(ARCH, t)
            if k and k[0] == "call":
                for r in list(st):
                    if r not in CALLEE_SAVED:
                        st[r] = None
                    elif st[r] == "tp" and k[1] in sw:
                        st[r] = "stale"
                        why[r] = k[1]
                if k[1] in TLS_GET_ADDR:  # general-dynamic TLS: returns the address
                    st["x0" if ARCH == "aarch64" else "%rax"] = "tp"
            i += 1
            if k and k[0] in ("jump", "cond") and k[1] in index:
                succ.append(index[k[1]])
            if k and k[0] in ("jump", "tail") or RET.match(t):
                break
            if k and k[0] == "call" and (k[1] not in RETURNING if k[1] in NAMES else NORETURN.match(k[1])):
                break
        else:
            if end < len(ins):
                succ.append(end)
        for s in succ:
            old = state_in.get(s)
            if old is None:
                state_in[s] = dict(st)
                work.append(s)
                continue
            merged = dict(old)
            for r, v in st.items():
                rank = {None: 0, "tp": 1, "stale": 2}
                if rank[v] > rank[merged.get(r)]:
                    merged[r] = v
            if merged != old:
                state_in[s] = merged
                work.append(s)
    return sorted(set(found))


lines = []
for lib in args[1:]:
    try:
        lines += subprocess.run([objdump, "-dr", "--no-show-raw-insn", lib], check=True,
                                capture_output=True, text=True, errors="replace").stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as e:
        print("check-tp-reuse: %s: %s" % (objdump, e), file=sys.stderr)
        sys.exit(2)
funcs = parse(lines)
NAMES = set(base(k) for k in funcs)
RETURNING = returning_set(ARCH, funcs)
if not funcs:
    print("check-tp-reuse: no functions in %s" % sys.argv[2], file=sys.stderr)
    sys.exit(2)
sw = switching_set(ARCH, funcs)
reports = []
for key, ins in funcs.items():
    if base(key) in EXEMPT or not ins:
        continue
    reports += check(base(key), ins, sw)
for r in reports:
    print(r)
print("check-tp-reuse (%s): %d functions, %d reach a switch, %d findings"
      % (ARCH, len(funcs), len(sw), len(reports)), file=sys.stderr)
if EXPECT_SOME:
    sys.exit(0 if reports else 1)
sys.exit(1 if reports else 0)
