//===- WeftYield.cpp - weft's yield pass: cheap checks in long-running code ===//
//
// The compiler side of include/weft/yield.h. That header is the contract;
// this comment is the design.
//
// WHAT IS INSERTED
//   A check is: an inline-asm load of a TLS word relative to the thread
//   pointer *at that instruction*, a compare, and a branch weighted 1 : 2^20-1
//   to a block "weft.yield.slow" that calls the slow path (call site `cold`,
//   callee declared `cold nounwind`) and branches back to "weft.yield.cont".
//   The slow block is moved to the end of the function, so even at -O0
//   (no block placement) the hot path falls through.
//     flag mode (default, -weft-yield-mode=flag):
//       x86_64:  cmpb $0, %fs:(%r) ; jne  (a flag output: two instructions),
//                where %r holds the flag's offset from the thread pointer,
//                loaded from the GOT (movq weft__yield_flag@gottpoff(%rip))
//                once per call, in the entry block, by an asm that is not a
//                side effect: the offset is the same in every thread, so
//                only the %fs-relative access must stay at the check (a
//                compare plus a load made sort's checked loops ~7 % slower)
//       aarch64: mrs x, tpidr_el0 ; adrp/ldr :gottprel: ; ldrb w, [x, off]
//       != 0  ->  weft__yield_slow()
//     counter mode (-weft-yield-mode=counter -weft-yield-threshold=N):
//       x86_64:  one xaddl on %fs:(off) (an RMW a signal cannot split)
//       aarch64: mrs + gottprel + ldr/add/str
//       new value >= N  ->  weft__yield_count_slow()  (which resets it)
//   The TLS is read through inline asm and never llvm.threadlocal.address:
//   a TLS address is a value the optimiser may keep across the slow call,
//   and the uthread can come back from it on another kernel thread. The asm
//   is `sideeffect` (never deleted, merged or hoisted) and is marked as
//   touching only inaccessible memory, so it does not pin user loads/stores.
//   On aarch64 the address is formed in a register, so a uthread preempted by
//   a signal inside those few instructions may read (flag) or bump (counter)
//   the previous kernel thread's word once: harmless for a heuristic.
//   Other targets (not ELF x86_64 / aarch64, or x32) are an error naming the
//   triple, reported only when the module would get a check.
//
// WHERE
//   * before the terminator of every loop latch (L->getLoopLatches(): at -O0
//     loops are not in simplified form and may have several). A block that is
//     the latch of several loops gets one check.
//   * at the entry of every function that can recurse: a node of the legacy
//     CallGraph whose SCC has a cycle (a direct self-call included). Indirect
//     calls are unknown to the call graph, so recursion only through function
//     pointers is not seen: such code relies on its loops' checks (or on
//     signal preemption). The check goes after the entry block's static
//     allocas (they are moved up so they stay static).
//   Skipped:
//     (a) loops whose ScalarEvolution max trip count is in 1..N,
//         N = -weft-yield-small-trip (default 64). Per loop, not per nest: two
//         nested loops of 64 iterations run 4096 without a check.
//     (b) latches dominated by a call, inside the loop, to a function of this
//         module that gets an entry check: that check runs every iteration.
//     (c) declarations, `naked` functions, functions whose name starts with
//         weft__ (the runtime's own), functions annotated weft_noyield
//         (WEFT_NOYIELD, read from llvm.global.annotations). Because an
//         annotation does not survive inlining, a pipeline-start pass also
//         marks weft_noyield functions `noinline` (unless always_inline):
//         otherwise their loops would be instrumented inside their callers.
//     (d) the module constructor this pass adds.
//   EH pads that are their own terminator (catchswitch) cannot take a check.
//
// MODULE CONSTRUCTOR
//   Every module that got at least one check gets an internal constructor
//   "weft.yield.ctor" (appendToGlobalCtors, priority 65535) calling
//   weft__yield_register(1 | 2) (WEFT_YIELD_FLAG / WEFT_YIELD_COUNTER). A
//   module that already has it is left alone, so running the pass twice is a
//   no-op.
//
// PIPELINE
//   registerOptimizerLastEPCallback: the checks go in after unrolling, LICM
//   and vectorisation, so those are not blocked (a call in a loop would stop
//   the vectoriser). The pass isRequired(), so -O0 (optnone) functions are
//   instrumented too; LLVM 19's buildO0DefaultPipeline invokes the
//   OptimizerLast callbacks (tests/plugin checks -O0).
//   -flto / -flto=thin: clang's pre-link pipelines run the OptimizerLast
//   callbacks too (full LTO: the whole module optimisation pipeline; thin: an
//   explicit call "for clang's sake"), so the bitcode clang writes is already
//   instrumented and the link step needs no plugin (tests/plugin/lto.c).
//   The cost differs: full LTO pre-link has already unrolled and vectorised
//   when the checks go in, but ThinLTO defers vectorisation to its link-time
//   backend, which then sees a call in every loop and leaves it scalar
//   (checked by hand: a loop that vectorises under -flto=thin without the
//   plugin does not with it). Prefer no LTO or full LTO with the pass.
//
// OPTIONS (cl::opt; through clang: -mllvm). clang 19 parses -mllvm before
// it loads -fpass-plugin plugins, so `-fpass-plugin=P -mllvm -weft-yield-...`
// alone fails with "Unknown command line argument". -fplugin=P (cc1 -load P)
// loads the library before -mllvm is parsed; the second load by -fpass-plugin
// is the same dlopen handle. weft-cc and weft-yield.pc pass both.
//   -weft-yield-mode=flag|counter   enum: an unknown name is a cl:: error
//   -weft-yield-threshold=N         int, default 10000 (signed, so -5 is
//                                   seen); <= 0 is an error in either mode,
//                                   through LLVMContext::emitError (clang:
//                                   "error: ...", exit 1; opt: exit 1)
//   -weft-yield-small-trip=N        unsigned, default 64 (0: skip none)
//   -weft-yield-stats               per function: checks and skipped loops
//
// VERSION
//   The cl::opts are constructed by a static initialiser only after the
//   running LLVM's major version (LLVMGetVersion, looked up with dlsym so an
//   LLVM without it cannot crash the load) matches the one this file was
//   built against; otherwise "weft-yield: built for LLVM X, loaded into LLVM
//   Y" goes to stderr and llvmGetPassPluginInfo returns API version 0, which
//   clang and opt reject ("Wrong API version on plugin").
//===----------------------------------------------------------------------===//

