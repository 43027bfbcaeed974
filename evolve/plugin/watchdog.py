"""Deadlines for evaluations, kept by the driver.

A worker can stop answering without dying: a candidate that ptrace-attaches to its parent
leaves the evaluation worker stopped, and a call to it, which ends only when the worker
answers or dies, waits forever, and so does the run. The driver therefore gives each
evaluation a deadline and treats a worker that misses it as lost: the engine kills and
replaces it, and records the candidate as `timeout`.

The deadline follows from the sandbox's limits. An evaluation is a cascade of sandbox runs,
each ended by the sandbox at its time limit; so one evaluation takes at most the sum of
those limits, plus what the backend may take beyond a limit to kill a job and recover, plus
the evaluator's own Python work (references, comparisons) and the calls to and from the
worker. An evaluator can state
its worst case with an optional `worst_case_s(limits) -> float`; without it, it is assumed
to make at most DEFAULT_SANDBOX_RUNS runs. The bound is meant to be generous: it exists to
free a slot that would otherwise never free, not to time anything.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Generic, TypeVar

from evolve.plugin.sandbox import Limits

if TYPE_CHECKING:  # the evaluator's base uses this module's bounds
    from evolve.plugin.evaluator import Evaluator

T = TypeVar("T", bound=Hashable)

# c_kernel, the longest cascade here, makes up to 17: build 3, check 1, sanitize 9 (two
# sanitized builds of 3 and their runs, and the MSan probe), measure 2 (the roofline re-time),
# counters 2.
DEFAULT_SANDBOX_RUNS = 20
# What a backend may take past a job's time limit: Docker waits 15 s before it kills the
# container, then starts a new one.
SANDBOX_GRACE_S = 20.0
MARGIN = 0.25  # of the worst case, for the evaluator's own work and the calls, on a busy machine
MIN_MARGIN_S = 10.0


def sandbox_time(runs: int, limits: Limits) -> float:
    """The longest `runs` sandbox runs under `limits` can take, each up to its limit."""
    return runs * (limits.timeout_s + SANDBOX_GRACE_S)


def evaluation_deadline(evaluator: Evaluator, limits: Limits) -> float:
    """Seconds after which an evaluation under `limits` is given up, worker and all."""
    worst = float(evaluator.worst_case_s(limits))
    return worst + max(MIN_MARGIN_S, MARGIN * worst)


class Watchdog(Generic[T]):
    """When each evaluation in flight is due; the engine asks which are overdue."""

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s
        self._due: dict[T, float] = {}

    def watch(self, evaluation: T) -> None:
        self._due[evaluation] = time.monotonic() + self.deadline_s

    def forget(self, evaluation: T) -> None:
        self._due.pop(evaluation, None)

    def overdue(self) -> list[T]:
        now = time.monotonic()
        return [evaluation for evaluation, due in self._due.items() if due <= now]

    def feedback(self) -> str:
        return (
            f"the evaluation exceeded its deadline of {self.deadline_s:.0f} s (the time limit "
            "of each sandbox run of its cascade, sandbox.timeout_s, summed, and a margin), so "
            "its worker was killed and replaced"
        )
