"""Measure stage: time repeated calls in the harness and summarise them honestly."""

from __future__ import annotations

import math
import statistics

from evaluators.c_kernel.check import compare
from evaluators.c_kernel.oracle import Trial
from evaluators.c_kernel.params import CKernelParams
from evaluators.c_kernel.stages import Runner, StageFailed, require_ok


def parse_times(data: bytes | None, reps: int) -> list[float]:
    """The per-call seconds in times.txt; anything but `reps` positive numbers is a failure."""
    if data is None:
        raise StageFailed("the timed run wrote no times.txt")
    lines = data.decode(errors="replace").split()
    try:
        times = [float(line) for line in lines]
    except ValueError:
        raise StageFailed(f"times.txt holds something other than numbers: {lines[:5]}") from None
    if len(times) != reps:
        raise StageFailed(f"times.txt holds {len(times)} times, expected {reps}")
    if not all(math.isfinite(t) and t > 0 for t in times):
        raise StageFailed(f"times.txt holds non-positive or non-finite times: {times}")
    return times


def summarise(times: list[float], flops: float, baseline_s: float | None) -> dict[str, float]:
    """Median time, and `time_spread` = (max - min) / median: the whole range, no outlier hidden."""
    median = statistics.median(times)
    metrics = {
        "time_s": median,
        "time_spread": (max(times) - min(times)) / median,
        "gflops": flops / median / 1e9,
    }
    if baseline_s is not None:
        metrics["speedup"] = baseline_s / median
    return metrics


def measure(
    run: Runner, binary: bytes, trial: Trial, params: CKernelParams, baseline_s: float | None
) -> dict[str, float]:
    files = {"kernel": binary, "inputs.bin": trial.inputs}
    argv = ["./kernel", "time", str(params.reps), *params.size_args()]
    result = run(argv, files, collect=["times.txt", "output.bin"])
    require_ok(result, "the timed kernel")
    times = parse_times(result.files.get("times.txt"), params.reps)
    if sum(times) > result.wall_s:
        raise StageFailed(
            f"the reported times add up to {sum(times):.3g}s, more than the {result.wall_s:.3g}s "
            "the whole run took measured from outside: they are not real"
        )
    problem = compare(
        result.files.get("output.bin"), trial.expected, rtol=params.rtol, atol=params.atol
    )
    if problem:
        raise StageFailed(f"the last timed call's output is wrong: {problem}")
    return summarise(times, trial.flops, baseline_s)