#include "llvm/ADT/SCCIterator.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Analysis/CallGraph.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

#include <cstdio>
#include <dlfcn.h>
#include <string>
#include <vector>

using namespace llvm;

// The LLVM major version this plugin is built for; a build can override it
// (tests/plugin builds a copy that claims another version).
#ifndef WEFT_YIELD_BUILT_FOR_LLVM
#define WEFT_YIELD_BUILT_FOR_LLVM LLVM_VERSION_MAJOR
#endif

namespace {

enum class YieldMode { Flag = 1, Counter = 2 }; // = WEFT_YIELD_FLAG / _COUNTER

constexpr const char *CtorName = "weft.yield.ctor";
constexpr const char *NoYieldAnnotation = "weft_noyield";
constexpr int DefaultThreshold = 10000;

// ---- version check and options ---------------------------------------------

// The running LLVM's major version, or 0 when it cannot be told.
unsigned runningLLVMMajor() {
  using GetVersionFn = void (*)(unsigned *, unsigned *, unsigned *);
  auto *Fn = reinterpret_cast<GetVersionFn>(dlsym(RTLD_DEFAULT, "LLVMGetVersion"));
  if (!Fn)
    return 0;
  unsigned Major = 0, Minor = 0, Patch = 0;
  Fn(&Major, &Minor, &Patch);
  return Major;
}

bool versionMatches() {
  unsigned Running = runningLLVMMajor();
  if (Running == 0 || Running == WEFT_YIELD_BUILT_FOR_LLVM)
    return true; // 0: cannot tell (no LLVMGetVersion exported); trust the load
  fprintf(stderr, "weft-yield: built for LLVM %u, loaded into LLVM %u\n",
          (unsigned)WEFT_YIELD_BUILT_FOR_LLVM, Running);
  return false;
}

struct Options {
  cl::opt<YieldMode> Mode{
      "weft-yield-mode", cl::desc("weft-yield: what a check reads"),
      cl::init(YieldMode::Flag),
      cl::values(clEnumValN(YieldMode::Flag, "flag",
                            "test the vcore's preempt flag (default)"),
                 clEnumValN(YieldMode::Counter, "counter",
                            "count checks, yield every -weft-yield-threshold"))};
  // Signed on purpose: -5 must reach the pass and be reported, not wrap.
  cl::opt<int> Threshold{
      "weft-yield-threshold",
      cl::desc("weft-yield counter mode: yield every N checks (N > 0)"),
      cl::init(DefaultThreshold)};
  cl::opt<unsigned> SmallTrip{
      "weft-yield-small-trip",
      cl::desc("weft-yield: no check in loops whose max trip count is "
               "provably at most N (0: check every loop)"),
      cl::init(64)};
  cl::opt<bool> Stats{"weft-yield-stats",
                      cl::desc("weft-yield: print per-function check counts"),
                      cl::init(false)};
};

// Dynamic initialisation at dlopen, in this order: the version check before
// any cl::opt touches the host's CommandLine registry.
const bool VersionOK = versionMatches();
Options *const Opts = VersionOK ? new Options : nullptr;

// ---- which functions to leave alone -----------------------------------------

SmallPtrSet<const Function *, 8> noYieldFunctions(Module &M) {
  SmallPtrSet<const Function *, 8> Out;
  GlobalVariable *GA = M.getNamedGlobal("llvm.global.annotations");
  if (!GA || !GA->hasInitializer())
    return Out;
  auto *Arr = dyn_cast<ConstantArray>(GA->getInitializer());
  if (!Arr)
    return Out;
  for (Value *Op : Arr->operands()) {
    auto *Entry = dyn_cast<ConstantStruct>(Op);
    if (!Entry || Entry->getNumOperands() < 2)
      continue;
    auto *F = dyn_cast<Function>(Entry->getOperand(0)->stripPointerCasts());
    auto *Str = dyn_cast<GlobalVariable>(Entry->getOperand(1)->stripPointerCasts());
    if (!F || !Str || !Str->hasInitializer())
      continue;
    auto *Data = dyn_cast<ConstantDataSequential>(Str->getInitializer());
    if (Data && Data->isCString() && Data->getAsCString() == NoYieldAnnotation)
      Out.insert(F);
  }
  return Out;
}

bool excluded(const Function &F, const SmallPtrSetImpl<const Function *> &NoYield) {
  return F.isDeclaration() || F.hasFnAttribute(Attribute::Naked) ||
         F.getName().starts_with("weft__") || F.getName() == CtorName ||
         NoYield.contains(&F);
}

// ---- the target's inline assembly -------------------------------------------

enum class Arch { None, X86_64, AArch64 };

Arch archOf(const Triple &T) {
  if (!T.isOSBinFormatELF())
    return Arch::None;
  if (T.getArch() == Triple::x86_64 && T.getEnvironment() != Triple::GNUX32 &&
      T.getEnvironment() != Triple::MuslX32)
    return Arch::X86_64;
  if (T.getArch() == Triple::aarch64)
    return Arch::AArch64;
  return Arch::None;
}

// Emits, at B's insertion point, x86_64 flag mode's load of the flag's
// offset from the thread pointer (its GOT slot: the same for every thread,
// so one load per function call serves every check in it).
Value *emitFlagOffset(IRBuilder<> &B) {
  auto *IA = InlineAsm::get(FunctionType::get(B.getInt64Ty(), false),
                            "movq weft__yield_flag@gottpoff(%rip), $0", "=r",
                            /*hasSideEffects=*/false);
  CallInst *Call = B.CreateCall(IA, {}, "weft.yield.off");
  Call->addFnAttr(Attribute::NoUnwind);
  Call->setMemoryEffects(MemoryEffects::none());
  return Call;
}

// Emits the TLS access at B's insertion point and returns an i32: nonzero
// if the flag is set (flag mode) or the incremented count (counter mode).
// Off: x86_64 flag mode's emitFlagOffset() value.
Value *emitTLSAccess(IRBuilder<> &B, Arch A, YieldMode Mode, Value *Off) {
  LLVMContext &Ctx = B.getContext();
  Type *I32 = B.getInt32Ty(), *I64 = B.getInt64Ty();
  // Counter mode and aarch64 need a value and a scratch register.
  Type *RetTy = StructType::get(Ctx, {I32, I64});
  const char *Asm = nullptr;
  const char *Constraints = "=&r,=&r";
  if (A == Arch::X86_64 && Mode == YieldMode::Flag) {
    // One compare of the byte at %fs:off, its result in ZF (a flag output):
    // with the branch, two instructions.
    auto *IA = InlineAsm::get(FunctionType::get(I32, {I64}, false),
                              "cmpb $$0, %fs:($1)", "={@ccne},r,~{dirflag},~{fpsr},~{flags}",
                              /*hasSideEffects=*/true);
    CallInst *Call = B.CreateCall(IA, {Off}, "weft.yield.val");
    Call->addFnAttr(Attribute::NoUnwind);
    Call->setMemoryEffects(MemoryEffects::inaccessibleMemOnly());
    return Call;
  } else if (A == Arch::X86_64) {
    // xadd: one RMW of this thread's count, so a preempting signal cannot
    // split it; then +1 for the new value.
    Asm = "movq weft__yield_count@gottpoff(%rip), $1\n\t"
          "movl $$1, $0\n\t"
          "xaddl $0, %fs:($1)\n\t"
          "addl $$1, $0";
    Constraints = "=&r,=&r,~{flags}";
  } else if (Mode == YieldMode::Flag) {
    Asm = "mrs $1, tpidr_el0\n\t"
          "adrp ${0:x}, :gottprel:weft__yield_flag\n\t"
          "ldr ${0:x}, [${0:x}, #:gottprel_lo12:weft__yield_flag]\n\t"
          "ldrb ${0:w}, [$1, ${0:x}]";
  } else {
    Asm = "mrs $1, tpidr_el0\n\t"
          "adrp ${0:x}, :gottprel:weft__yield_count\n\t"
          "ldr ${0:x}, [${0:x}, #:gottprel_lo12:weft__yield_count]\n\t"
          "add $1, $1, ${0:x}\n\t"
          "ldr ${0:w}, [$1]\n\t"
          "add ${0:w}, ${0:w}, #1\n\t"
          "str ${0:w}, [$1]";
  }
  auto *IA = InlineAsm::get(FunctionType::get(RetTy, false), Asm, Constraints,
                            /*hasSideEffects=*/true);
  CallInst *Call = B.CreateCall(IA, {}, "weft.yield.tls");
  Call->addFnAttr(Attribute::NoUnwind);
  Call->setMemoryEffects(MemoryEffects::inaccessibleMemOnly());
  if (RetTy == I64)
    return B.CreateTrunc(Call, I32, "weft.yield.val");
  return B.CreateExtractValue(Call, 0, "weft.yield.val");
}

// ---- the pass ---------------------------------------------------------------

struct FunctionStats {
  unsigned EntryChecks = 0, LatchChecks = 0;
  unsigned SkippedSmallTrip = 0, SkippedCall = 0, SkippedEHPad = 0;
};

class WeftYieldPass : public PassInfoMixin<WeftYieldPass> {
public:
  static bool isRequired() { return true; }

