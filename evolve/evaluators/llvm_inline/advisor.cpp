// The trusted half of the C++ inlining policy: an llvm::InlineAdvisor that asks the
// candidate's shouldInline (evolve_inline.h) at every call site, loaded into clang-19 with
// -fpass-plugin. Registering PluginInlineAdvisorAnalysis is enough: the inliner's
// InlineAdvisorAnalysis builds the plugin's advisor instead of its own.
//
// Only the decide run loads this plugin. It writes each answer, '0' or '1', to the file named
// by EVOLVE_INLINE_DECISIONS, and the trusted replay run feeds that string back through
// clang's interactive ML channel. So the advisor asks exactly where MLInlineAdvisor
// (LLVM 19) consults its model and skips what it skips: unreachable call sites, mandatory
// (always/never inline) and recursive calls, calls LLVM cannot inline, and every call once
// the module has grown past twice its size. If the two ever disagree, the replay asks a
// different number of questions and the candidate fails with "do not replay".
#include "evolve_inline.h"

#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/BlockFrequencyInfo.h"
#include "llvm/Analysis/FunctionPropertiesAnalysis.h"
#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Analysis/InlineCost.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/ProfileSummaryInfo.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

using namespace llvm;

namespace {

// MLInlineAdvisor's -ml-advisor-size-increase-threshold: past this growth it stops asking.
constexpr double SizeIncreaseThreshold = 2.0;

// The decisions file, opened on first use; written through at once because clang exits
// without running destructors.
void recordDecision(bool Inline) {
  static std::FILE *Log = [] {
    const char *Path = std::getenv("EVOLVE_INLINE_DECISIONS");
    return Path ? std::fopen(Path, "w") : nullptr;
  }();
  if (Log) {
    std::fputc(Inline ? '1' : '0', Log);
    std::fflush(Log);
  }
}

class EvolveAdvisor;

// Advice that keeps the caller's function properties and the module's size up to date after
// an inlining, with the same analysis updates as MLInlineAdvice: those updates decide which
// call sites later count as reachable, and so which questions are asked.
class TrackedAdvice : public InlineAdvice {
public:
  TrackedAdvice(EvolveAdvisor &Owner, CallBase &CB, OptimizationRemarkEmitter &ORE,
                bool Inline);

  Function &caller() const { return *Caller; }
  Function &callee() const { return *Callee; }
  const int64_t CallerSize;
  const int64_t CalleeSize;
  std::optional<FunctionPropertiesUpdater> Updater;

private:
  void recordInliningImpl() override;
  void recordInliningWithCalleeDeletedImpl() override;
  void recordUnsuccessfulInliningImpl(const InlineResult &Result) override;

  EvolveAdvisor &Owner;
  const FunctionPropertiesInfo PreInlineCallerProperties;
};

class EvolveAdvisor : public InlineAdvisor {
public:
  EvolveAdvisor(Module &M, FunctionAnalysisManager &FAM, InlineParams Params, InlineContext IC)
      : InlineAdvisor(M, FAM, IC), Params(Params) {
    for (Function &F : M)
      if (!F.isDeclaration())
        InitialSize += size(F);
    CurrentSize = InitialSize;
  }

  // Function properties as of the last inlining, cached between them like MLInlineAdvisor's.
  FunctionPropertiesInfo &properties(Function &F) {
    auto [Entry, Added] = Properties.try_emplace(&F);
    if (Added)
      Entry->second = FAM.getResult<FunctionPropertiesAnalysis>(F);
    return Entry->second;
  }
  int64_t size(Function &F) { return properties(F).TotalInstructionCount; }

  void inlined(TrackedAdvice &Advice, bool CalleeDeleted) {
    PreservedAnalyses Kept = PreservedAnalyses::all();
    Kept.abandon<FunctionPropertiesAnalysis>();
    Kept.abandon<DominatorTreeAnalysis>(); // LLVM 19's MLInlineAdvisor drops it; 20 updates it
    Kept.abandon<LoopAnalysis>();
    FAM.invalidate(Advice.caller(), Kept);
    Advice.Updater->finish(FAM);
    int64_t After = size(Advice.caller()) + (CalleeDeleted ? 0 : Advice.CalleeSize);
    CurrentSize += After - (Advice.CallerSize + Advice.CalleeSize);
    if (CurrentSize > SizeIncreaseThreshold * InitialSize)
      Stopped = true;
  }

  void onPassEntry(LazyCallGraph::SCC *SCC) override {
    if (SCC && !Stopped)
      Properties.clear();
  }
  void onPassExit(LazyCallGraph::SCC *SCC) override { Properties.clear(); }

private:
  std::unique_ptr<InlineAdvice> getAdviceImpl(CallBase &CB) override;
  bool defaultAdvice(CallBase &CB, OptimizationRemarkEmitter &ORE);
  std::unique_ptr<InlineAdvice> plain(CallBase &CB, bool Inline) {
    return std::make_unique<InlineAdvice>(this, CB, getCallerORE(CB), Inline);
  }

