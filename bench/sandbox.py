"""What a sandbox adds to every job, measured on a job that does nothing (`true`), and what
the python evaluator adds to every evaluation beyond the evaluator's own time.

Warm: each sandbox runs WARMUP jobs, then RUNS timed ones, alternating with the others; each
time is the whole `run` call. `process` is the plain process backend, `bwrap` the same in
namespaces (each job starts bubblewrap and an init in Python).
Cold (docker only): a fresh sandbox's first job, container creation and start included.
The product target: a warm Docker job's p50 within 100 ms of the process sandbox's.

Evaluations: a whole `PythonEvaluator.evaluate` of an OpenEvolve evaluator whose
`evaluate()` returns a constant (`trivial`), and of one that imports numpy and scipy at its
top (`numpy+scipy`, where both are installed for the sandbox's Python: Docker's image gets
Debian's python3-scipy), on each isolated sandbox, which keeps the evaluator imported
between evaluations. The evaluator's own call
takes microseconds, so the time is the overhead. Target: p50 at most 10 ms.
Run: `.venv/bin/python bench/sandbox.py [--runs 100]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from evolve.evaluators.python import PythonEvaluator
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.sandboxes import DockerSandbox, ProcessSandbox, docker_available
from evolve.sandboxes.images.derived import build_derived
from evolve.sandboxes.isolation import UNISOLATED, detect

WARMUP = 5
COLD_SAMPLES = 5
TARGET_MS = 100.0
LIMITS = Limits()


def timed_job(sandbox: Sandbox) -> float:
    """Milliseconds for one trivial job, which must succeed: a failure would time nothing."""
    started = time.perf_counter()
    result = sandbox.run(["true"], files={}, limits=LIMITS)
    elapsed = (time.perf_counter() - started) * 1e3
    assert result.ok, result.stderr
    return elapsed


def warm(sandboxes: dict[str, Sandbox], runs: int) -> dict[str, tuple[float, float]]:
    """The p50 and p95 of each sandbox's `runs` jobs, after WARMUP untimed ones; the jobs
    alternate between the sandboxes, so a noisy spell on the machine hits them all alike."""
    times: dict[str, list[float]] = {name: [] for name in sandboxes}
    try:
        for _ in range(WARMUP):
            for sandbox in sandboxes.values():
                timed_job(sandbox)
        for _ in range(runs):
            for name, sandbox in sandboxes.items():
                times[name].append(timed_job(sandbox))
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()
    found = {}
    for name, taken in times.items():
        percentiles = statistics.quantiles(taken, n=100, method="inclusive")
        found[name] = (statistics.median(taken), percentiles[94])
    return found


def cold(make: Callable[[], Sandbox]) -> float:
    """The median over COLD_SAMPLES fresh sandboxes of their first job."""
    samples = []
    for _ in range(COLD_SAMPLES):
        sandbox = make()
        try:
            samples.append(timed_job(sandbox))
        finally:
            sandbox.close()
    return statistics.median(samples)


EVALUATORS = {
    "trivial": "def evaluate(program_path):\n    return {'combined_score': 1.0}\n",
    "numpy+scipy": (
        "import numpy\nimport scipy.optimize\n\n"
        "def evaluate(program_path):\n    return {'combined_score': float(numpy.float64(1))}\n"
    ),
}
EVALUATION_TARGET_MS = 10.0
SEED = Program({"initial_program.py": "# EVOLVE-BLOCK-START\nX = 1\n# EVOLVE-BLOCK-END\n"})


def evaluations(
    backends: dict[str, Callable[[], Sandbox]], runs: int
) -> dict[tuple[str, str], list[float]]:
    """Milliseconds per whole evaluation, by (sandbox, evaluator), alternated. Each pair has a
    sandbox of its own, as each evaluation worker of a run has; an evaluator the sandbox's
    Python cannot import is left out."""
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as root:
        pairs = {}
        for name, source in EVALUATORS.items():
            folder = Path(root, name)
            folder.mkdir()
            (folder / "evaluator.py").write_text(source)
            for box_name, make in backends.items():
                pairs[box_name, name] = (PythonEvaluator({}, folder), make())
        try:
            for _ in range(WARMUP):
                for pair, (evaluator, box) in pairs.items():
                    if evaluator.evaluate(SEED, box, seed=0).ok:
                        times.setdefault(pair, [])
            for _ in range(runs):
                for pair in times:
                    evaluator, box = pairs[pair]
                    started = time.perf_counter()
                    result = evaluator.evaluate(SEED, box, seed=0)
                    times[pair].append((time.perf_counter() - started) * 1e3)
                    assert result.ok, result.feedback
        finally:
            for _, box in pairs.values():
                box.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100, help="timed warm jobs per sandbox")
    args = parser.parse_args()
    sandboxes: dict[str, Sandbox] = {"process": ProcessSandbox(UNISOLATED)}
    isolation = detect()
    if isolation.tool is not None:
        sandboxes["bwrap"] = ProcessSandbox(isolation)
    ok, why = docker_available()
    if ok:
        sandboxes["docker"] = DockerSandbox()
    isolated: dict[str, Callable[[], Sandbox]] = {}
    if isolation.tool is not None:
        isolated["bwrap"] = lambda: ProcessSandbox(isolation)
    if ok:  # Debian's scipy added to the sandbox image, as a task's `sandbox.packages` would
        image = build_derived(None, ["python3-scipy"], progress=print)
        isolated["docker"] = lambda: DockerSandbox(image)
    evaluated = evaluations(isolated, args.runs)
    found = warm(sandboxes, args.runs)
    print(f"trivial job (`true`), {args.runs} warm runs each, alternated, after {WARMUP} warm-ups")
    print(f"{'sandbox':<8} {'p50 ms':>8} {'p95 ms':>8} {'cold ms':>8}")
    for name, (p50, p95) in found.items():
        cold_ms = f"{cold(DockerSandbox):.0f}" if name == "docker" else "-"
        print(f"{name:<8} {p50:>8.2f} {p95:>8.2f} {cold_ms:>8}")
    if isolation.tool is None:
        print(f"bwrap: skipped, {isolation.detail}")
    if not ok:
        print(f"docker: skipped, {why}")
    print(f"\nwhole python evaluations, {args.runs} each, alternated, after {WARMUP} warm-ups")
    print(f"{'sandbox':<8} {'evaluator':<12} {'p50 ms':>8} {'p95 ms':>8}  target p50 <= 10 ms")
    for (box_name, name), taken in evaluated.items():
        p50 = statistics.median(taken)
        p95 = statistics.quantiles(taken, n=100, method="inclusive")[94]
        verdict = "met" if p50 <= EVALUATION_TARGET_MS else "MISSED"
        print(f"{box_name:<8} {name:<12} {p50:>8.2f} {p95:>8.2f}  {verdict}")
    for box_name in isolated:
        for name in EVALUATORS:
            if (box_name, name) not in evaluated:
                print(f"{box_name:<8} {name:<12} skipped: the sandbox's Python cannot import it")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not ok:
        return
    gap = found["docker"][0] - found["process"][0]
    verdict = "met" if gap <= TARGET_MS else "MISSED"
    print(f"docker p50 - process p50: {gap:.2f} ms (target: within {TARGET_MS:g} ms): {verdict}")


if __name__ == "__main__":
    main()
