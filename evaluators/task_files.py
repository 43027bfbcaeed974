"""A task's trusted Python, run from its text: a reference, or a judge such as verify.py.

Evaluators read the task's files with evolve.taskpaths.read_task_file, which keeps them
inside the task folder; this module runs the code they read that way, in the evaluator's
own process, never in the sandbox.
"""

from __future__ import annotations

import functools
import numbers
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evolve.stages import StageFailed
from evolve.taskpaths import TaskPathError, read_task_file


@functools.lru_cache(maxsize=16)
def load_reference(text: str, filename: str, required: tuple[str, ...]) -> types.ModuleType:
    """The reference module run from its text, so a pickled evaluator carries it to workers;
    cached, since every evaluation asks for it again."""
    module = types.ModuleType(f"reference_{Path(filename).stem}")
    module.__file__ = filename
    exec(compile(text, filename, "exec"), module.__dict__)
    missing = [name for name in required if not callable(getattr(module, name, None))]
    if missing:
        raise ValueError(f"{filename} must define {', '.join(missing)}")
    return module


class TrustedFunction:
    """One function of a task's trusted file (verify.py, check.py) that judges what a
    sandbox job returned. Its text is read when the task loads (a bad file fails the task
    on the param's line) and travels in the pickled evaluator."""

    def __init__(self, task_dir: Path, relative: str, function: str, judged: str) -> None:
        self.function, self.judged = function, judged  # judged: "the run", "the result"
        self.text = read_task_file(task_dir, relative, function)
        self.filename = str(task_dir / relative)
        try:
            self._module()
        except SyntaxError as exc:
            raise TaskPathError(function, f"{relative}:{exc.lineno}: {exc.msg}") from None
        except Exception as exc:  # whatever its top level raised, or no such function
            raise TaskPathError(function, f"{relative}: {type(exc).__name__}: {exc}") from None

    def _module(self) -> types.ModuleType:
        return load_reference(self.text, self.filename, (self.function,))

    def __call__(self, *args: Any) -> Any:
        """What the function returned; StageFailed with its message where it raised, which
        is how it rejects what it judges."""
        try:
            return getattr(self._module(), self.function)(*args)
        except Exception as exc:
            raise StageFailed(
                f"{self.function}.py rejected {self.judged}: {type(exc).__name__}: {exc}"
            ) from exc

    def numbers(self, returned: Any, allowed: str = "a dict") -> dict[str, float]:
        """`returned` as metrics; anything but a dict of numbers is the task's bug: TypeError."""
        if not isinstance(returned, Mapping):
            kind = type(returned).__name__
            raise TypeError(f"{self.filename}: {self.function} returned {kind}, not {allowed}")
        metrics: dict[str, float] = {}
        for name, value in returned.items():
            if not isinstance(value, numbers.Real):
                raise TypeError(
                    f"{self.filename}: {self.function} returned {name!r}: {value!r}, not a number"
                )
            metrics[str(name)] = float(value)
        return metrics
