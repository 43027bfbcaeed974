"""clang-19 asks should_inline at every call site its inliner considers, at -Oz.

`features` maps each feature name to an int (see notes.md). Return True to inline the call.
The score is the .text size this leads to, relative to stock clang -Oz: lower is better.

The seed is LLVM's own -Oz rule, inline when the cost estimate is below 5 (its -Oz
threshold), with the other terms at zero: each knob moves that cost by one feature.
"""

# EVOLVE-BLOCK-START
COST_LIMIT = 5  # @knob int -64..128
LAST_CALL_BONUS = 15000  # @knob int 0..15000 log
EXTRA_USER_COST = 0  # @knob int -32..64
LOOP_COST = 0  # @knob int -64..64
BRANCH_COST = 0  # @knob int -32..64
CONSTANT_ARG_BONUS = 0  # @knob int -32..64

LLVM_LAST_CALL_BONUS = 15000  # what cost_estimate already subtracts for a last call


def should_inline(f: dict[str, int]) -> bool:
    cost = (
        f["cost_estimate"]
        + (LLVM_LAST_CALL_BONUS - LAST_CALL_BONUS) * f["last_call_to_static_bonus"]
        + EXTRA_USER_COST * (f["callee_users"] - 1)
        + LOOP_COST * (f["num_loops"] // 25)
        + BRANCH_COST * f["is_multiple_blocks"]
        - CONSTANT_ARG_BONUS * f["nr_ctant_params"]
    )
    return cost < COST_LIMIT


# EVOLVE-BLOCK-END
