"""What one stage's sandbox run produced, read back and checked, and how it is shown.

The result arrives over the job's result channel (its stdout, see runner.py), written from
inside the candidate's process, so it is read as hostile: exactly one whole frame, bounded,
parsed, and every field checked for its type. How the job ended comes first: a timeout, a
signal or a non-zero exit is reported as such (require_ok), whatever the channel says.
Artifacts are clipped before they reach the feedback, which goes into the model's prompt,
and before they are stored, so a huge one cannot flood either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from evolve.evaluators.python.runner import HEADER
from evolve.plugin.failure_line import exception_line
from evolve.plugin.sandbox import RunResult
from evolve.plugin.stages import StageFailed, excerpt, require_ok

MAX_RESULT_BYTES = 16 * 1024**2
MAX_METRICS = 256  # per stage: the store keeps them all, and boards show them as columns
MAX_NAME_CHARS = 200  # of a metric's or an artifact's name
METRICS_CHARS = 1000  # of a stage's metrics, as shown
ARTIFACT_CHARS = 1500  # each artifact, as stored and as shown
FEEDBACK_CHARS = 4000  # all the artifacts shown in one evaluation's feedback
MAX_ARTIFACTS = 64  # stored per evaluation
MIN_SHOWN_CHARS = 200  # below this much room an artifact is named, not shown
STDERR_BYTES = 1500


@dataclass
class Returned:
    """One stage's metrics (numbers, NaN and infinities kept) and artifacts (text)."""

    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)


class EvaluatorRaised(StageFailed):
    """The evaluator function raised; `traceback` is its traceback, whole."""

    def __init__(self, feedback: str, traceback: str) -> None:
        super().__init__(feedback)
        self.traceback = traceback


def read(result: RunResult, call: str) -> Returned:
    """What `call` returned, from the run's result channel; StageFailed (EvaluatorRaised when
    the call raised) saying how the job ended and what it printed, when there is nothing
    to read or the channel holds anything but the runner's one frame."""
    require_ok(result, call)
    data = _framed(result, call)
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise StageFailed(f"{call}: the result is not JSON ({exc})") from None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), str):
        trace = parsed["error"]
        raised = exception_line(trace) or "an exception"
        feedback = f"{call} raised {raised}\n{clip(trace, ARTIFACT_CHARS, tail=True)}"
        raise EvaluatorRaised(feedback + _stderr(result), trace)
    return _checked(parsed, call)


def _framed(result: RunResult, call: str) -> bytes:
    """The JSON of the channel's one frame: HEADER, its length, a newline, then exactly that
    many bytes and nothing after them."""
    channel = result.stdout
    if not channel:
        raise StageFailed(
            f"{call}: the job exited with code 0 without sending its result (did the "
            "evaluator or the candidate end the process, with os._exit say?)" + _stderr(result)
        )
    head, newline, data = channel.partition(b"\n")
    size = head.removeprefix(HEADER)
    if not head.startswith(HEADER) or not newline or not size.isdigit():
        raise StageFailed(
            f"{call}: the result channel holds bytes the runner did not send (something in "
            "the job wrote to it)" + _stderr(result)
        )
    if int(size) > MAX_RESULT_BYTES:
        raise StageFailed(
            f"{call}: the result holds {int(size)} bytes, over the {MAX_RESULT_BYTES} byte "
            "cap: return smaller artifacts"
        )
    if len(data) < int(size) and result.output_truncated:
        raise StageFailed(
            f"{call}: the result ({int(size)} bytes) is larger than the job's output cap, "
            "sandbox.max_output_kb: return fewer or smaller artifacts, or raise the cap"
        )
    if len(data) != int(size):
        raise StageFailed(
            f"{call}: the result channel holds {len(data)} bytes where its header announced "
            f"{int(size)} (something in the job wrote to it)" + _stderr(result)
        )
    return data


