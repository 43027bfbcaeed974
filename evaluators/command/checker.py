"""A task's trusted check.py: the judge of what the run produced, run outside the sandbox.

The run is the candidate's: whatever it prints or writes, metrics included, is a claim.
`check(outputs, metrics)` runs in the evaluation worker instead, where the candidate never
runs, on the files the run wrote (`outputs`, bytes by path, those that exist) and the
metrics it claimed. It raises to reject the run (the stage `check` fails with its
message), returns None to let the claimed metrics stand, or returns a dict of numbers that
replaces them: the way to score what it recomputed from the outputs rather than trust a
claim. Its text is read when the task loads and carried by the pickled evaluator.
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Mapping
from pathlib import Path

from evaluators.task_files import load_reference
from evolve.stages import StageFailed
from evolve.taskpaths import TaskPathError, read_task_file

FUNCTION = "check"


class Checker:
    def __init__(self, task_dir: Path, relative: str) -> None:
        self.text = read_task_file(task_dir, relative, "check")
        self.filename = str(task_dir / relative)
        try:
            self._module()
        except SyntaxError as exc:
            raise TaskPathError("check", f"{relative}:{exc.lineno}: {exc.msg}") from None
        except Exception as exc:  # whatever its top level raised, or no check function
            raise TaskPathError("check", f"{relative}: {type(exc).__name__}: {exc}") from None

    def _module(self) -> types.ModuleType:
        return load_reference(self.text, self.filename, (FUNCTION,))

    def __call__(
        self, outputs: Mapping[str, bytes], metrics: Mapping[str, float]
    ) -> dict[str, float] | None:
        """The metrics to score instead of the claimed ones, or None to keep those;
        StageFailed with check's message when it rejects the run. A return that is neither
        None nor a dict of numbers is the task's bug: TypeError."""
        try:
            returned = self._module().check(dict(outputs), dict(metrics))
        except Exception as exc:
            raise StageFailed(f"check.py rejected the run: {type(exc).__name__}: {exc}") from exc
        if returned is None:
            return None
        if not isinstance(returned, Mapping):
            raise TypeError(
                f"{self.filename}: check returned {type(returned).__name__}, not a dict or None"
            )
        replaced: dict[str, float] = {}
        for name, value in returned.items():
            if not isinstance(value, numbers.Real):
                raise TypeError(
                    f"{self.filename}: check returned {name!r}: {value!r}, not a number"
                )
            replaced[str(name)] = float(value)
        return replaced
