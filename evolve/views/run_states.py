"""A run's status as a reader should see it, which is not always the one stored.

A driver says how its run ended (finished, stopped, failed) as it ends; one killed by
`kill -9`, or lost with its machine, says nothing, and its run would stay `running` in the
store forever. Its lease tells the truth: a running run whose driver has not renewed it
for LEASE_S is one nobody drives, and is shown as `killed` (`evolve run --resume` takes
it over by that same rule). Pure functions, so that any view of runs (the commands, a
report) shows the same status.
"""

from __future__ import annotations

from evolve.runtime.lease import LEASE_S
from evolve.store import RunRecord


def heartbeat(record: RunRecord) -> float:
    """When the run's driver was last heard from: its lease's heartbeat, or, for a run
    whose driver has not written one (or a garbled one), the run's last update."""
    beat = (record.driver or {}).get("heartbeat")
    return float(beat) if isinstance(beat, int | float) else record.updated_at


def shown_status(record: RunRecord, now: float) -> str:
    """The stored status, except `killed` for a running run whose driver went quiet.
    `now` is unix seconds on this host; the heartbeat was written with the driver's clock,
    so hosts whose clocks differ by a good part of LEASE_S disagree near the edge, as the
    lease itself does."""
    if record.status == "running" and now - heartbeat(record) > LEASE_S:
        return "killed"
    return record.status
