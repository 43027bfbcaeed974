"""The line that says why an evaluation failed, for every place that shows a failure in one
line: the run's events, the report's reasons, the digest a model reads, `evolve check`.

An evaluation's feedback joins every stage's words, passed stages' notes included (a build's
code size, say), so its first line is often not about the failure at all. The failing
stage's own message is; where no stage failed (an evaluator that crashed, a deadline the
watchdog called), the whole feedback is all there is.
"""

from __future__ import annotations

from collections.abc import Iterable

from evolve.plugin.results import StageResult

TRACEBACK = "Traceback (most recent call last)"
FRAME = "  File "


def failed_stage(stages: Iterable[StageResult]) -> StageResult | None:
    """The stage that stopped the cascade, if one did."""
    return next((stage for stage in stages if not stage.ok), None)


def what_failed(stages: Iterable[StageResult], feedback: str) -> tuple[str, str]:
    """The failing stage's name and its own message; ("", feedback) where no stage failed
    or the failing one said nothing."""
    stage = failed_stage(stages)
    if stage is None or not stage.feedback.strip():
        return "", feedback
    return stage.name, stage.feedback


def headline(text: str) -> str:
    """The line of `text` that says what went wrong: its first non-blank line, unless that
    only introduces a traceback ("evaluator crashed:"), which the exception's line then
    replaces; "" for a blank text."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if TRACEBACK in first or (first.endswith(":") and TRACEBACK in text):
        return exception_line(text) or first
    return first


def exception_line(traceback: str) -> str:
    """The first line of the exception a Python traceback ends with ("ValueError: bad
    radius"): the first line that is not indented after its last frame; "" if none is."""
    lines = traceback.splitlines()
    frames = [at for at, line in enumerate(lines) if line.startswith(FRAME)]
    after = lines[frames[-1] + 1 :] if frames else lines
    said = (line.strip() for line in after if line.strip() and not line[0].isspace())
    return next((line for line in said if not line.startswith(TRACEBACK)), "")


def event_line(stages: Iterable[StageResult], feedback: str, limit: int) -> str:
    """The failure in one line of at most `limit` characters, led by the stage that failed:
    `[measure] timing the kernel: ...`."""
    name, said = what_failed(stages, feedback)
    line = headline(said) or "no feedback"
    line = f"[{name}] {line}" if name else line
    return line if len(line) <= limit else line[: limit - 1] + "…"