def _checked(parsed: object, call: str) -> Returned:
    if not isinstance(parsed, dict):
        raise StageFailed(f"{call}: the result holds {type(parsed).__name__}, not a dict")
    metrics, artifacts = parsed.get("metrics"), parsed.get("artifacts")
    if not isinstance(metrics, dict) or not isinstance(artifacts, dict):
        raise StageFailed(f"{call}: the result lacks its metrics or artifacts")
    if len(metrics) > MAX_METRICS:
        raise StageFailed(f"{call}: {len(metrics)} metrics, over the cap of {MAX_METRICS}")
    bad = [k for k, v in metrics.items() if isinstance(v, bool) or not isinstance(v, int | float)]
    bad += [k for k, v in artifacts.items() if not isinstance(v, str)]
    bad += [k for k in (*metrics, *artifacts) if len(k) > MAX_NAME_CHARS]
    if bad:
        shown = [clip(name, 40) for name in bad[:5]]
        raise StageFailed(f"{call}: the result holds malformed entries: {shown}")
    try:
        return Returned({k: float(v) for k, v in metrics.items()}, dict(artifacts))
    except OverflowError:  # an integer written out to hundreds of digits
        raise StageFailed(f"{call}: the result holds a metric too large for a float") from None


def stderr_tail(result: RunResult) -> str:
    return excerpt(result.stderr, tail=True, limit=STDERR_BYTES)


def _stderr(result: RunResult) -> str:
    tail = stderr_tail(result)
    return f"\nstderr:\n{tail}" if tail else ""


HEAD_CUT = re.compile(r"\n\[\.\.\. (\d+) more characters cut\]\Z")
TAIL_CUT = re.compile(r"\A\[\.\.\. (\d+) characters cut\]\n")


def clip(text: str, limit: int, *, tail: bool = False) -> str:
    """At most about `limit` characters, with a marker saying how many were cut: the head
    of most things, the tail of tracebacks and stderr, where the error is. A text the runner
    clipped in the sandbox carries its marker already, and its count is added in."""
    marker = (TAIL_CUT if tail else HEAD_CUT).search(text)
    earlier = int(marker.group(1)) if marker else 0
    if marker:
        text = text[marker.end() :] if tail else text[: marker.start()]
    if len(text) <= limit and not earlier:
        return text
    cut = max(len(text) - limit, 0) + earlier
    if tail:
        return f"[... {cut} characters cut]\n{text[-limit:]}"
    return f"{text[:limit]}\n[... {cut} more characters cut]"


def stored(artifacts: Mapping[str, str]) -> dict[str, str]:
    """The artifacts as EvalResult keeps them: each clipped, at most MAX_ARTIFACTS."""
    names = list(artifacts)
    kept = {name: clip(artifacts[name], ARTIFACT_CHARS, tail=_is_log(name)) for name in names}
    if len(names) > MAX_ARTIFACTS:
        kept = {name: kept[name] for name in names[:MAX_ARTIFACTS]}
        kept["(more artifacts)"] = f"{len(names) - MAX_ARTIFACTS} more not kept: " + ", ".join(
            names[MAX_ARTIFACTS : MAX_ARTIFACTS + 20]
        )
    return kept


def _is_log(name: str) -> bool:
    return name.endswith((".stderr", ".traceback"))


def describe(metrics: Mapping[str, float]) -> str:
    text = ", ".join(f"{name}={value:.6g}" for name, value in metrics.items())
    return clip(text, METRICS_CHARS) if text else "none"


class Shown:
    """The artifacts' share of one evaluation's feedback: each clipped, and once FEEDBACK_CHARS
    are used up, the rest named but not shown."""

    def __init__(self, budget: int = FEEDBACK_CHARS) -> None:
        self.left = budget

    def artifacts(self, artifacts: Mapping[str, str]) -> str:
        lines: list[str] = []
        hidden: list[str] = []
        for name, text in artifacts.items():
            if self.left < MIN_SHOWN_CHARS:
                hidden.append(name)
                continue
            limit = min(ARTIFACT_CHARS, self.left)
            entry = f"{name}:\n{clip(text, limit, tail=_is_log(name))}"
            lines.append(entry)
            self.left -= len(entry)
        if hidden:
            more = f" and {len(hidden) - 10} more" if len(hidden) > 10 else ""
            lines.append(f"(not shown, the feedback is full: {', '.join(hidden[:10])}{more})")
        return "\n".join(lines)
