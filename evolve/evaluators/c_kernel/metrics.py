"""The metrics c_kernel reports, which of them a task can rank by, and the throughput rates.

Which metrics exist depends on the task's reference.py (gflops needs flops(), the work rate
needs work()), so an objective is vetted against the evaluator built for the task: a typo
or a metric the reference cannot give fails the task file on the objective's line rather
than every evaluation.
"""

from __future__ import annotations

from evolve.evaluators.c_kernel.oracle import Trial
from evolve.evaluators.c_kernel.params import CKernelParams

COST_METRICS = ("est_cycles", "est_speedup")
ALWAYS = (
    "speedup",
    "speedup_spread",
    "time_s",
    "time_spread",
    "wall_time_s",
    "seed_time_s",
    "gbps",
    "flagged",
    "roofline_floor_s",
    "code_bytes",
    *COST_METRICS,
)


def work_metric(params: CKernelParams) -> str:
    return f"{params.work_unit}_per_s"


def available(params: CKernelParams, has_flops: bool, has_work: bool) -> tuple[str, ...]:
    """Every metric a candidate of this task can report."""
    extra = (("gflops",) if has_flops else ()) + ((work_metric(params),) if has_work else ())
    return (*ALWAYS, *extra)


def problem(name: str, params: CKernelParams, has_flops: bool, has_work: bool) -> str | None:
    """Why an objective named `name` could not be scored; None if it can."""
    if name == "gflops" and not has_flops:
        return (
            "gflops needs reference.py to define flops(sizes), the floating-point operations "
            "of one call; without it rank by speedup, time_s or gbps"
        )
    names = available(params, has_flops, has_work)
    if name.endswith("_per_s") and name not in names:
        now = f"the task's work_unit is {params.work_unit}" if has_work else "it has no work()"
        return (
            f"{name} needs reference.py to define work(sizes), the work of one call, and "
            f"`work_unit: {name.removesuffix('_per_s')}` ({now})"
        )
    if name not in names:
        return f"c_kernel reports {', '.join(names)}; not {name!r}"
    if name in COST_METRICS and (
        params.counters != "always" or params.counter_tool != "cachegrind"
    ):
        return (
            f"{name} comes from cachegrind's counts of every candidate: set "
            "`counters: always` and `counter_tool: cachegrind` in the evaluator's params"
        )
    return None


def throughput(trial: Trial, params: CKernelParams, seconds: float) -> dict[str, float]:
    """The rates of one call of `seconds`: gbps always, gflops and the work rate where
    reference.py defines flops() and work()."""
    rates = {"gbps": trial.bytes_moved / seconds / 1e9}
    if trial.flops is not None:
        rates["gflops"] = trial.flops / seconds / 1e9
    if trial.work is not None:
        rates[work_metric(params)] = trial.work / seconds
    return rates


def throughput_line(trial: Trial, params: CKernelParams, metrics: dict[str, float]) -> str:
    traffic = (
        "reference.py's bytes_moved"
        if trial.traffic_stated
        else "the inputs read once and the outputs written once"
    )
    parts = [f"{metrics['gbps']:.3g} GB/s (counting {traffic})"]
    if "gflops" in metrics:
        parts.append(f"{metrics['gflops']:.3g} GFLOP/s")
    work = work_metric(params)
    if work in metrics:
        parts.append(f"{metrics[work]:.3g} {params.work_unit}/s")
    return "candidate throughput: " + ", ".join(parts)
