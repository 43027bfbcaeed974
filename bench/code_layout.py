"""What one code_layout candidate costs once the profile is cached, and where each layout
of the table in docs/benchmarks.md stands.

Prints, for one task (sqlite or lua): the seed's whole evaluation (median of --repeats,
with its spread), split into the candidate's run (order()), and the trusted run: the link,
callgrind on every workload, and the rest (native runs for the guard and wall time, perf,
files in and out). Then one row per layout (the linker's default order, lld's hfsort and
cdsort from the same profile, the seed, and each --best file) with the training and
held-out ratios to the default order of I1 misses, LL instruction misses, 64 B lines and
4 KiB pages. The objects, profile and reference layouts come from the user cache (made
first if absent, which the first line times).
Run: `.venv/bin/python bench/code_layout.py --program sqlite [--best results/RUN/best/layout.py]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from machine import load_average, machine, say  # bench/machine.py, beside this script

from evolve.evaluators.code_layout import CodeLayoutEvaluator
from evolve.evaluators.code_layout.ready import SPLITS
from evolve.evaluators.code_layout.scoring import MEASURES, Measured, ratios
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits, open_sandbox

ROOT = Path(__file__).resolve().parent.parent


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s (spread {max(values) - min(values):.2f} s)"


def row(label: str, measured: Measured, evaluator: CodeLayoutEvaluator) -> str:
    assert evaluator.ready is not None
    cells = []
    for suffix in MEASURES:
        for split in SPLITS:
            names = list(evaluator.workloads[split])
            cells.append(
                f"{ratios(measured, evaluator.ready.baseline, names)[f'{suffix}_ratio']:.4f}"
            )
    return f"| {label} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default="sqlite", choices=["sqlite", "lua"])
    parser.add_argument("--backend", default="docker", choices=["docker", "process"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--best", type=Path, action="append", default=[])
    args = parser.parse_args()
    task = ROOT / "tasks" / f"code_layout_{args.program}"
    say(f"machine: {machine()}, {load_average()}, sandbox {args.backend}")
    sandbox = open_sandbox(args.backend)
    evaluator = CodeLayoutEvaluator({"program": args.program}, task)
    evaluator.limits = Limits(timeout_s=600)
    seed = Program.from_paths([task / "layout.py"], task)
    try:
        started = time.perf_counter()
        evaluator.prepare(seed, sandbox, task)
        say(f"prepare (build, profile, references if not cached; the seed): "
            f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        whole, order, link, simulate, rest = [], [], [], [], []
        for _ in range(args.repeats):
            evaluator.measured.clear()
            started = time.perf_counter()
            result = evaluator.evaluate(seed, sandbox, seed=0)
            whole.append(time.perf_counter() - started)
            assert result.ok, result.feedback
            stages = {stage.name: stage.seconds for stage in result.stages}
            (measured,) = evaluator.measured.values()
            callgrind = sum(w["callgrind_s"] for w in measured.workloads.values())
            order.append(stages["order"])
            link.append(measured.link_s)
            simulate.append(callgrind)
            rest.append(stages["measure"] - measured.link_s - callgrind)
        counts = {split: len(evaluator.workloads[split]) for split in SPLITS}
        say(f"one candidate, {counts['train']} training and {counts['heldout']} held-out "
            f"workloads: {spread(whole)}")  # fmt: skip
        say(f"  order() in the sandbox:       {spread(order)}")
        say(f"  link (ld.lld-19):             {spread(link)}")
        say(f"  callgrind, every workload:    {spread(simulate)}")
        say(f"  native runs, files, the rest: {spread(rest)}")
        say()
        header = " | ".join(f"{s} {split}" for s in MEASURES for split in SPLITS)
        say(f"| layout | {header} |")
        say("|---" * (1 + len(MEASURES) * len(SPLITS)) + "|")
        assert evaluator.ready is not None
        say(row("default order", evaluator.ready.baseline, evaluator))
        for label, measured in evaluator.ready.lld_sorts.items():
            say(row(label, measured, evaluator))
        for label, path in [("seed", task / "layout.py"), *((str(p), p) for p in args.best)]:
            program = Program.from_paths([path], path.parent)
            result = evaluator.evaluate(program, sandbox, seed=0)
            assert result.ok, result.feedback
            say(row(label, list(evaluator.measured.values())[-1], evaluator))
    finally:
        sandbox.close()


if __name__ == "__main__":
    main()
