"""Size ratios and the feedback line that explains them to whoever edits the policy."""

from __future__ import annotations

import math
from collections.abc import Mapping

from evolve.evaluators.llvm_inline.jobs import Compiled


def geomean_ratio(sizes: Mapping[str, int], reference: Mapping[str, int]) -> float:
    """The geometric mean over units of size / reference size: each file counts once,
    however big, so a policy cannot win on one large file while losing on many."""
    logs = [math.log(sizes[name] / reference[name]) for name in sizes]
    return math.exp(sum(logs) / len(logs))


def compare_guards(
    compiled: list[Compiled], stock: Mapping[str, tuple[int | None, str]], level: str
) -> str | None:
    """Why a guard program's behaviour differs from the stock build's at `level`; None if
    none does."""
    for unit in compiled:
        if unit.guard is None:
            continue
        expected = stock[unit.name]
        if unit.guard != expected:
            code, output = unit.guard
            return (
                f"behaviour changed: the guard program {unit.name} exited {code} and printed:\n"
                f"{output[:800]}\nbut the stock {level} build exited {expected[0]} and printed:\n"
                f"{expected[1][:800]}"
            )
    return None


def describe(
    tier: str,
    compiled: list[Compiled],
    reference: Mapping[str, int],
    stock: Mapping[str, int],
    level: str,
    reference_level: str,
) -> str:
    """e.g. `train: 12 files, 0.9871 x -Oz (stock -Os 1.0412); inlined 31% of 1843
    decisions; worst vs -Oz: sqlean-text +4.1%, ...; best: zlib-example -3.0%, ...;
    clang 2.41 s CPU`."""
    sizes = {unit.name: unit.text_bytes for unit in compiled}
    ratio = geomean_ratio(sizes, reference)
    stock_ratio = geomean_ratio({name: stock[name] for name in sizes}, reference)
    decisions = "".join(unit.decisions for unit in compiled)
    share = decisions.count("1") / len(decisions) if decisions else 0.0
    change = sorted((sizes[name] / reference[name] - 1, name) for name in sizes)
    worst = ", ".join(f"{name} {delta:+.1%}" for delta, name in reversed(change[-3:]))
    best = ", ".join(f"{name} {delta:+.1%}" for delta, name in change[:3])
    return (
        f"{tier}: {len(sizes)} files, {ratio:.4f} x {reference_level} (stock {level} "
        f"{stock_ratio:.4f}); inlined {share:.0%} of {len(decisions)} decisions; "
        f"worst vs {reference_level}: {worst}; best: {best}; "
        f"clang {sum(unit.cpu_seconds for unit in compiled):.2f} s CPU"
    )
