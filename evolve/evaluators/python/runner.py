"""Runs one function of a task's evaluator.py inside the sandbox, beside the candidate.

Shipped into the job as a file and run with the sandbox's own Python, so it uses the
standard library only:

    python -I -B RUNNER EVALUATOR FUNCTION PROGRAM

It imports EVALUATOR (a path in the work dir), calls FUNCTION(PROGRAM's absolute path),
turns what comes back into plain numbers and strings, and sends them as JSON over the
result channel: {"metrics": {...}, "artifacts": {...}}, or {"error": traceback} when the
call raised. The channel is the job's stdout, taken over before the evaluator or the
candidate runs: the runner keeps a private copy of the descriptor and points stdout at
stderr, so whatever else prints lands in the job's log, and the trusted side reads only the
one framed message (`frame`) that stdout carries. No file of the work dir is read back, so a
result file the candidate writes counts for nothing, and a channel that holds anything more
or less than one whole frame fails the stage. The runner ends the process with os._exit as
soon as the frame is sent: no exit handler or finalizer the candidate registered runs after.

A warm sandbox (see evolve/sandboxes/supervise.py) imports this file once and calls
`warm(EVALUATOR)`
there, so that the evaluator and whatever it imports load once per sandbox server; each stage
is then `main([FUNCTION, PROGRAM])` in a child forked from it. The command line above
does the same two steps in one process. A warm import sees the task's files but not the
candidate's: one that fails (an evaluator that imports the program at its top, say) leaves
the sandbox to run the command line instead. `asyncio` is imported only for an evaluator whose
function returns a coroutine.

This file is trusted, but it shares its process with the candidate, which can change
anything in it while the evaluator runs; the evaluator outside the sandbox checks what
arrives (evolve/evaluators/python/outcome.py), and only a task's verify.py can make the numbers
trustworthy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import math
import numbers
import os
import sys
import traceback
import types
from typing import Any, NoReturn


def install_evaluation_result() -> None:
    """OpenEvolve's evaluators import `openevolve.evaluation_result.EvaluationResult`; when
    OpenEvolve is not installed, a stand-in with the same two fields takes its place."""
    try:
        import openevolve.evaluation_result  # noqa: F401
    except ImportError:
        pass
    else:
        return

    @dataclasses.dataclass
    class EvaluationResult:
        metrics: dict
        artifacts: dict = dataclasses.field(default_factory=dict)

    package = types.ModuleType("openevolve")
    package.__path__ = []
    module = types.ModuleType("openevolve.evaluation_result")
    EvaluationResult.__module__ = module.__name__
    module.EvaluationResult = EvaluationResult
    package.evaluation_result = module
    sys.modules["openevolve"] = package
    sys.modules["openevolve.evaluation_result"] = module


def load(path: str) -> types.ModuleType:
    """The evaluator module, registered under its file's stem (as a plain import would) with
    its folder first on sys.path, so that it can import the helpers shipped beside it."""
    folder = os.path.dirname(os.path.abspath(path))
    sys.path[:0] = [folder, os.getcwd()]
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def as_number(value: Any) -> float | None:
    """The value as a float if it is a number (a bool, numpy scalars and 0-d arrays too),
    else None. NaN and infinities stay what they are."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(value, "shape", None) == () and dtype.kind in "biuf":
        value = value.item()
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            return math.inf if value > 0 else -math.inf
    return None


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def normalise(returned: Any) -> dict[str, dict[str, Any]]:
    """Numeric metrics and text artifacts from a dict of metrics or an object with .metrics
    (and .artifacts). A metric that is not a number becomes an artifact of the same name,
    or of NAME (metric) where an artifact holds that name already."""
    if isinstance(returned, dict):
        raw_metrics, raw_artifacts = returned, {}
    elif isinstance(getattr(returned, "metrics", None), dict):
        raw_metrics = returned.metrics
        raw_artifacts = getattr(returned, "artifacts", None) or {}
        if not isinstance(raw_artifacts, dict):
            raw_artifacts = {"artifacts": raw_artifacts}
    else:
        raise TypeError(
            f"the evaluator returned {type(returned).__name__}, not a dict of metrics or an "
            "object with .metrics (OpenEvolve's EvaluationResult)"
        )
    artifacts = {str(name): as_text(value) for name, value in raw_artifacts.items()}
    metrics: dict[str, float] = {}
    for name, value in raw_metrics.items():
        number = as_number(value)
        if number is not None:
            metrics[str(name)] = number
        else:
            key = str(name) if str(name) not in artifacts else f"{name} (metric)"
            artifacts[key] = as_text(value)
    return {"metrics": metrics, "artifacts": artifacts}


