"""A task's trusted verify.py: the check of what the in-sandbox evaluator claims.

The evaluator runs in the candidate's process, so a candidate can make it say anything.
verify(metrics, artifacts) -> metrics runs here instead, in the evaluation worker, where
the candidate never runs, on what the evaluator returned; when a task has one, only what
it returns is scored. It should recompute the score from the artifacts (the packing, the
answer) rather than trust a claimed number, and raise to reject the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evolve.evaluators.task_files import TrustedFunction


class Verifier:
    def __init__(self, task_dir: Path, relative: str) -> None:
        self.verify = TrustedFunction(task_dir, relative, "verify", "the result")

    def __call__(self, metrics: Mapping[str, float], artifacts: Mapping[str, str]) -> dict:
        """The metrics to score; StageFailed with verify's message when it rejects the
        result."""
        return self.verify.numbers(self.verify(dict(metrics), dict(artifacts)))
