"""How long one llvm_inline candidate takes, and what the inlining channel costs per decision.

Prints: the seed's time on the fast tier and on the whole cascade (fast + train + held-out,
each tier a decide run and a replay run), and per-decision overhead: replay through the
channel minus a stock compile of the same objects, divided by the decisions made. Each
figure is the median of --repeats runs with its spread. The replay cache is cleared
before each timed run, so every run compiles everything. --opt-level picks the pipeline
the seed joins (the evaluator's default, -Oz, unless given); the last lines are stock
clang at that level over -Oz, per tier.
Run: `.venv/bin/python bench/llvm_inline.py [--backend docker|process] [--repeats 3]
[--opt-level -Os]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from evolve.evaluators.llvm_inline import LLVMInlineEvaluator
from evolve.evaluators.llvm_inline.jobs import manifest, run_driver
from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.evaluators.llvm_inline.scoring import geomean_ratio
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits, Sandbox, open_sandbox
from evolve.plugin.stages import Runner

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "llvm_inline_size"


def timed(action: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median seconds and (max - min) over `repeats` calls."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times), max(times) - min(times)


def channel_overhead(evaluator: LLVMInlineEvaluator, sandbox: Sandbox) -> tuple[float, int]:
    """Microseconds per decision that the channel adds to a compile, over every tier."""
    run = Runner(sandbox, evaluator.limits)
    seed = Program.from_paths([TASK_DIR / "policy.py"], TASK_DIR)
    replayed, stock, decisions = 0.0, 0.0, 0
    for tier, units in evaluator.tiers.items():
        evaluator.replayed.clear()
        compiled = evaluator.decide_and_replay(run, seed, tier)
        replayed += sum(unit.seconds for unit in compiled)
        decisions += sum(len(unit.decisions) for unit in compiled)
        plan = manifest(
            evaluator.params,
            "stock",
            units,
            level=evaluator.params.opt_level,
            timeout_s=evaluator.limits.timeout_s,
        )
        stock += sum(unit.seconds for unit in run_driver(run, plan, evaluator.files[tier]))
    return (replayed - stock) / decisions * 1e6, decisions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="docker", choices=["docker", "process"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--opt-level", default=LLVMInlineParams().opt_level)
    args = parser.parse_args()
    sandbox = open_sandbox(args.backend)
    evaluator = LLVMInlineEvaluator({"opt_level": args.opt_level}, TASK_DIR)
    evaluator.limits = Limits(timeout_s=300)
    seed = Program.from_paths([TASK_DIR / "policy.py"], TASK_DIR)
    try:
        started = time.perf_counter()
        evaluator.prepare(seed, sandbox, TASK_DIR)
        print(
            f"prepare (corpus, baselines, seed's fast tier): {time.perf_counter() - started:.1f}s"
        )

        def cascade(tiers: tuple[str, ...]) -> None:
            evaluator.replayed.clear()
            result = evaluator.cascade(seed, sandbox, tiers)
            assert result.ok, result.feedback

        for label, tiers in (
            ("fast tier", ("fast_tier",)),
            ("full corpus", tuple(evaluator.tiers)),
        ):
            median, spread = timed(lambda t=tiers: cascade(t), args.repeats)
            print(f"one candidate, {label:<11}: {median:6.2f}s median, spread {spread:.2f}s")
        overhead, decisions = channel_overhead(evaluator, sandbox)
        print(f"channel overhead: {overhead:.0f} us per decision ({decisions} decisions)")
        baseline = evaluator.baseline
        assert baseline is not None
        for tier, units in evaluator.tiers.items():
            names = [unit.name for unit in units]
            ratio = geomean_ratio({n: baseline.stock[n] for n in names}, baseline.reference)
            print(f"stock {evaluator.params.opt_level} / -Oz on {tier}: {ratio:.4f}")
    finally:
        sandbox.close()


if __name__ == "__main__":
    main()
