"""Why candidates failed and why proposals were dropped, counted.

Feedback is free text (compiler output, a checker's complaint, a traceback). Reasons are
grouped by the failing stage's line with numbers and addresses blanked, so that "knob sum 71
exceeds 64" and "knob sum 90 exceeds 64" are one reason and the table stays short; each is
shown as its first candidate said it, numbers and all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from evolve.plugin.failure_line import TRACEBACK, exception_line, headline, what_failed
from evolve.plugin.failure_line import failed_stage as stopped_at
from evolve.plugin.results import ERROR, TIMEOUT
from evolve.store.records import FailedEvaluation, ProposalRecord

REASON_CHARS = 120
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STAGE_TAG = re.compile(r"^\[[\w.-]+\]\s*")


@dataclass(frozen=True)
class Reason:
    stage: str
    text: str  # as its first candidate's failure said it
    count: int
    example: int  # the id of a candidate that failed so, the first one


def failed_stage(failure: FailedEvaluation) -> str:
    """The stage that stopped the cascade; `evaluator` when the evaluator itself failed."""
    stage = stopped_at(failure.stages)
    if stage is not None:
        return stage.name
    if failure.status.endswith("_failed"):
        return failure.status.removesuffix("_failed")
    return "evaluator" if failure.status == ERROR else failure.status


def said(failure: FailedEvaluation) -> str:
    """The failure in the failing stage's own line, numbers and all (clipped)."""
    _, text = what_failed(failure.stages, failure.feedback)
    if text is failure.feedback and TRACEBACK in text:  # past any cut: the feedback's end
        line = exception_line(failure.feedback_tail) or headline(text)
    else:
        line = headline(text)
    line = _STAGE_TAG.sub("", line)
    if not line:
        return "timed out" if failure.status == TIMEOUT else f"{failure.status}, no feedback"
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"


def reason(failure: FailedEvaluation) -> str:
    """What failures alike share: their line with numbers and addresses blanked (see the
    module's docstring)."""
    return _NUMBER.sub("N", said(failure))


def by_stage(failures: Iterable[FailedEvaluation]) -> Counter[str]:
    return Counter(failed_stage(failure) for failure in failures)


def reasons(failures: Iterable[FailedEvaluation], per_stage: int) -> list[Reason]:
    """The `per_stage` commonest reasons of each stage, commonest stage first, each in the
    words of its first candidate."""
    counts: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], tuple[int, str]] = {}
    for failure in failures:
        key = (failed_stage(failure), reason(failure))
        counts[key] += 1
        examples.setdefault(key, (failure.candidate_id, said(failure)))
    stages = Counter[str]()
    for (stage, _), count in counts.items():
        stages[stage] += count
    ranked = sorted(counts.items(), key=lambda item: (-stages[item[0][0]], item[0][0], -item[1]))
    shown: Counter[str] = Counter()
    kept: list[Reason] = []
    for (stage, text), count in ranked:
        if shown[stage] < per_stage:
            shown[stage] += 1
            example, words = examples[(stage, text)]
            kept.append(Reason(stage, words, count, example))
    return kept


def dropped(proposals: Iterable[ProposalRecord]) -> Counter[str]:
    """Proposals that made no candidate, by outcome; in-flight ones as `in_flight`."""
    return Counter(p.outcome or "in_flight" for p in proposals if p.outcome != "candidate")
