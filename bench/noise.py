"""How much of a c_kernel score is the machine's noise, and whether the simulated cost ranks
candidates as their timings do.

a. The seed against itself, 10 evaluations as the machine is and 10 with CPU-heavy load
   added (one busy process per core, started here and always stopped): every speedup should
   lie within 0.9-1.1, since the two are timed in pairs of calls made back to back. The
   load average printed beside each part says how quiet "as the machine is" was.
b. One fixed candidate evaluated 10 times: the spread (max - min) / median of its measured
   `time_s` beside that of cachegrind's `est_cycles`, which is deterministic.
c. 30 candidates drawn from the seed's knobs with a fixed RNG seed: Spearman's rank
   correlation between `time_s` and `est_cycles`, i.e. whether the simulated cost could
   stand in for timing on a machine too noisy to time on.

Each evaluation draws fresh inputs (its own `seed=`), as the engine's do. Nothing is saved;
the last lines are a table for docs/benchmarks.md. About 10 minutes on the 2-core development VM;
`--quick` shrinks every section.
Run: `.venv/bin/python bench/noise.py [--backend process] [--quick]`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from machine import cpu_model, load_average, say  # bench/machine.py, beside this script

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.plugin.knobs import Knob, Value, find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Sandbox, open_sandbox
from evolve.task.loading import LoadedTask, load_task

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("matmul_c", "stencil_c")
BAND = (0.9, 1.1)
COUNTED = {"counters": "always", "counter_tool": "cachegrind"}
QUIET = {"counters": "never"}
NATIVE = "-march=native"
CORRELATION_SEED = 20261122

# Part b's candidate per task: a sensible hand-tuned point, not the seed, so that the
# timing noise is that of a fast kernel (the seed's own noise is part a's).
FIXED: dict[str, dict[str, Value]] = {
    "matmul_c": {"cflags": "-O3", "LOOP_ORDER": "IKJ", "TILE_I": 64, "TILE_J": 256, "TILE_K": 64},
    "stencil_c": {"cflags": "-O3", "LOOP_ORDER": "IJ", "TILE_I": 64, "TILE_J": 1024},
}

# A busy process's body: it watches its parent, so even a bench killed by SIGKILL, which
# runs no cleanup, leaves no load behind for longer than one loop.
SPIN = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(200_000):
        pass
"""
NUMPY = """
import os
parent = os.getppid()
import numpy as np
a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
while os.getppid() == parent:
    a @ a
"""
LOADS = {"spin": SPIN, "numpy": NUMPY}


@dataclass
class Row:
    """One figure per task for the closing table; empty cells print as '-'."""

    label: str
    cells: dict[str, str] = field(default_factory=dict)