  InlineParams Params;
  std::map<const Function *, FunctionPropertiesInfo> Properties; // stable references
  int64_t InitialSize = 0;
  int64_t CurrentSize = 0;
  bool Stopped = false;
};

TrackedAdvice::TrackedAdvice(EvolveAdvisor &Owner, CallBase &CB,
                             OptimizationRemarkEmitter &ORE, bool Inline)
    : InlineAdvice(&Owner, CB, ORE, Inline), CallerSize(Owner.size(*Caller)),
      CalleeSize(Owner.size(*Callee)), Owner(Owner),
      PreInlineCallerProperties(Owner.properties(*Caller)) {
  if (Inline)
    Updater.emplace(Owner.properties(*Caller), CB);
}

void TrackedAdvice::recordInliningImpl() { Owner.inlined(*this, false); }

void TrackedAdvice::recordInliningWithCalleeDeletedImpl() { Owner.inlined(*this, true); }

void TrackedAdvice::recordUnsuccessfulInliningImpl(const InlineResult &) {
  Owner.properties(*Caller) = PreInlineCallerProperties;
}

// LLVM's own advice, as the default inliner would give it with the pipeline's parameters.
bool EvolveAdvisor::defaultAdvice(CallBase &CB, OptimizationRemarkEmitter &ORE) {
  Function &Caller = *CB.getCaller();
  ProfileSummaryInfo *PSI = FAM.getResult<ModuleAnalysisManagerFunctionProxy>(Caller)
                                .getCachedResult<ProfileSummaryAnalysis>(M);
  auto GetAC = [&](Function &F) -> AssumptionCache & {
    return FAM.getResult<AssumptionAnalysis>(F);
  };
  auto GetBFI = [&](Function &F) -> BlockFrequencyInfo & {
    return FAM.getResult<BlockFrequencyAnalysis>(F);
  };
  auto GetTLI = [&](Function &F) -> const TargetLibraryInfo & {
    return FAM.getResult<TargetLibraryAnalysis>(F);
  };
  auto GetCost = [&](CallBase &Call) {
    auto &TTI = FAM.getResult<TargetIRAnalysis>(*Call.getCalledFunction());
    return getInlineCost(Call, Params, TTI, GetAC, GetTLI, GetBFI, PSI, nullptr);
  };
  return shouldInline(CB, GetCost, ORE, Params.EnableDeferral.value_or(false)).has_value();
}

std::unique_ptr<InlineAdvice> EvolveAdvisor::getAdviceImpl(CallBase &CB) {
  Function &Caller = *CB.getCaller();
  Function &Callee = *CB.getCalledFunction();
  if (!FAM.getResult<DominatorTreeAnalysis>(Caller).isReachableFromEntry(CB.getParent()))
    return plain(CB, false);
  auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(Caller);
  auto Kind = getMandatoryKind(CB, FAM, ORE);
  if (Kind == MandatoryInliningKind::Never || &Caller == &Callee)
    return plain(CB, false);
  bool Mandatory = Kind == MandatoryInliningKind::Always;
  if (Stopped)
    return plain(CB, Mandatory);

  auto GetAC = [&](Function &F) -> AssumptionCache & {
    return FAM.getResult<AssumptionAnalysis>(F);
  };
  auto &TTI = FAM.getResult<TargetIRAnalysis>(Callee);
  int Estimate = 0;
  if (!Mandatory) {
    std::optional<int> Inlinable = getInliningCostEstimate(CB, TTI, GetAC);
    if (!Inlinable)
      return plain(CB, false);
    Estimate = *Inlinable;
  }
  std::optional<InlineCostFeatures> Features = getInliningCostFeatures(CB, TTI, GetAC);
  if (!Features)
    return plain(CB, false);
  if (Mandatory)
    return std::make_unique<TrackedAdvice>(*this, CB, ORE, true);

  evolve::CallSite Site{CB, Caller, Callee};
  Site.cost_estimate = Estimate;
  Site.inlining_default = defaultAdvice(CB, ORE);
  const FunctionPropertiesInfo &CallerBefore = properties(Caller);
  const FunctionPropertiesInfo &CalleeBefore = properties(Callee);
  Site.callee_users = CalleeBefore.Uses;
  Site.caller_users = CallerBefore.Uses;
  Site.callee_basic_block_count = CalleeBefore.BasicBlockCount;
  Site.caller_basic_block_count = CallerBefore.BasicBlockCount;
  Site.callee_conditionally_executed_blocks =
      CalleeBefore.BlocksReachedFromConditionalInstruction;
  Site.caller_conditionally_executed_blocks =
      CallerBefore.BlocksReachedFromConditionalInstruction;
  Site.callee_instructions = CalleeBefore.TotalInstructionCount;
  Site.caller_instructions = CallerBefore.TotalInstructionCount;
  for (const Use &Arg : CB.args())
    Site.nr_ctant_params += isa<Constant>(Arg);
#define EVOLVE_COPY_FEATURE(TYPE, SHAPE, NAME, DOC)                                          \
  Site.NAME = (*Features)[static_cast<size_t>(InlineCostFeatureIndex::NAME)];
  INLINE_COST_FEATURE_ITERATOR(EVOLVE_COPY_FEATURE)
#undef EVOLVE_COPY_FEATURE

  bool Inline = ::shouldInline(Site);
  recordDecision(Inline);
  return std::make_unique<TrackedAdvice>(*this, CB, ORE, Inline);
}

InlineAdvisor *makeAdvisor(Module &M, FunctionAnalysisManager &FAM, InlineParams Params,
                           InlineContext IC) {
  return new EvolveAdvisor(M, FAM, Params, IC);
}

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "EvolveInlineAdvisor", LLVM_VERSION_STRING,
          [](PassBuilder &PB) {
            PB.registerAnalysisRegistrationCallback([](ModuleAnalysisManager &MAM) {
              MAM.registerPass([] { return PluginInlineAdvisorAnalysis(makeAdvisor); });
            });
          }};
}
