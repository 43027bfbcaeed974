// clang-19 asks shouldInline at every call site its inliner considers, at -Oz.
//
// `site` describes the call (evolve_inline.h; the fields are listed in notes.md). Return true
// to inline the call. The score is the .text size this leads to, relative to stock clang -Oz:
// lower is better. This file is compiled with clang++-19 against llvm-19-dev into a pass
// plugin together with the evaluator's advisor.
//
// The seed is LLVM's own -Oz rule, inline when the cost estimate is below 5 (its -Oz
// threshold), with the other terms at zero: each knob moves that cost by one feature.
#include "evolve_inline.h"

// EVOLVE-BLOCK-START
constexpr int64_t COST_LIMIT = 5;            // @knob int -64..128
constexpr int64_t LAST_CALL_BONUS = 15000;   // @knob int 0..15000 log
constexpr int64_t EXTRA_USER_COST = 0;       // @knob int -32..64
constexpr int64_t LOOP_COST = 0;             // @knob int -64..64
constexpr int64_t BRANCH_COST = 0;           // @knob int -32..64
constexpr int64_t CONSTANT_ARG_BONUS = 0;    // @knob int -32..64

constexpr int64_t LLVM_LAST_CALL_BONUS = 15000;  // what cost_estimate already subtracts

bool shouldInline(const evolve::CallSite &site) {
  int64_t cost = site.cost_estimate +
                 (LLVM_LAST_CALL_BONUS - LAST_CALL_BONUS) * site.last_call_to_static_bonus +
                 EXTRA_USER_COST * (site.callee_users - 1) + LOOP_COST * (site.num_loops / 25) +
                 BRANCH_COST * site.is_multiple_blocks - CONSTANT_ARG_BONUS * site.nr_ctant_params;
  return cost < COST_LIMIT;
}
// EVOLVE-BLOCK-END
