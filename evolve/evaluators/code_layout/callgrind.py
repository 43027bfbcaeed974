"""Reads what callgrind writes: self instruction counts per function, call edges with their
counts, event totals, and the instruction addresses each object executed.

Shipped into the sandbox with driver.py and imported there, so it uses the standard library
only. It reads files written with `--compress-strings=no --compress-pos=no
--dump-instr=yes --dump-line=no` (the driver's flags): every position is an absolute
address and every name is spelled out (names such as "(below main)" are real ones, so
compressed names could not be told apart; compressed positions are refused). The format
is described in valgrind's "Callgrind Format Specification".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Profile:
    """One callgrind run, restricted to what the layout needs."""

    events: list[str] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)  # every object, the whole process
    self_cost: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # fn -> Ir
    calls: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    addresses: set[int] = field(default_factory=set)  # executed instructions of `target`


def parse(lines: Iterable[str], target: str) -> Profile:
    """The profile of one run. Self cost and call edges count only functions of the object
    whose path ends with `target` (the program, not libc); totals count every object."""
    profile = Profile()
    obj = fn = callee = ""
    callee_obj: str | None = None  # `cob=` names it only when it differs from the caller's
    pending_call = False  # the next cost line is a call's inclusive cost, not self cost
    ir = 0
    for raw in lines:
        line = raw.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        if line[0] in "+-*":
            raise ValueError(f"compressed callgrind positions ({line[:40]!r})")
        if line[0].isdigit():
            if pending_call:
                pending_call = False
                continue
            parts = line.split()
            costs = [int(value) for value in parts[1:]]  # trailing zeros may be left out
            for event, value in zip(profile.events, costs, strict=False):
                profile.totals[event] = profile.totals.get(event, 0) + value
            if obj.endswith(target) and len(costs) > ir and costs[ir] > 0:
                profile.self_cost[fn] += costs[ir]
                profile.addresses.add(int(parts[0], 0))
            continue
        key, _, value = line.partition("=")
        if key == "ob":
            obj = value.strip()
        elif key == "fn":
            fn, callee_obj, callee = value.strip(), None, ""
        elif key == "cob":
            callee_obj = value.strip()
        elif key == "cfn":
            callee = value.strip()
        elif key == "calls":
            count = int(value.split()[0])
            ours = obj.endswith(target) and (callee_obj or obj).endswith(target)
            if ours and callee:
                profile.calls[(fn, callee)] += count
            pending_call, callee_obj = True, None
        elif line.startswith("events:"):
            profile.events = line.split(":", 1)[1].split()
            ir = profile.events.index("Ir")
    return profile
