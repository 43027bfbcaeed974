"""Candidates per minute and time to a first result: `evolve run TASK --wall-time S` run
whole, the way a new user runs the README's example, then read back from its store.

Each run gets a results folder of its own under a temporary directory. From the store: the
evaluations finished (new candidates and re-measurements apart), candidates per minute over
the run's wall time, the best speedup reached, how long the run took to first beat the seed
by 1.5x, and each stage's median seconds over the new candidates. The load average is printed
before and after each run, since every figure depends on what else the machine is doing.

`--code A --code B` alternates two checkouts (e.g. `git worktree add /tmp/old <commit>`),
each run with PYTHONPATH at its own tree, so that old and new code see the same drift of
the machine's load. The last lines are a table for docs/benchmarks.md.
Run: `.venv/bin/python bench/first_result.py [--code DIR ...] [--rounds 2] [--wall-time 180]
[--sandbox process] [--task tasks/matmul_c/task.yaml]`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from machine import load_average, machine, say, spread  # bench/machine.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
FIRST_RESULT = 1.5  # a "visible improvement": the seed beaten by this factor
STAGES = ("build", "check", "sanitize", "measure", "counters")


@dataclass
class Outcome:
    """What one run's store says about it."""

    evaluated: int  # new candidates evaluated (the seed included)
    remeasured: int
    wall_s: float
    best: float
    first_s: float | None  # seconds from the run's start to a speedup of FIRST_RESULT
    stages: dict[str, float] = field(default_factory=dict)  # median seconds per stage

    @property
    def per_minute(self) -> float:
        return 60 * self.evaluated / self.wall_s


def read_store(results: Path) -> Outcome:
    """The one run in `results`' store, read with plain SQL: the bench must read the old
    code's stores as well as the new."""
    with sqlite3.connect(results / "evolve.db") as db:
        created, wall_s = db.execute("select created_at, wall_s_used from runs").fetchone()
        rows = db.execute(
            "select kind, status, stages, metrics, finished_at from evaluations"
        ).fetchall()
    seconds: dict[str, list[float]] = defaultdict(list)
    best, first_s = 0.0, None
    for kind, status, stages, metrics, finished in sorted(rows, key=lambda row: row[4]):
        speedup = json.loads(metrics).get("speedup", 0.0) if status == "ok" else 0.0
        best = max(best, speedup)
        if first_s is None and speedup >= FIRST_RESULT:
            first_s = finished - created
        if kind == "evaluate":
            for stage in json.loads(stages):
                seconds[stage["name"]].append(stage["seconds"])
    evaluated = sum(kind == "evaluate" for kind, *_ in rows)
    return Outcome(
        evaluated=evaluated,
        remeasured=len(rows) - evaluated,
        wall_s=wall_s,
        best=best,
        first_s=first_s,
        stages={name: statistics.median(values) for name, values in seconds.items()},
    )


def run_once(code: Path, args: argparse.Namespace, results: Path) -> Outcome:
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, "-m", "evolve", "run", str(code / args.task), "--plain"]
    argv += ["--wall-time", str(args.wall_time), "--sandbox", args.sandbox]
    argv += ["--results", str(results)]
    done = subprocess.run(argv, cwd=code, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        say(f"    exit {done.returncode}: {done.stderr.strip()[-400:]}")
    return read_store(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, action="append", help="checkouts to alternate")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--wall-time", type=float, default=180)
    parser.add_argument("--sandbox", default="process")
    parser.add_argument("--task", default="tasks/matmul_c/task.yaml")
    args = parser.parse_args()
    codes = [path.resolve() for path in args.code or [ROOT]]

    say(f"{datetime.date.today()}  {machine()}  {load_average()}")
    say(f"{args.task}, --wall-time {args.wall_time:g} --sandbox {args.sandbox}")
    outcomes: dict[Path, list[Outcome]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="first-result-") as scratch:
        for round_number in range(args.rounds):
            for number, code in enumerate(codes):
                say(f"  round {round_number + 1}, {code}: {load_average()}")
                results = Path(scratch) / f"{round_number}-{number}"
                got = run_once(code, args, results)
                outcomes[code].append(got)
                first = f"{got.first_s:.0f} s" if got.first_s is not None else "never"
                stages = "  ".join(f"{n} {got.stages[n]:.2f}" for n in STAGES if n in got.stages)
                say(
                    f"    {got.evaluated} candidates + {got.remeasured} re-measurements in "
                    f"{got.wall_s:.0f} s: {got.per_minute:.1f}/min; best {got.best:.2f}x; "
                    f"{FIRST_RESULT:g}x at {first}; {load_average()}"
                )
                say(f"    median stage seconds: {stages}")
    say()
    say(f"| code | candidates/min | best speedup | first {FIRST_RESULT:g}x (s) | runs |")
    say("|---|---|---|---|---|")
    for code, got in outcomes.items():
        firsts = [o.first_s for o in got if o.first_s is not None]
        first = spread(firsts, ".0f") if firsts else "never"
        rates = spread([o.per_minute for o in got], ".1f")
        say(f"| {code} | {rates} | {spread([o.best for o in got])} | {first} | {len(got)} |")
    say()
    say("| stage | " + " | ".join(str(code) for code in outcomes) + " |")
    say("|---|" + "---|" * len(outcomes))
    for name in STAGES:
        cells = [
            spread([o.stages[name] for o in got if name in o.stages] or [0.0])
            for got in outcomes.values()
        ]
        say(f"| {name} median s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
