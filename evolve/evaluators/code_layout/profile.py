"""The training profile as the candidate sees it, and as lld's call-graph sort reads it.

The driver's profile run gives, per workload, self instruction counts and call edges of
the program's own functions. Only the training workloads are summed into what the
candidate gets; held-out workloads were profiled for their guard outputs alone. A
function is hot when it executed at least one instruction in some training workload.
Static functions that share a name across objects are one entry: the ordering file names
symbols, and lld places every section that defines the name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainingProfile:
    functions: list[dict[str, object]]  # hot only, in the linker's input order
    calls: list[dict[str, object]]  # caller -> callee between hot functions, summed

    @property
    def hot(self) -> list[str]:
        return [str(function["name"]) for function in self.functions]

    def call_graph_file(self) -> bytes:
        """lld's --call-graph-ordering-file: `caller callee count`, one edge a line."""
        lines = [f"{c['caller']} {c['callee']} {c['count']}\n" for c in self.calls]
        return "".join(lines).encode()


def training_profile(report: dict, training: Sequence[str]) -> TrainingProfile:
    """Sum the `training` workloads of the driver's profile report."""
    chosen = [w for w in report["workloads"] if w["name"] in set(training)]
    instructions: dict[str, int] = defaultdict(int)
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for workload in chosen:
        for name, count in workload["self"].items():
            instructions[name] += count
        for caller, callee, count in workload["calls"]:
            edges[(caller, callee)] += count
    merged: dict[str, dict[str, object]] = {}
    for function in report["functions"]:
        name = function["name"]
        if instructions.get(name, 0) <= 0:
            continue
        if name in merged:
            merged[name]["size"] = int(merged[name]["size"]) + function["size"]  # type: ignore[call-overload]
            continue
        merged[name] = {
            "name": name,
            "size": function["size"],
            "section": function["section"],
            "instructions": instructions[name],
        }
    calls = [
        {"caller": caller, "callee": callee, "count": count}
        for (caller, callee), count in sorted(edges.items())
        if caller in merged and callee in merged and count > 0
    ]
    return TrainingProfile(list(merged.values()), calls)
