"""What the run reported: one JSON object of metrics, read as hostile.

The object comes from metrics.json when the run wrote one, else from the last non-blank
line of its stdout. Numbers are metrics (booleans count 0/1; NaN and infinities are kept,
and scoring refuses them); any other value (a string, a list, null) becomes an artifact
of the same name, shown in the feedback, by the python evaluator's rule. The candidate
wrote it, so it is bounded, parsed and checked before anything uses it.
"""

from __future__ import annotations

import json

from evolve.evaluators.command.params import METRICS_FILE
from evolve.evaluators.python.outcome import MAX_METRICS, MAX_NAME_CHARS, Returned, clip
from evolve.evaluators.python.runner import normalise
from evolve.plugin.sandbox import RunResult
from evolve.plugin.stages import StageFailed

MAX_REPORT_BYTES = 16 * 1024**2
ASK = f"print one JSON object of metrics as the last line of stdout, or write {METRICS_FILE}"


def reported(result: RunResult) -> Returned:
    """The run's metrics and artifacts; StageFailed says what is missing or malformed."""
    data, source = result.files.get(METRICS_FILE), METRICS_FILE
    if data is None:
        if result.output_truncated:
            raise StageFailed(
                "the run printed more than the output cap, so its last line of stdout is "
                f"lost: write its metrics to {METRICS_FILE} instead"
            )
        data, source = _last_line(result.stdout), "the last line of stdout"
        if not data:
            raise StageFailed(f"the run reported no metrics, its stdout being empty: {ASK}")
    if len(data) > MAX_REPORT_BYTES:
        raise StageFailed(f"{source} holds {len(data)} bytes, over the {MAX_REPORT_BYTES} cap")
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError) as exc:
        shown = clip(data.decode(errors="replace"), 300)
        raise StageFailed(f"{source} is not JSON ({exc}): {shown}\n{ASK}") from None
    if not isinstance(parsed, dict):
        raise StageFailed(f"{source} holds a JSON {type(parsed).__name__}, not an object: {ASK}")
    return _checked(parsed, source)


def _last_line(stdout: bytes) -> bytes:
    lines = [line for line in stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else b""


def _checked(parsed: dict, source: str) -> Returned:
    found = normalise(parsed)
    metrics, artifacts = found["metrics"], found["artifacts"]
    if len(metrics) > MAX_METRICS:
        raise StageFailed(f"{source}: {len(metrics)} metrics, over the cap of {MAX_METRICS}")
    long = [name for name in (*metrics, *artifacts) if len(name) > MAX_NAME_CHARS]
    if long:
        raise StageFailed(f"{source}: names over {MAX_NAME_CHARS} characters: {clip(long[0], 40)}")
    return Returned(metrics, artifacts)
