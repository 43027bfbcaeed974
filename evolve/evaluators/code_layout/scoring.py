"""A measured layout as metrics and feedback: ratios to the linker's own order, per split.

Every ratio is a geometric mean over the split's workloads of (this layout's count / the
default order's count), so each workload weighs the same whatever its length. Lower is
better. `i1_ratio` (training I1 misses) is the tasks' objective; the others are reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evolve.plugin.stages import StageFailed

# Our metric suffix -> the driver's field, per workload.
MEASURES = {"i1": "I1_misses", "ll": "LLi_misses", "lines": "lines", "pages": "pages"}


@dataclass(frozen=True)
class Measured:
    """One link's measurement: per workload, the driver's record."""

    binary_sha256: str
    workloads: dict[str, dict]
    perf_source: str
    link_s: float

    @classmethod
    def from_report(cls, report: dict) -> Measured:
        named = {w["name"]: w for w in report["workloads"]}
        return cls(report["binary_sha256"], named, report["perf_source"], report["link_s"])


def check_guards(measured: Measured, references: Mapping[str, dict]) -> None:
    """StageFailed unless every workload printed what the default build printed."""
    for name, record in measured.workloads.items():
        expected, got = references[name], record["output"]
        if (got["exit"], got["sha256"]) != (expected["exit"], expected["sha256"]):
            raise StageFailed(
                f"workload {name}: the output differs from the default build's "
                f"(exit {got['exit']} vs {expected['exit']}):\n{got['stdout'][:1500]}"
            )


def require_repeatable(first: dict, second: dict) -> None:
    """RuntimeError naming each workload whose simulated counts differ between two runs of
    the same binary: its score would be noise (a clock, an unseeded random, an address)."""
    counts = ("instructions", *MEASURES.values())
    again = {w["name"]: w for w in second["workloads"]}
    unstable = []
    for record in first["workloads"]:
        other = again[record["name"]]
        moved = [f"{c} {record[c]} then {other[c]}" for c in counts if record[c] != other[c]]
        if moved:
            unstable.append(f"{record['name']} ({', '.join(moved)})")
    if unstable:
        raise RuntimeError(
            "code_layout: these workloads do not repeat exactly under callgrind, so they "
            f"cannot score a layout; make them deterministic: {'; '.join(unstable)}"
        )


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values))


def ratios(measured: Measured, baseline: Measured, names: Sequence[str]) -> dict[str, float]:
    """`<measure>_ratio` for each measure over the workloads `names`."""
    result = {}
    for suffix, field in MEASURES.items():
        per = [measured.workloads[n][field] / max(baseline.workloads[n][field], 1) for n in names]
        result[f"{suffix}_ratio"] = _geomean(per)
    return result


def split_metrics(
    measured: Measured, baseline: Measured, names: Sequence[str], prefix: str
) -> dict[str, float]:
    """The ratios and totals of one split, each name led by `prefix` ("" or "heldout_")."""
    metrics = {f"{prefix}{k}": v for k, v in ratios(measured, baseline, names).items()}
    label = prefix or "train_"
    for suffix, field in MEASURES.items():
        metrics[f"{label}{suffix}"] = float(sum(measured.workloads[n][field] for n in names))
    metrics[f"{label}wall_s"] = sum(measured.workloads[n]["wall_s"] for n in names)
    return metrics


def describe(
    measured: Measured,
    baseline: Measured,
    splits: Mapping[str, Sequence[str]],
    references: Mapping[str, Measured],
) -> str:
    """Per-workload counts beside the default order's, and where lld's sorts stand."""
    lines = ["workload: I1 misses (default order) | 64 B lines | 4 KiB pages"]
    for split, names in splits.items():
        for name in names:
            mine, base = measured.workloads[name], baseline.workloads[name]
            lines.append(
                f"  {split}/{name}: {mine['I1_misses']} ({base['I1_misses']}) | "
                f"{mine['lines']} ({base['lines']}) | {mine['pages']} ({base['pages']})"
            )
    for label, other in references.items():
        parts = [
            f"{split} i1_ratio {ratios(other, baseline, names)['i1_ratio']:.4f}"
            for split, names in splits.items()
        ]
        lines.append(f"{label}: {', '.join(parts)}")
    return "\n".join(lines)
