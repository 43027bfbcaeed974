"""What a sandbox adds to every job, measured on a job that does nothing (`true`).

Warm: each sandbox runs WARMUP jobs, then RUNS timed ones, alternating with the others; each
time is the whole `run` call. `process` is the plain process backend, `bwrap` the same in
namespaces (each job starts bubblewrap and an init in Python).
Cold (docker only): a fresh sandbox's first job, container creation and start included.
The product target: a warm Docker job's p50 within 100 ms of the process sandbox's.
Run: `.venv/bin/python bench/sandbox.py [--runs 100]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from evolve.sandbox import Limits, Sandbox
from sandboxes import DockerSandbox, ProcessSandbox, docker_available
from sandboxes.isolation import UNISOLATED, detect

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
        return
    gap = found["docker"][0] - found["process"][0]
    verdict = "met" if gap <= TARGET_MS else "MISSED"
    print(f"docker p50 - process p50: {gap:.2f} ms (target: within {TARGET_MS:g} ms): {verdict}")


if __name__ == "__main__":
    main()
