"""Trusted side of one sandbox run of the driver: the manifest in, a checked report out.

A `decide` run shares the sandbox with the candidate's code, so its report is believed
only as far as it cannot help the candidate: a string of 0/1 per unit. Sizes and guard
outputs come from `replay` and `stock` runs, where no candidate code runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.evaluators.llvm_inline.units import Unit
from evolve.plugin.stages import Runner, StageFailed, excerpt

DRIVER = (Path(__file__).parent / "driver.py").read_bytes()
DECISIONS = re.compile(r"^[01]*$")
HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Compiled:
    """One unit's outcome: sizes, hashes and clang's CPU time only from replay and stock
    runs."""

    name: str
    decisions: str
    seconds: float
    cpu_seconds: float = 0.0  # clang's user + system time
    text_bytes: int = 0
    sha256: str = ""
    guard: tuple[int | None, str] | None = None  # exit code and output


def manifest(
    params: LLVMInlineParams,
    mode: str,
    units: Sequence[Unit],
    *,
    level: str,
    timeout_s: float,
    policy: str = "",
    plugin: str = "",
    decisions: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """The driver's instructions; a decide run names either the Python `policy` or the C++
    route's `plugin` (a pass plugin clang loads)."""
    entries = []
    for unit in units:
        entry: dict[str, object] = {"name": unit.name, "source": unit.source, "flags": unit.flags}
        if decisions is not None:
            entry["decisions"] = decisions[unit.name]
        if unit.guard is not None and mode != "decide":
            entry["guard"] = {
                "binary": unit.name,
                "link": unit.guard.link,
                "script": unit.guard.script,
            }
        entries.append(entry)
    plan: dict[str, object] = {
        "mode": mode,
        "clang": params.clang,
        "size_tool": params.size_tool,
        "flags": [level, *params.flags],
        "units": entries,
        "policy": policy,
        "include_default": params.include_default,
        "decision_timeout_s": params.decision_timeout_ms / 1000,
        "import_timeout_s": params.import_timeout_s,
        "unit_timeout_s": timeout_s,
        "guard_timeout_s": params.guard_timeout_s,
    }
    if plugin:
        plan["plugin"], plan["plugin_timeout_s"] = plugin, params.plugin_timeout_s
    return plan


def run_driver(
    run: Runner,
    plan: dict[str, object],
    corpus: Mapping[str, bytes],
    extra: Mapping[str, bytes] | None = None,
) -> list[Compiled]:
    """Run the driver on `plan`; StageFailed says why when anything went wrong."""
    files = {
        **corpus,
        **(extra or {}),
        "driver.py": DRIVER,
        "manifest.json": json.dumps(plan).encode(),
    }
    result = run(["python3", "-I", "driver.py", "manifest.json"], files, collect=["report.json"])
    mode = plan["mode"]
    raw = result.files.get("report.json")
    if result.timed_out:
        raise StageFailed(
            f"the {mode} run {result.describe()}: a policy that loops, or a corpus too big "
            "for that limit",
            timed_out=True,
        )
    if not result.ok or raw is None:
        stderr = excerpt(result.stderr, tail=True)
        raise StageFailed(
            f"the {mode} run {result.describe()} without a report (did the policy end the "
            f"driver?)" + (f"\nstderr:\n{stderr}" if stderr else "")
        )
    return _parse(raw, plan)


def _parse(raw: bytes, plan: dict[str, object]) -> list[Compiled]:
    try:
        report = json.loads(raw)
        failure, records = report["failure"], report["units"]
    except (ValueError, KeyError, TypeError):
        raise StageFailed(f"the {plan['mode']} run's report is malformed") from None
    if failure is not None:
        raise StageFailed(str(failure)[:4000])
    expected = [unit["name"] for unit in plan["units"]]  # type: ignore[attr-defined]
    if not isinstance(records, list) or [r.get("name") for r in records] != expected:
        raise StageFailed(f"the {plan['mode']} run's report does not list the units it compiled")
    return [_unit(record, plan["mode"] != "decide") for record in records]


def _unit(record: dict[str, object], trusted: bool) -> Compiled:
    decisions = record.get("decisions", "")
    seconds = record.get("seconds", 0.0)
    if not isinstance(decisions, str) or not DECISIONS.match(decisions):
        raise StageFailed(f"{record['name']}: the recorded decisions are not a string of 0/1")
    if not isinstance(seconds, int | float):
        raise StageFailed(f"{record['name']}: the report's time is not a number")
    if not trusted:
        return Compiled(str(record["name"]), decisions, float(seconds))
    guard = record.get("guard")
    text_bytes, digest, cpu = record["text_bytes"], record["sha256"], record["cpu_seconds"]
    if (
        not isinstance(text_bytes, int)
        or not isinstance(digest, str)
        or not HEX.match(digest)
        or not isinstance(cpu, int | float)
    ):
        raise ValueError(f"a trusted run reported nonsense for {record['name']}: {record}")
    return Compiled(
        str(record["name"]),
        decisions,
        float(seconds),
        float(cpu),
        text_bytes,
        digest,
        None if guard is None else (guard["exit"], guard["output"]),  # type: ignore[index]
    )
