"""Counters stage: one candidate call under Nsight Compute (ncu), as feedback only.

It runs after timing and never fails a candidate: counters explain a time, they do not
judge it. It is skipped, with the reason in the feedback, where ncu is absent or where the
driver does not permit profiling (ERR_NVGPUCTRPERM). The counted call's output is checked
too, so a kernel that behaves differently under the profiler gets no counters.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import replace

from evolve.plugin.results import Counter
from evolve.plugin.stages import Runner

NCU_PATHS = ("ncu", "/usr/local/cuda/bin/ncu")
METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "launch__shared_mem_per_block_static": "static_shared_bytes",
    "launch__shared_mem_per_block_dynamic": "dynamic_shared_bytes",
}
TO_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}
SOURCE = "ncu"


def find_ncu(run: Runner) -> str | None:
    for path in NCU_PATHS:
        try:
            if run([path, "--version"], {}).ok:
                return path
        except OSError:  # the process sandbox cannot even start a missing program
            continue
    return None


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse_csv(text: str) -> dict[str, Counter]:
    """Per-call counters from `ncu --csv`: durations summed over the call's kernels,
    percentages weighted by each kernel's duration, launch settings at their maximum."""
    rows = list(csv.DictReader(line for line in text.splitlines() if line.startswith('"')))
    kernels: dict[str, dict[str, float]] = {}
    for row in rows:
        name = METRICS.get(row.get("Metric Name", ""))
        if name is None:
            continue
        try:
            value = _number(row["Metric Value"])
        except (KeyError, ValueError):
            continue
        if name == "duration_ns":
            value *= TO_NS.get(row.get("Metric Unit", "nsecond"), 1.0)
        kernels.setdefault(row.get("ID", ""), {})[name] = value
    if not kernels:
        return {}
    readings = list(kernels.values())
    total = sum(k.get("duration_ns", 0.0) for k in readings)
    found: dict[str, float] = {"duration_ns": total, "kernels": float(len(readings))}
    for name in ("sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct"):
        weighted = [(k[name], k.get("duration_ns", 1.0)) for k in readings if name in k]
        weight = sum(w for _, w in weighted)
        if weighted and weight:
            found[name] = sum(v * w for v, w in weighted) / weight
    for name in ("registers_per_thread", "static_shared_bytes", "dynamic_shared_bytes"):
        values = [k[name] for k in readings if name in k]
        if values:
            found[name] = max(values)
    return {name: Counter(value, SOURCE) for name, value in found.items()}


def describe(counters: dict[str, Counter]) -> str:
    values = {name: counter.value for name, counter in counters.items()}
    parts = [f"{values.get('duration_ns', 0) / 1e3:.1f} us over {values['kernels']:.0f} kernel(s)"]
    labels = {
        "sm_throughput_pct": "SM throughput {:.0f}% of peak",
        "dram_throughput_pct": "DRAM throughput {:.0f}% of peak",
        "achieved_occupancy_pct": "achieved occupancy {:.0f}%",
        "registers_per_thread": "{:.0f} registers/thread",
        "static_shared_bytes": "{:.0f} B static shared/block",
        "dynamic_shared_bytes": "{:.0f} B dynamic shared/block",
    }
    parts += [label.format(values[name]) for name, label in labels.items() if name in values]
    return "counters (ncu, one call at the timed shape): " + ", ".join(parts)


def count(
    run: Runner,
    ncu: str,
    files: dict[str, bytes],
    collect: list[str],
    judge: Callable[[dict[str, bytes]], str | None],
    timeout_s: float,
) -> tuple[dict[str, Counter], str]:
    """Counters of one `runner check candidate` call, and the feedback line."""
    argv = [ncu, "--csv", "--target-processes", "all", "--metrics", ",".join(METRICS)]
    limits = replace(
        run.limits,
        timeout_s=timeout_s,
        cpu_s=None,
        timeout_key="evaluator.params.counter_timeout_s",
    )
    result = run.sandbox.run(
        [*argv, "./runner", "check", "candidate"], files=files, limits=limits, collect=collect
    )
    run.runs.append(result)
    said = result.stdout.decode(errors="replace") + result.stderr.decode(errors="replace")
    if "ERR_NVGPUCTRPERM" in said:
        return {}, "no counters: the driver does not permit profiling here (ERR_NVGPUCTRPERM)"
    if not result.ok:
        return {}, f"no counters: ncu {result.describe()}"
    wrong = judge(result.files)
    if wrong:
        return {}, f"counters discarded: the profiled call's output is wrong: {wrong}"
    counters = parse_csv(said)
    if not counters:
        return {}, "no counters: ncu reported no kernels for the call"
    return counters, describe(counters)