  PreservedAnalyses run(Module &M, ModuleAnalysisManager &MAM) {
    LLVMContext &Ctx = M.getContext();
    if (!Opts)
      return PreservedAnalyses::all();
    if (Opts->Threshold <= 0) {
      Ctx.emitError("weft-yield: --weft-yield-threshold must be a positive "
                    "number of checks, got " +
                    std::to_string(Opts->Threshold.getValue()));
      return PreservedAnalyses::all();
    }
    if (M.getFunction(CtorName))
      return PreservedAnalyses::all(); // already instrumented

    const YieldMode Mode = Opts->Mode;
    const auto NoYield = noYieldFunctions(M);

    // Functions that can recurse: in a call-graph SCC with a cycle.
    SmallPtrSet<const Function *, 16> EntryCheck;
    {
      CallGraph CG(M);
      for (auto I = scc_begin(&CG); !I.isAtEnd(); ++I) {
        if (!I.hasCycle())
          continue;
        for (CallGraphNode *N : *I) {
          const Function *F = N->getFunction();
          if (F && !excluded(*F, NoYield))
            EntryCheck.insert(F);
        }
      }
    }

    // Decide every check before changing anything.
    struct Plan {
      Function *F;
      bool Entry;
      SmallSetVector<BasicBlock *, 8> Latches;
      FunctionStats Stats;
    };
    std::vector<Plan> Plans;
    auto &FAM = MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
    for (Function &F : M) {
      if (excluded(F, NoYield)) {
        if (Opts->Stats && !F.isDeclaration())
          errs() << "weft-yield: " << F.getName() << ": excluded\n";
        continue;
      }
      Plan P{&F, EntryCheck.contains(&F), {}, {}};
      auto &LI = FAM.getResult<LoopAnalysis>(F);
      if (!LI.empty()) {
        auto &DT = FAM.getResult<DominatorTreeAnalysis>(F);
        auto &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
        for (Loop *L : LI.getLoopsInPreorder())
          planLoop(L, DT, SE, EntryCheck, P.Latches, P.Stats);
      }
      if (P.Entry || !P.Latches.empty() || Opts->Stats)
        Plans.push_back(std::move(P));
    }

    bool Any = false;
    for (const Plan &P : Plans)
      Any |= P.Entry || !P.Latches.empty();
    Arch A = archOf(Triple(M.getTargetTriple()));
    if (Any && A == Arch::None) {
      Ctx.emitError("weft-yield: no inline check for target '" +
                    M.getTargetTriple() +
                    "' (supported: ELF x86_64 and aarch64)");
      return PreservedAnalyses::all();
    }

    for (Plan &P : Plans) {
      if (!P.Entry && P.Latches.empty()) {
        if (Opts->Stats)
          printStats(*P.F, P.Stats);
        continue;
      }
      BasicBlock::iterator IP = hoistStaticAllocas(*P.F);
      Value *Off = nullptr;
      if (A == Arch::X86_64 && Mode == YieldMode::Flag) {
        IRBuilder<> B(&*IP);
        Off = emitFlagOffset(B);
        IP = std::next(cast<Instruction>(Off)->getIterator());
      }
      if (P.Entry) {
        DebugLoc DL;
        if (DISubprogram *SP = P.F->getSubprogram())
          DL = DILocation::get(Ctx, SP->getScopeLine(), 0, SP);
        insertCheck(*P.F, &*IP, DL, A, Mode, Off);
        ++P.Stats.EntryChecks;
      }
      for (BasicBlock *BB : P.Latches) {
        insertCheck(*P.F, BB->getTerminator(), BB->getTerminator()->getDebugLoc(),
                    A, Mode, Off);
        ++P.Stats.LatchChecks;
      }
      if (Opts->Stats)
        printStats(*P.F, P.Stats);
    }
    if (!Any)
      return PreservedAnalyses::all();
    addConstructor(M, Mode);
    return PreservedAnalyses::none();
  }

private:
  static void planLoop(Loop *L, DominatorTree &DT, ScalarEvolution &SE,
                       const SmallPtrSetImpl<const Function *> &EntryCheck,
                       SmallSetVector<BasicBlock *, 8> &Latches,
                       FunctionStats &S) {
    unsigned Max = SE.getSmallConstantMaxTripCount(L);
    if (Max >= 1 && Max <= Opts->SmallTrip) {
      ++S.SkippedSmallTrip;
      return;
    }
    // Calls in the loop to functions whose entry is checked.
    SmallVector<const CallBase *, 4> CheckedCalls;
    for (BasicBlock *BB : L->blocks())
      for (Instruction &I : *BB)
        if (auto *CB = dyn_cast<CallBase>(&I))
          if (const Function *Callee = CB->getCalledFunction())
            if (EntryCheck.contains(Callee))
              CheckedCalls.push_back(CB);
    SmallVector<BasicBlock *, 4> LoopLatches;
    L->getLoopLatches(LoopLatches);
    for (BasicBlock *Latch : LoopLatches) {
      Instruction *T = Latch->getTerminator();
      bool Covered = false;
      for (const CallBase *CB : CheckedCalls)
        if (CB == T || DT.dominates(CB, T)) {
          Covered = true;
          break;
        }
      if (Covered) {
        ++S.SkippedCall;
        continue;
      }
      if (T->isEHPad() || Latch->getFirstInsertionPt() == Latch->end()) {
        ++S.SkippedEHPad;
        continue;
      }
      Latches.insert(Latch);
    }
  }

