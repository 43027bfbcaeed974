"""A task's trusted Python, run from its text: a reference, or a judge such as verify.py.

Evaluators read the task's files with evolve.plugin.taskpaths.read_task_file, which keeps them
inside the task folder; this module runs the code they read that way, in the evaluator's
own process, never in the sandbox.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
import os
import signal
import time
import types
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

from evolve.plugin.secrets import forget
from evolve.plugin.stages import StageFailed
from evolve.plugin.taskpaths import TaskPathError, read_task_file

# How long a task's trusted code may take at load (a reference's top level and its first
# trials, a judge's top level) before the task is refused as one that never loads.
LOAD_DEADLINE_S = 30.0


_FINISHED: set[Hashable] = set()  # the keys of work that finished in time in this process


def finishes_in_time(
    work: Callable[[], object],
    key: Hashable,
    param: str,
    shown: str,
    deadline_s: float | None = None,
) -> None:
    """Run `work`, a task's trusted code at load, in a forked copy of this process first, so
    that a file whose top level (or first trial) never returns fails the task within
    `deadline_s` (default LOAD_DEADLINE_S) with a TaskPathError naming `param`, instead of
    hanging the command without a word. What the copy raises is left to the caller, which
    then runs `work` itself and reports any failure in its own words.

    The copy forgets the secrets in its environment before it runs anything (see
    evolve/plugin/secrets.py).

    `key` names the work (the file's text, say): work that finished once in this process is
    not tried again. A command loads its task before it starts Ray, so the copy is forked
    from a process without Ray's threads, whose locks a copy could inherit held."""
    if key in _FINISHED:
        return
    deadline_s = LOAD_DEADLINE_S if deadline_s is None else deadline_s
    pid = os.fork()
    if pid == 0:  # the copy: its outcome is only whether it ends
        try:
            forget()  # the driver's model keys: the copy runs the task's code, not the model's
            work()
        finally:
            os._exit(0)
    try:
        ends_by, pause = time.monotonic() + deadline_s, 0.002
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > ends_by:
                raise TaskPathError(
                    param,
                    f"{shown} did not finish loading within {deadline_s:g} s: does its top "
                    "level, or a function the task calls at load, loop or wait forever?",
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    except BaseException:  # the deadline, or Ctrl-C while waiting: the copy goes too
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    _FINISHED.add(key)


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
        finishes_in_time(self._module, (self.text, self.filename), function, relative)
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
