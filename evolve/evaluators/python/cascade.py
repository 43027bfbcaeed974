"""The cascade of an OpenEvolve evaluator: which of its functions run, in what order, and
whether a candidate has done well enough so far for the next one to run.

The functions are read from evaluator.py's source without running it: the evaluator runs
only in the sandbox, beside the candidate, and the stage names must be known before a
stage runs (a stage that times out still needs its name). A top-level `def`, assignment
or import of the name counts, under `if` and `try` too.

The gate is OpenEvolve's: a stage's score is `combined_score` if there is one, else the
mean of the numeric metrics so far, and the next stage runs only if that reaches the
stage's threshold. A stage with no threshold (the list is shorter than the cascade) lets
the next one run; OpenEvolve would stop there instead. A cascade that stops at a gate is
not a failure: the candidate is scored on what it reached.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator, Mapping, Sequence

from evolve.plugin.taskpaths import TaskPathError

STAGES = ("evaluate_stage1", "evaluate_stage2", "evaluate_stage3")
SINGLE = "evaluate"
SCORE = "combined_score"


def functions(text: str, filename: str, *, cascade: bool) -> tuple[str, ...]:
    """The functions to call in order: evaluate_stage1.. while they are defined (when
    `cascade`), else evaluate. TaskPathError (param `evaluator`) if there is neither or the
    file does not parse."""
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as exc:
        raise TaskPathError("evaluator", f"{filename}:{exc.lineno}: {exc.msg}") from None
    defined = set(_names(tree.body))
    if cascade and STAGES[0] in defined:
        chain: list[str] = []
        for name in STAGES:
            if name not in defined:
                break
            chain.append(name)
        return tuple(chain)
    if SINGLE in defined:
        return (SINGLE,)
    wanted = f"{SINGLE} or {STAGES[0]}" if cascade else SINGLE
    raise TaskPathError("evaluator", f"{filename} defines no {wanted}(program_path)")


def stage_name(function: str) -> str:
    """`stage1` for evaluate_stage1, `evaluate` for evaluate: the stage's name in results."""
    return function.removeprefix("evaluate_")


def score(metrics: Mapping[str, float]) -> tuple[float, str] | None:
    """The number a gate compares, and what it is; None without any numeric metric."""
    if SCORE in metrics:
        return metrics[SCORE], SCORE
    if not metrics:
        return None
    return math.fsum(metrics.values()) / len(metrics), f"mean of {len(metrics)} metrics"


def gate(metrics: Mapping[str, float], index: int, thresholds: Sequence[float]) -> str | None:
    """Why the stage after stage `index` (0-based) must not run, or None if it may. NaN
    never reaches a threshold."""
    if index >= len(thresholds):
        return None
    threshold = thresholds[index]
    scored = score(metrics)
    if scored is None:
        return f"no numeric metric to compare with the threshold {threshold:g}"
    value, what = scored
    if value >= threshold:
        return None
    return f"score {value:.6g} ({what}) is below the threshold {threshold:g}"


def _names(body: list[ast.stmt]) -> Iterator[str]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield from ((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            yield from _names(node.body)
            yield from _names(getattr(node, "orelse", []))
            yield from _names(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                yield from _names(handler.body)
