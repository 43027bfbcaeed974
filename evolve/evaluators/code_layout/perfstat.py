"""Reads `perf stat -x,` output: the count of each requested event, or why there is none.

Shipped into the sandbox with driver.py, so it uses the standard library only. perf writes
one CSV line per event to stderr: the value first (or `<not supported>`, `<not counted>`),
the event's name third, with modifiers (`:u`) after it, and on hybrid CPUs once per core
type, wrapped as `cpu_core/iTLB-load-misses/`; those lines are summed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

PMU_WRAPPED = re.compile(r"^[\w.-]+/(?P<event>[^/]+)/$")


def event_name(field: str) -> str:
    wrapped = PMU_WRAPPED.match(field)
    return (wrapped["event"] if wrapped else field).split(":")[0]


def counts(text: str, events: Sequence[str]) -> tuple[dict[str, float], str]:
    """({event: count}, "perf") when every event was counted, else ({}, why not)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or event_name(fields[2]) not in events:
            continue
        name = event_name(fields[2])
        try:
            found[name] = found.get(name, 0.0) + float(fields[0])
        except ValueError:
            return {}, f"unavailable: perf reports {name} as {fields[0]}"
    if set(found) != set(events):
        return {}, f"unavailable: perf stat failed: {text.strip()[-300:]}"
    return found, "perf"
