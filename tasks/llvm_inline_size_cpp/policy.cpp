// clang-19 asks shouldInline at every call site its inliner considers, at -Os.
//
// `site` describes the call (evolve_inline.h; the fields are listed in notes.md). Return true
// to inline the call. The score is the .text size this leads to, relative to stock clang -Oz:
// lower is better. This file is compiled with clang++-19 against llvm-19-dev into a pass
// plugin together with the evaluator's advisor.
#include "evolve_inline.h"

// EVOLVE-BLOCK-START
constexpr int64_t COST_LIMIT = 0;        // @knob int -256..512
constexpr int64_t ONE_CALLER_BONUS = 0;  // @knob int -256..512
constexpr int64_t LOOP_PENALTY = 0;      // @knob int -256..512

bool shouldInline(const evolve::CallSite &site) {
  int64_t limit = COST_LIMIT + ONE_CALLER_BONUS * (site.callee_users == 1);
  return site.cost_estimate + LOOP_PENALTY * site.num_loops < limit;
}
// EVOLVE-BLOCK-END
