"""A task's trusted check.py: the judge of what the run produced, run outside the sandbox.

The run is the candidate's: whatever it prints or writes, metrics included, is a claim.
`check(outputs, metrics)` runs in the evaluation worker instead, where the candidate never
runs, on the files the run wrote (`outputs`, bytes by path, those that exist) and the
metrics it claimed. It raises to reject the run (the stage `check` fails with its
message), returns None to let the claimed metrics stand, or returns a dict of numbers that
replaces them: the way to score what it recomputed from the outputs rather than trust a
claim.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evolve.evaluators.task_files import TrustedFunction


class Checker:
    def __init__(self, task_dir: Path, relative: str) -> None:
        self.check = TrustedFunction(task_dir, relative, "check", "the run")

    def __call__(
        self, outputs: Mapping[str, bytes], metrics: Mapping[str, float]
    ) -> dict[str, float] | None:
        """The metrics to score instead of the claimed ones, or None to keep those;
        StageFailed with check's message when it rejects the run."""
        returned = self.check(dict(outputs), dict(metrics))
        return None if returned is None else self.check.numbers(returned, "a dict or None")
