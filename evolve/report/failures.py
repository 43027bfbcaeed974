"""Why candidates failed and why proposals were dropped, counted.

Feedback is free text (compiler output, a checker's complaint, a traceback). Reasons are
grouped by a normalised first line, numbers and addresses blanked, so that "knob sum 71
exceeds 64" and "knob sum 90 exceeds 64" are one reason and the table stays short.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from evolve.results import ERROR, TIMEOUT
from evolve.store.records import FailedEvaluation, ProposalRecord

REASON_CHARS = 120
TRACEBACK = "Traceback (most recent call last)"
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STAGE_TAG = re.compile(r"^\[[\w.-]+\]\s*")


@dataclass(frozen=True)
class Reason:
    stage: str
    text: str
    count: int
    example: int  # the id of a candidate that failed so, the first one


def failed_stage(failure: FailedEvaluation) -> str:
    """The stage that stopped the cascade; `evaluator` when the evaluator itself failed."""
    for stage in failure.stages:
        if not stage.ok:
            return stage.name
    if failure.status.endswith("_failed"):
        return failure.status.removesuffix("_failed")
    return "evaluator" if failure.status == ERROR else failure.status


def reason(failure: FailedEvaluation) -> str:
    """The failure in one normalised line (see the module's docstring)."""
    text = next((stage.feedback for stage in failure.stages if not stage.ok), "")
    text = text or failure.feedback
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "timed out" if failure.status == TIMEOUT else f"{failure.status}, no feedback"
    if TRACEBACK in text:  # the exception is the traceback's last line, past any cut
        end = failure.feedback_tail if text is failure.feedback else text
        lines = [line.strip() for line in end.splitlines() if line.strip()] or lines
    line = lines[-1] if TRACEBACK in text else lines[0]
    line = _NUMBER.sub("N", _STAGE_TAG.sub("", line))
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def by_stage(failures: Iterable[FailedEvaluation]) -> Counter[str]:
    return Counter(failed_stage(failure) for failure in failures)


def reasons(failures: Iterable[FailedEvaluation], per_stage: int) -> list[Reason]:
    """The `per_stage` commonest reasons of each stage, commonest stage first."""
    counts: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], int] = {}
    for failure in failures:
        key = (failed_stage(failure), reason(failure))
        counts[key] += 1
        examples.setdefault(key, failure.candidate_id)
    stages = Counter[str]()
    for (stage, _), count in counts.items():
        stages[stage] += count
    ranked = sorted(counts.items(), key=lambda item: (-stages[item[0][0]], item[0][0], -item[1]))
    shown: Counter[str] = Counter()
    kept: list[Reason] = []
    for (stage, text), count in ranked:
        if shown[stage] < per_stage:
            shown[stage] += 1
            kept.append(Reason(stage, text, count, examples[(stage, text)]))
    return kept


def dropped(proposals: Iterable[ProposalRecord]) -> Counter[str]:
    """Proposals that made no candidate, by outcome; in-flight ones as `in_flight`."""
    return Counter(p.outcome or "in_flight" for p in proposals if p.outcome != "candidate")