@contextmanager
def busy(kind: str, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` processes that keep a core each busy for as long as the block runs, stopped
    whatever way it is left. Single-threaded BLAS, so `count` means cores."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-c", LOADS[kind]],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,  # Ctrl-C reaches the bench, which stops them
                )
            )
        time.sleep(1.0)  # let them reach their loops before anything is timed
        dead = [p.pid for p in processes if p.poll() is not None]
        if dead:
            raise RuntimeError(f"load processes {dead} exited at start")
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def knob_names(program: Program) -> dict[str, int]:
    """Knob index by the name a reader knows it by: the #define's, or `cflags`."""
    names: dict[str, int] = {}
    for index, knob in enumerate(find_knobs(program)):
        line = program.files[knob.file].splitlines()[knob.line]
        defined = re.search(r"#define\s+(\w+)", line)
        names["cflags" if "cflags:" in line else defined[1] if defined else knob.label] = index
    return names


def with_knobs(program: Program, values: dict[str, Value]) -> Program:
    names = knob_names(program)
    return set_knobs(program, find_knobs(program), {names[k]: v for k, v in values.items()})


def describe(values: dict[str, Value]) -> str:
    return " ".join(f"{key}={value}" for key, value in values.items())


def draw_values(knob: Knob, rng: random.Random, native: bool) -> Value:
    """Choices uniformly (minus -march=native unless asked); sizes as powers of two from 4
    up to the knob's top, and the top itself: the region a tuner would search."""
    if knob.kind == "choice":
        return rng.choice([o for o in knob.options if native or NATIVE not in o])
    if knob.kind in ("int", "pow2"):
        top = int(knob.high)
        sizes = [2**k for k in range(2, 31) if knob.low <= 2**k <= top]
        return rng.choice(sorted({*sizes, top}))
    return rng.uniform(knob.low, knob.high)


def draw_candidates(
    seed: Program, count: int, rng: random.Random, native: bool
) -> list[tuple[str, Program]]:
    """`count` distinct knob settings of the seed, never the seed itself."""
    names = knob_names(seed)
    knobs = find_knobs(seed)
    seen = {seed.code_hash}
    drawn: list[tuple[str, Program]] = []
    for _ in range(100 * count):
        if len(drawn) == count:
            break
        values = {name: draw_values(knobs[index], rng, native) for name, index in names.items()}
        program = with_knobs(seed, values)
        if program.code_hash not in seen:
            seen.add(program.code_hash)
            drawn.append((describe(values), program))
    return drawn


def prepared(
    task: LoadedTask, sandbox: Sandbox, overrides: dict[str, Any]
) -> tuple[CKernelEvaluator, float]:
    """An evaluator as a worker holds it (the seed built and scored), and seconds taken."""
    started = time.perf_counter()
    evaluator = CKernelEvaluator({**task.spec.evaluator.params, **overrides}, task.root)
    evaluator.limits = task.spec.sandbox.limits()
    evaluator.prepare(task.seed, sandbox, task.root)
    return evaluator, time.perf_counter() - started


def first_line(result: EvalResult) -> str:
    """Why a result is of no use here: the failure, or the counters stage's own words."""
    if not result.ok:
        text = result.feedback.strip().splitlines()
        return f"{result.status}: {text[0] if text else ''}"[:160]
    for stage in result.stages:
        if stage.name == "counters":
            return (stage.feedback.strip().splitlines() or ["no counters"])[0][:160]
    return "no counters stage"


def spread(values: Sequence[float]) -> float:
    """(max - min) / median, as the evaluator reports spreads: the whole range."""
    return (max(values) - min(values)) / statistics.median(values)


def ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    data = np.asarray(values, dtype=np.float64)
    order = np.argsort(data, kind="stable")
    result = np.empty(len(data))
    result[order] = np.arange(1, len(data) + 1)
    for value in np.unique(data):
        tied = data == value
        result[tied] = result[tied].mean()
    return result


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's correlation of the ranks; NaN when either side is constant."""
    rx, ry = ranks(x), ranks(y)
    if len(rx) < 2 or rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def triple(values: Sequence[float]) -> str:
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


def seed_against_itself(
    evaluator: CKernelEvaluator, task: LoadedTask, sandbox: Sandbox, runs: int, label: str
) -> list[float]:
    """The seed's speedup over itself, one line per evaluation; failures are reported."""
    speedups: list[float] = []
    for seed in range(1, runs + 1):
        started = time.perf_counter()
        result = evaluator.evaluate(task.seed, sandbox, seed=seed)
        took = time.perf_counter() - started
        if not result.ok:
            say(f"    {label} seed={seed}: {first_line(result)}")
            continue
        m = result.metrics
        speedups.append(m["speedup"])
        say(
            f"    {label} seed={seed:<2} speedup {m['speedup']:.3f}  pairs' spread "
            f"{m['speedup_spread']:6.1%}  seed call {m['seed_time_s'] * 1e3:7.2f} ms "
            f"(spread {m['time_spread']:6.1%})  [{took:.1f} s]"
        )
    if speedups:
        low, high = BAND
        inside = sum(low <= s <= high for s in speedups)
        say(
            f"    {label}: min / median / max {triple(speedups)}; {inside} of {len(speedups)} "
            f"within {low}-{high}"
        )
    return speedups


def part_a(
    tasks: dict[str, LoadedTask], sandbox: Sandbox, args: argparse.Namespace, rows: list[Row]
) -> None:
    say(
        f"== a. the seed against itself, {args.runs} evaluations each, without then with added load"
    )
    quiet = Row("seed vs itself, no added load: speedup min / median / max")
    loaded = Row(
        f"seed vs itself, {args.load_processes} busy processes added ({args.load}): "
        "speedup min / median / max"
    )
    for name, task in tasks.items():
        evaluator, took = prepared(task, sandbox, QUIET)
        say(f"  {name}: prepared in {took:.1f} s; {load_average()}")
        speedups = seed_against_itself(evaluator, task, sandbox, args.runs, "no load")
        quiet.cells[name] = triple(speedups) if speedups else "failed"
        with busy(args.load, args.load_processes):
            say(f"  {name}: {args.load_processes} busy processes ({args.load}); {load_average()}")
            speedups = seed_against_itself(evaluator, task, sandbox, args.runs, "loaded ")
        loaded.cells[name] = triple(speedups) if speedups else "failed"
    rows += [quiet, loaded]


def part_b(
    name: str,
    task: LoadedTask,
    evaluator: CKernelEvaluator,
    sandbox: Sandbox,
    runs: int,
    rows: dict[str, Row],
) -> None:
    values = FIXED[name]
    program = with_knobs(task.seed, values)
    say(f"  {name}: one candidate, {describe(values)}, {runs} evaluations; {load_average()}")
    times: list[float] = []
    cycles: list[float] = []
    for seed in range(1, runs + 1):
        result = evaluator.evaluate(program, sandbox, seed=seed)
        if not result.ok or "est_cycles" not in result.metrics:
            say(f"    seed={seed}: {first_line(result)}")
            continue
        m = result.metrics
        times.append(m["time_s"])
        cycles.append(m["est_cycles"])
        say(
            f"    seed={seed:<2} time_s {m['time_s'] * 1e3:8.3f} ms  speedup {m['speedup']:6.2f}  "
            f"est_cycles {m['est_cycles']:.6g}"
        )
    if len(times) < 2:
        rows["time"].cells[name] = rows["cycles"].cells[name] = "failed"
        return
    say(
        f"    spread (max-min)/median over {len(times)}: time_s {spread(times):.1%}, "
        f"est_cycles {spread(cycles):.2%}"
    )
    rows["time"].cells[name] = f"{spread(times):.1%}"
    rows["cycles"].cells[name] = f"{spread(cycles):.2%}"


def part_c(
    name: str,
    task: LoadedTask,
    evaluator: CKernelEvaluator,
    sandbox: Sandbox,
    args: argparse.Namespace,
    rows: dict[str, Row],
) -> None:
    rng = random.Random(f"{CORRELATION_SEED}:{name}")
    drawn = draw_candidates(task.seed, args.candidates, rng, args.native)
    say(f"  {name}: {len(drawn)} candidates drawn (RNG seed {CORRELATION_SEED}); {load_average()}")
    times: list[float] = []
    cycles: list[float] = []
    speedups: list[float] = []
    estimated: list[float] = []
    skipped: list[str] = []
    for number, (label, program) in enumerate(drawn, start=1):
        result = evaluator.evaluate(program, sandbox, seed=1000 + number)
        m = result.metrics
        if not result.ok or "est_cycles" not in m:
            skipped.append(f"{label}: {first_line(result)}")
            say(f"    {number:>2} {label}: skipped, {first_line(result)}")
            continue
        times.append(m["time_s"])
        cycles.append(m["est_cycles"])
        speedups.append(m["speedup"])
        estimated.append(m["est_speedup"])
        say(
            f"    {number:>2} {label}: time_s {m['time_s'] * 1e3:8.2f} ms  speedup "
            f"{m['speedup']:6.2f}  est_cycles {m['est_cycles']:.4g}  est_speedup "
            f"{m['est_speedup']:.2f}"
        )
    rho_time = spearman(times, cycles)
    rho_speedup = spearman(speedups, estimated)
    say(
        f"    Spearman over {len(times)} counted: time_s vs est_cycles {rho_time:.3f}; "
        f"speedup vs est_speedup {rho_speedup:.3f}"
    )
    if skipped:
        say(f"    skipped ({len(skipped)}):")
        for line in skipped:
            say(f"      {line}")
    rows["rho_time"].cells[name] = f"{rho_time:.2f} ({len(times)} of {len(drawn)})"
    rows["rho_speedup"].cells[name] = f"{rho_speedup:.2f}"


def parts_b_and_c(
    tasks: dict[str, LoadedTask], sandbox: Sandbox, args: argparse.Namespace, rows: list[Row]
) -> None:
    say(
        f"== b. one candidate {args.runs} times, and c. {args.candidates} random candidates "
        "(counters: always, cachegrind, at each task's counter_sizes)"
    )
    if not args.native:
        say(
            f"  cflags choices with {NATIVE} are left out of c's draws: valgrind's cachegrind "
            "cannot decode AVX-512 (SIGILL on this CPU), so they would get no est_cycles"
        )
    table = {
        "time": Row(f"one candidate, {args.runs} evaluations: spread of time_s"),
        "cycles": Row(f"one candidate, {args.runs} evaluations: spread of est_cycles"),
        "rho_time": Row("Spearman rho, time_s vs est_cycles (candidates counted)"),
        "rho_speedup": Row("Spearman rho, speedup vs est_speedup"),
    }
    for name, task in tasks.items():
        evaluator, took = prepared(task, sandbox, COUNTED)
        sizes = evaluator.params.sizes
        counted = evaluator.counted_sizes
        say(f"  {name}: prepared in {took:.1f} s; timed at {sizes}, counted at {counted}")
        if "b" in args.parts:
            part_b(name, task, evaluator, sandbox, args.runs, table)
        if "c" in args.parts:
            part_c(name, task, evaluator, sandbox, args, table)
    rows += [row for row in table.values() if row.cells]


def print_table(rows: list[Row], names: Sequence[str]) -> None:
    say("| figure | " + " | ".join(names) + " |")
    say("|---" * (len(names) + 1) + "|")
    for row in rows:
        say(f"| {row.label} | " + " | ".join(row.cells.get(n, "-") for n in names) + " |")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM's default ends Python without running `finally`: the load would outlive us."""
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=("docker", "process"), default="docker")
    parser.add_argument("--runs", type=int, default=10, help="evaluations in parts a and b")
    parser.add_argument("--candidates", type=int, default=30, help="candidates in part c")
    parser.add_argument("--quick", action="store_true", help="3 runs and 8 candidates")
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task names")
    parser.add_argument("--parts", default="abc", help="which parts to run, e.g. `a` or `bc`")
    parser.add_argument("--load", choices=sorted(LOADS), default="spin", help="busy work")
    parser.add_argument(
        "--load-processes", type=int, default=os.cpu_count() or 1, help="default: one per core"
    )
    parser.add_argument("--native", action="store_true", help=f"draw {NATIVE} cflags in part c too")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.candidates = min(args.runs, 3), min(args.candidates, 8)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    names = [n for n in args.tasks.split(",") if n]
    unknown = sorted(set(names) - set(TASKS))
    if unknown:
        parser.error(f"unknown tasks {unknown}; known: {', '.join(TASKS)}")
    tasks = {name: load_task(ROOT / "tasks" / name / "task.yaml") for name in names}

    started = time.perf_counter()
    now = datetime.datetime.now().astimezone()
    say(f"bench/noise.py, {now:%Y-%m-%d %H:%M %Z}, sandbox {args.backend}")
    say(f"machine: {cpu_model()}, {os.cpu_count()} cores; {load_average()} at start")
    sandbox = open_sandbox(args.backend)
    rows: list[Row] = []
    try:
        if "a" in args.parts:
            part_a(tasks, sandbox, args, rows)
        if "b" in args.parts or "c" in args.parts:
            parts_b_and_c(tasks, sandbox, args, rows)
    finally:
        sandbox.close()
    say()
    say(f"summary ({args.backend} sandbox, {now:%Y-%m-%d}, {cpu_model()}, {os.cpu_count()} cores)")
    print_table(rows, names)
    minutes, seconds = divmod(time.perf_counter() - started, 60)
    say(f"wall time {int(minutes)} min {seconds:.0f} s; {load_average()} at the end")


if __name__ == "__main__":
    main()
