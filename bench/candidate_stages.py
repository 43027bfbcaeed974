"""Where a c_kernel candidate's seconds go: the real evaluator on a task's seed and a few knob
variants of it, each stage's seconds printed (build, check, sanitize, measure, counters),
with the sanitize stage split into its builds and runs by sanitizer.

Every sandbox job the evaluator starts is recorded through a thin wrapper around the real
sandbox, so the split is of the very jobs the stage ran, not a re-enactment of them.
`--counters always` counts every candidate, as the first candidates of a run are counted
(the budget in counter_budget.py skips most later ones); `--counters task` keeps the task's.
Nothing is saved; the last lines are a table for docs/benchmarks.md.
Run: `.venv/bin/python bench/candidate_stages.py [--task tasks/matmul_c/task.yaml]
[--backend process] [--variants 3] [--counters always]`.
"""

from __future__ import annotations

import argparse
import datetime
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from machine import load_average, machine, say  # bench/machine.py, beside this script
from noise import draw_candidates  # bench/noise.py: knob settings a tuner would try

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits, RunResult, Sandbox, open_sandbox
from evolve.task.loading import load_task

ROOT = Path(__file__).resolve().parents[1]
VARIANT_SEED = 20261129
STAGES = ("build", "check", "sanitize", "measure", "counters")


@dataclass
class Recording:
    """A sandbox that runs every job in the real one and keeps (label, wall seconds)."""

    inner: Sandbox
    jobs: list[tuple[str, float]] = field(default_factory=list)
    sanitizer: str = ""  # the instrumentation of the last kernel built, for its runs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __hash__(self) -> int:
        return id(self)

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        result = self.inner.run(argv, files=files, limits=limits, collect=collect)
        self.jobs.append((self._label(argv), result.wall_s))
        return result

    def _label(self, argv: Sequence[str]) -> str:
        words = " ".join(argv)
        if "-fsanitize=memory" in words:
            self.sanitizer = "memory"
        elif "-fsanitize=address" in words:
            self.sanitizer = "address+undefined"
        elif " -c " in words:
            self.sanitizer = ""
        if " -c " in words:
            return f"compile {self.sanitizer}".strip()
        if " -o kernel" in words:
            return f"link {self.sanitizer}".strip()
        if "valgrind" in words or "perf" in argv[:1]:
            return "counted run"
        if "python" in argv[0]:
            return "timer"
        return f"run {self.sanitizer}".strip()


def evaluate(
    evaluator: CKernelEvaluator, recording: Recording, program: Program, seed: int
) -> tuple[dict[str, float], dict[str, float], str]:
    """Stage seconds, sanitize-stage job seconds by label, and the outcome's first line."""
    recording.jobs.clear()
    started = time.perf_counter()
    result = evaluator.evaluate(program, recording, seed=seed)  # type: ignore[arg-type]
    stages = {s.name: s.seconds for s in result.stages}
    stages["total"] = time.perf_counter() - started
    jobs: dict[str, float] = defaultdict(float)
    for label, seconds in recording.jobs:
        jobs[label] += seconds
    outcome = (
        f"speedup {result.metrics['speedup']:.2f}"
        if result.ok
        else f"{result.status}: {(result.feedback.strip().splitlines() or [''])[0][:80]}"
    )
    return stages, dict(jobs), outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", type=Path, default=ROOT / "tasks/matmul_c/task.yaml")
    parser.add_argument("--backend", default="process")
    parser.add_argument("--variants", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="evaluations of each program")
    parser.add_argument("--counters", choices=("always", "task"), default="always")
    args = parser.parse_args()

    task = load_task(args.task)
    overrides: dict[str, Any] = {} if args.counters == "task" else {"counters": "always"}
    say(f"{datetime.date.today()}  {machine()}  {load_average()}")
    say(f"task {task.spec.name}, backend {args.backend}, counters {args.counters}")
    recording = Recording(open_sandbox(args.backend))
    started = time.perf_counter()
    evaluator = CKernelEvaluator({**task.spec.evaluator.params, **overrides}, task.root)
    evaluator.limits = task.spec.sandbox.limits()
    evaluator.prepare(task.seed, recording, task.root)  # type: ignore[arg-type]
    say(f"prepare (seed built, seed counted): {time.perf_counter() - started:.1f} s")

    programs = [("seed", task.seed)]
    programs += draw_candidates(task.seed, args.variants, random.Random(VARIANT_SEED), False)
    totals: dict[str, list[float]] = defaultdict(list)
    seed = 1
    for _ in range(args.rounds):
        for label, program in programs:
            stages, jobs, outcome = evaluate(evaluator, recording, program, seed)
            seed += 1
            for name in (*STAGES, "total"):
                totals[name].append(stages.get(name, 0.0))
            split = ", ".join(f"{k} {v:.2f}" for k, v in sorted(jobs.items()))
            say(f"  {label[:60]}: {outcome}; {load_average()}")
            shown = [f"{n} {stages[n]:.2f}" for n in (*STAGES, "total") if n in stages]
            say("    " + "  ".join(shown))
            say(f"    jobs: {split}")
    say()
    say("| stage | median s | min-max s |")
    say("|---|---|---|")
    for name in (*STAGES, "total"):
        values = totals[name]
        say(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |")


if __name__ == "__main__":
    main()
