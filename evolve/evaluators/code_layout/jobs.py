"""The host's side of the trusted runs (build, profile, measure): a manifest in, a checked
report out. They hold no candidate code at all; every number that scores a layout comes
from them. The candidate's own run is candidate.py's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from evolve.evaluators.code_layout.params import CodeLayoutParams
from evolve.plugin.stages import Runner, StageFailed, excerpt

HERE = Path(__file__).parent
DRIVER = {name: (HERE / name).read_bytes() for name in ("driver.py", "callgrind.py", "perfstat.py")}
VALGRIND_SLOWDOWN = 100  # callgrind with its cache simulator runs a program 20-100x slower


def deadline_s(timeout_s: float) -> float:
    """When the driver stops itself: before the sandbox would, so its report names the step."""
    return max(1.0, timeout_s - min(10.0, 0.1 * timeout_s))


def run_driver(
    run: Runner, plan: dict[str, object], files: Mapping[str, bytes], collect: Sequence[str] = ()
) -> tuple[dict, dict[str, bytes]]:
    """The driver's report and the `collect`ed files; StageFailed says what went wrong."""
    manifest = {**plan, "deadline_s": deadline_s(run.limits.timeout_s)}
    shipped = {**files, **DRIVER, "manifest.json": json.dumps(manifest).encode()}
    result = run(
        ["python3", "-I", "driver.py", "manifest.json"], shipped, collect=["report.json", *collect]
    )
    mode = plan["mode"]
    if result.timed_out:
        raise StageFailed(f"the {mode} run {result.describe()}", timed_out=True)
    raw = result.files.get("report.json")
    if not result.ok or raw is None:
        stderr = excerpt(result.stderr, tail=True)
        raise StageFailed(f"the {mode} run {result.describe()} without a report\n{stderr}")
    report = json.loads(raw)
    if report["failure"] is not None:
        raise StageFailed(f"the {mode} run failed: {report['failure']}")
    return report, result.files


def plan_for(params: CodeLayoutParams, mode: str, **fields: object) -> dict[str, object]:
    """A driver manifest with the settings every mode shares."""
    return {
        "mode": mode,
        "cc": params.cc,
        "objdump": params.objdump,
        "timeout_s": params.workload_timeout_s,
        "valgrind_slowdown": VALGRIND_SLOWDOWN,
        "caches": {"I1": params.i1, "D1": params.d1, "LL": params.ll},
        "wall_repeats": params.wall_repeats,
        "perf_events": params.perf_events,
        **fields,
    }