def call(module: types.ModuleType, function: str, program: str) -> Any:
    target = getattr(module, function, None)
    if not callable(target):
        raise AttributeError(f"{module.__name__} has no function {function}")
    returned = target(program)
    if hasattr(returned, "__await__"):  # a coroutine evaluator (`inspect` costs an import)
        import asyncio

        returned = asyncio.run(returned)
    return returned


loaded: types.ModuleType | None = None  # the evaluator, once warm() has imported it


def warm(evaluator: str) -> None:
    """Import the evaluator, once per process; whatever its import raises propagates."""
    global loaded
    install_evaluation_result()
    loaded = load(evaluator)


HEADER = b"EVOLVE-RESULT "  # a frame: HEADER, the JSON's length in decimal, a newline, the JSON
ARTIFACT_CHARS = 8192  # each artifact and traceback sent: more than the trusted side keeps


def claim_channel() -> int:
    """The result channel: a private copy of stdout's descriptor (not inherited by what the
    job starts), stdout itself then pointed at stderr."""
    sys.stdout.flush()
    channel = os.dup(1)
    os.dup2(2, 1)
    return channel


def main(argv: list[str]) -> int:
    """A warm stage: FUNCTION of the imported evaluator on PROGRAM, its outcome sent."""
    channel = claim_channel()
    sent = outcome(argv)
    return send(channel, sent)


def cold(argv: list[str]) -> int:
    """EVALUATOR FUNCTION PROGRAM: the import and the call in one process, an import that
    raises reported as the call's error."""
    channel = claim_channel()
    evaluator, *rest = argv
    try:
        warm(evaluator)
    except BaseException:
        return send(channel, {"error": clipped(traceback.format_exc(), tail=True)})
    sent = outcome(rest)
    return send(channel, sent)


def outcome(argv: list[str]) -> dict[str, Any]:
    function, program = argv
    try:
        if loaded is None:
            raise RuntimeError("the evaluator was not imported: warm() must come first")
        returned = normalise(call(loaded, function, os.path.abspath(program)))
        artifacts = {name: clipped(text) for name, text in returned["artifacts"].items()}
        return {"metrics": returned["metrics"], "artifacts": artifacts}
    except BaseException:  # SystemExit and KeyboardInterrupt from the evaluator too
        return {"error": clipped(traceback.format_exc(), tail=True)}


def clipped(text: str, *, tail: bool = False) -> str:
    """At most ARTIFACT_CHARS of text, its head (a traceback's tail), marked as
    evolve/evaluators/python/outcome.py marks a cut, so a huge artifact or a deep traceback cannot
    fill the channel past the sandbox's output cap, and the cut is still counted whole."""
    if len(text) <= ARTIFACT_CHARS:
        return text
    cut = len(text) - ARTIFACT_CHARS
    if tail:
        return f"[... {cut} characters cut]\n{text[-ARTIFACT_CHARS:]}"
    return f"{text[:ARTIFACT_CHARS]}\n[... {cut} more characters cut]"


def frame(outcome: dict[str, Any]) -> bytes:
    data = json.dumps(outcome).encode()
    return HEADER + str(len(data)).encode() + b"\n" + data


def send(channel: int, outcome: dict[str, Any]) -> NoReturn:
    """Write the one frame and end the process at once, its exit status 0."""
    for stream in (sys.stdout, sys.stderr):
        # a stream the candidate closed or replaced must not keep the frame from being sent
        with contextlib.suppress(BaseException):
            stream.flush()
    data = memoryview(frame(outcome))
    while data:
        data = data[os.write(channel, data) :]
    os._exit(0)


if __name__ == "__main__":
    cold(sys.argv[1:])
