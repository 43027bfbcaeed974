"""What a sandbox adds to every job, measured on a job that does nothing (`true`).

Warm: one sandbox runs WARMUP jobs, then RUNS timed ones; each time is the whole `run` call.
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


def warm(sandbox: Sandbox, runs: int) -> tuple[float, float]:
    """The p50 and p95 of `runs` jobs, after WARMUP untimed ones."""
    try:
        for _ in range(WARMUP):
            timed_job(sandbox)
        times = [timed_job(sandbox) for _ in range(runs)]
    finally:
        sandbox.close()
    percentiles = statistics.quantiles(times, n=100, method="inclusive")
    return statistics.median(times), percentiles[94]


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
    process = warm(ProcessSandbox(), args.runs)
    print(f"trivial job (`true`), {args.runs} warm runs after {WARMUP} warm-ups; times in ms")
    print(f"{'sandbox':<8} {'p50':>8} {'p95':>8} {'cold':>8}")
    print(f"{'process':<8} {process[0]:>8.2f} {process[1]:>8.2f} {'-':>8}")
    ok, why = docker_available()
    if not ok:
        print(f"docker: skipped, {why}")
        return
    p50, p95 = warm(DockerSandbox(), args.runs)
    cold_ms = cold(DockerSandbox)
    print(f"{'docker':<8} {p50:>8.2f} {p95:>8.2f} {cold_ms:>8.0f}")
    gap = p50 - process[0]
    verdict = "met" if gap <= TARGET_MS else "MISSED"
    print(f"docker p50 - process p50: {gap:.2f} ms (target: within {TARGET_MS:g} ms): {verdict}")


if __name__ == "__main__":
    main()
