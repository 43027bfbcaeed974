"""The inlining policy: clang-19 calls should_inline(features) at every call site its
inliner considers. Return True to inline. `features` maps LLVM's feature names to ints
(notes.md lists them); `inlining_default` is LLVM's own advice. Lower .text is better.
"""

# EVOLVE-BLOCK-START
THRESHOLD = 0  # @knob int -200..300
FOLLOW_LLVM = 1  # @knob int 0..1


def should_inline(features: dict[str, int]) -> bool:
    if FOLLOW_LLVM and not features["inlining_default"]:
        return False
    return features["cost_estimate"] < THRESHOLD


# EVOLVE-BLOCK-END