  // Moves the entry block's static allocas to its top (so they stay static
  // with code before them) and returns the point after them.
  static BasicBlock::iterator hoistStaticAllocas(Function &F) {
    BasicBlock &Entry = F.getEntryBlock();
    auto IP = Entry.getFirstInsertionPt();
    SmallVector<AllocaInst *, 8> Static;
    for (Instruction &I : Entry)
      if (auto *AI = dyn_cast<AllocaInst>(&I))
        if (AI->isStaticAlloca())
          Static.push_back(AI);
    for (AllocaInst *AI : Static)
      if (AI->getIterator() != IP)
        AI->moveBefore(Entry, IP);
      else
        ++IP;
    return IP;
  }

  static void insertCheck(Function &F, Instruction *Before, DebugLoc DL,
                          Arch A, YieldMode Mode, Value *Off) {
    Module &M = *F.getParent();
    LLVMContext &Ctx = F.getContext();
    IRBuilder<> B(Before);
    B.SetCurrentDebugLocation(DL);
    Value *V = emitTLSAccess(B, A, Mode, Off);
    Value *Cond =
        Mode == YieldMode::Flag
            ? B.CreateICmpNE(V, B.getInt32(0), "weft.yield.flagged")
            : B.CreateICmpUGE(V, B.getInt32((uint32_t)Opts->Threshold.getValue()),
                              "weft.yield.due");
    MDNode *Weights = MDBuilder(Ctx).createBranchWeights(1, (1u << 20) - 1);
    Instruction *ThenTerm = SplitBlockAndInsertIfThen(Cond, Before, false, Weights);
    BasicBlock *Slow = ThenTerm->getParent();
    BasicBlock *Cont = ThenTerm->getSuccessor(0);
    Slow->setName("weft.yield.slow");
    Cont->setName("weft.yield.cont");
    Slow->moveAfter(&F.back());

    FunctionCallee Callee = M.getOrInsertFunction(
        Mode == YieldMode::Flag ? "weft__yield_slow" : "weft__yield_count_slow",
        FunctionType::get(Type::getVoidTy(Ctx), false));
    if (auto *Fn = dyn_cast<Function>(Callee.getCallee())) {
      Fn->addFnAttr(Attribute::Cold);
      Fn->addFnAttr(Attribute::NoUnwind);
    }
    IRBuilder<> SB(ThenTerm);
    SB.SetCurrentDebugLocation(DL);
    CallInst *Call = SB.CreateCall(Callee);
    Call->addFnAttr(Attribute::Cold);
    Call->addFnAttr(Attribute::NoInline);
    Call->addFnAttr(Attribute::NoUnwind);
  }

