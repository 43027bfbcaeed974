"""clang-19 asks should_inline at every call site its inliner considers, at -Os.

`features` maps each feature name to an int (see notes.md). Return True to inline the call.
The score is the .text size this leads to, relative to stock clang -Oz: lower is better.
"""

# EVOLVE-BLOCK-START
COST_LIMIT = 0  # @knob int -256..512
ONE_CALLER_BONUS = 0  # @knob int -256..512
LOOP_PENALTY = 0  # @knob int -256..512


def should_inline(f: dict[str, int]) -> bool:
    return f["cost_estimate"] + LOOP_PENALTY * f["num_loops"] < COST_LIMIT + ONE_CALLER_BONUS * (
        f["callee_users"] == 1
    )


# EVOLVE-BLOCK-END
