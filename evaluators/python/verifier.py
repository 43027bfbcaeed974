"""A task's trusted verify.py: the check of what the in-sandbox evaluator claims.

The evaluator runs in the candidate's process, so a candidate can make it say anything.
verify(metrics, artifacts) -> metrics runs here instead, in the evaluation worker, where
the candidate never runs, on what the evaluator returned; when a task has one, only what
it returns is scored. It should recompute the score from the artifacts (the packing, the
answer) rather than trust a claimed number, and raise to reject the result. Its text is
read when the task loads and carried by the pickled evaluator, like a c_kernel reference.
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Mapping
from pathlib import Path

from evaluators.task_files import load_reference
from evolve.stages import StageFailed
from evolve.taskpaths import TaskPathError, read_task_file

FUNCTION = "verify"


class Verifier:
    def __init__(self, task_dir: Path, relative: str) -> None:
        self.text = read_task_file(task_dir, relative, "verify")
        self.filename = str(task_dir / relative)
        try:
            self._module()
        except SyntaxError as exc:
            raise TaskPathError("verify", f"{relative}:{exc.lineno}: {exc.msg}") from None
        except Exception as exc:  # whatever its top level raised, or no verify function
            raise TaskPathError("verify", f"{relative}: {type(exc).__name__}: {exc}") from None

    def _module(self) -> types.ModuleType:
        return load_reference(self.text, self.filename, (FUNCTION,))

    def __call__(self, metrics: Mapping[str, float], artifacts: Mapping[str, str]) -> dict:
        """The metrics to score; StageFailed with verify's message when it rejects the
        result. A return that is not a dict of numbers is the task's bug: TypeError."""
        try:
            verified = self._module().verify(dict(metrics), dict(artifacts))
        except Exception as exc:
            raise StageFailed(
                f"verify.py rejected the result: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(verified, Mapping):
            raise TypeError(
                f"{self.filename}: verify returned {type(verified).__name__}, not a dict"
            )
        numbers_only: dict[str, float] = {}
        for name, value in verified.items():
            if not isinstance(value, numbers.Real):
                raise TypeError(
                    f"{self.filename}: verify returned {name!r}: {value!r}, not a number"
                )
            numbers_only[str(name)] = float(value)
        return numbers_only