  static void addConstructor(Module &M, YieldMode Mode) {
    LLVMContext &Ctx = M.getContext();
    Type *Void = Type::getVoidTy(Ctx), *I32 = Type::getInt32Ty(Ctx);
    Function *Ctor = Function::Create(FunctionType::get(Void, false),
                                      GlobalValue::InternalLinkage, CtorName, M);
    Ctor->addFnAttr(Attribute::NoUnwind);
    FunctionCallee Reg = M.getOrInsertFunction(
        "weft__yield_register", FunctionType::get(Void, {I32}, false));
    IRBuilder<> B(BasicBlock::Create(Ctx, "entry", Ctor));
    B.CreateCall(Reg, {B.getInt32(static_cast<int>(Mode))});
    B.CreateRetVoid();
    appendToGlobalCtors(M, Ctor, 65535);
  }

  static void printStats(const Function &F, const FunctionStats &S) {
    errs() << "weft-yield: " << F.getName() << ": checks "
           << S.EntryChecks + S.LatchChecks << " (entry " << S.EntryChecks
           << ", latch " << S.LatchChecks << "); loops skipped: small-trip "
           << S.SkippedSmallTrip << ", checked-call " << S.SkippedCall
           << ", eh-pad " << S.SkippedEHPad << "\n";
  }
};

// Pipeline start: WEFT_NOYIELD functions must not be inlined, or their loops
// would be checked in their callers.
class WeftNoYieldNoInlinePass : public PassInfoMixin<WeftNoYieldNoInlinePass> {
public:
  static bool isRequired() { return true; }
  PreservedAnalyses run(Module &M, ModuleAnalysisManager &) {
    bool Changed = false;
    for (const Function *CF : noYieldFunctions(M)) {
      Function *F = const_cast<Function *>(CF);
      if (F->hasFnAttribute(Attribute::AlwaysInline) ||
          F->hasFnAttribute(Attribute::NoInline))
        continue;
      F->addFnAttr(Attribute::NoInline);
      Changed = true;
    }
    return Changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

void registerCallbacks(PassBuilder &PB) {
  PB.registerPipelineStartEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) {
        MPM.addPass(WeftNoYieldNoInlinePass());
      });
  PB.registerOptimizerLastEPCallback(
      [](ModulePassManager &MPM, OptimizationLevel) {
        MPM.addPass(WeftYieldPass());
      });
  PB.registerPipelineParsingCallback(
      [](StringRef Name, ModulePassManager &MPM,
         ArrayRef<PassBuilder::PipelineElement>) {
        if (Name == "weft-yield") {
          MPM.addPass(WeftYieldPass());
          return true;
        }
        if (Name == "weft-yield-noinline") {
          MPM.addPass(WeftNoYieldNoInlinePass());
          return true;
        }
        return false;
      });
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default")))
PassPluginLibraryInfo llvmGetPassPluginInfo() {
  if (!VersionOK) // already said why on stderr; API version 0 is rejected
    return {0, "weft-yield", "0", nullptr};
  return {LLVM_PLUGIN_API_VERSION, "weft-yield", LLVM_VERSION_STRING,
          registerCallbacks};
}
