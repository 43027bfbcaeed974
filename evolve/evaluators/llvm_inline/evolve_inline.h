// What a C++ inlining policy sees: one call site, as the evaluator's advisor plugin describes it.
//
// The candidate's policy.cpp includes this header and defines shouldInline. It needs no LLVM
// header for the plain numbers below; a policy that wants to walk the IR itself may include
// LLVM's headers and use `call`, `caller` and `callee` (the plugin is built against
// llvm-19-dev). The numbers mirror the Python route's features of the same names, so a rule
// written in either language makes the same decisions.
#pragma once

#include <cstdint>

namespace llvm {
class CallBase;
class Function;
} // namespace llvm

namespace evolve {

struct CallSite {
  llvm::CallBase &call;
  llvm::Function &caller;
  llvm::Function &callee; // always a definition: clang asks only about direct calls

  // LLVM's estimate of the cost of inlining (about 5 per instruction); below 0 means inlining
  // is expected to shrink the code.
  int64_t cost_estimate = 0;
  // LLVM's own advice for this call at the pipeline's level (-Oz by default): 1 to inline.
  int64_t inlining_default = 0;

  // Properties of the two functions before inlining (llvm::FunctionPropertiesInfo).
  int64_t callee_users = 0; // uses of the callee, plus 1 if it is visible outside the file
  int64_t caller_users = 0;
  int64_t callee_basic_block_count = 0;
  int64_t caller_basic_block_count = 0;
  int64_t callee_conditionally_executed_blocks = 0;
  int64_t caller_conditionally_executed_blocks = 0;
  int64_t callee_instructions = 0;
  int64_t caller_instructions = 0;
  int64_t nr_ctant_params = 0; // arguments that are constants

  // The summands of LLVM's inline-cost analysis (llvm/Analysis/InlineModelFeatureMaps.h).
  int64_t sroa_savings = 0;
  int64_t sroa_losses = 0;
  int64_t load_elimination = 0;
  int64_t call_penalty = 0;
  int64_t call_argument_setup = 0;
  int64_t load_relative_intrinsic = 0;
  int64_t lowered_call_arg_setup = 0;
  int64_t indirect_call_penalty = 0;
  int64_t jump_table_penalty = 0;
  int64_t case_cluster_penalty = 0;
  int64_t switch_default_dest_penalty = 0;
  int64_t switch_penalty = 0;
  int64_t unsimplified_common_instructions = 0;
  int64_t num_loops = 0;
  int64_t dead_blocks = 0;
  int64_t simplified_instructions = 0;
  int64_t constant_args = 0;
  int64_t constant_offset_ptr_args = 0;
  int64_t callsite_cost = 0;
  int64_t cold_cc_penalty = 0;
  int64_t last_call_to_static_bonus = 0;
  int64_t is_multiple_blocks = 0;
  int64_t nested_inlines = 0;
  int64_t nested_inline_cost_estimate = 0;
  int64_t threshold = 0;
};

} // namespace evolve

// Defined by the candidate: true inlines the call. Asked once per call site the inliner
// considers, in the order clang considers them.
bool shouldInline(const evolve::CallSite &site);
