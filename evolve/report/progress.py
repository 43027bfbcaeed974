"""The best score as the run went, per island and overall, replayed from its evaluations.

A candidate's score is the lowest of its passing evaluations and it loses it at any
failure (evolve/store/evaluations.py), so a re-measurement can lower the best as well as
confirm it. Replaying the evaluations in the order they were recorded shows exactly that,
where the candidates' final scores alone would draw a best that never fell; and each fall
is kept (`Fall`), with the candidate whose measurement caused it, so that a plot can mark
and name it rather than draw a best that drops for no visible reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from evolve.plugin.results import OK
from evolve.store.records import CandidateOutline, EvaluationOutline

REMEASURE = "remeasure"
WHOLE_RUN = -1  # the key of the run's own curve among the islands'


@dataclass(frozen=True)
class Fall:
    """Where a group's best went down: its leader was measured again, lower or failing."""

    candidates: int
    seconds: float
    before: float
    after: float | None  # None: nothing of the group holds a score now
    candidate_id: int  # the leader whose measurement lowered it
    failed: bool  # the measurement failed, taking the leader's score away


@dataclass
class Curve:
    """A step curve of the best score: a point wherever it changed, and one at the end."""

    candidates: list[int] = field(default_factory=list)  # candidates evaluated by then
    seconds: list[float] = field(default_factory=list)  # since the run was created
    best: list[float] = field(default_factory=list)
    falls: list[Fall] = field(default_factory=list)


@dataclass(frozen=True)
class Remeasure:
    candidates: int
    seconds: float
    score: float | None  # None: the re-measurement failed
    candidate_id: int


@dataclass(frozen=True)
class Point:
    """A candidate's first passing evaluation: where it is plotted."""

    candidates: int  # evaluated by then
    seconds: float
    score: float


@dataclass(frozen=True)
class Progress:
    curves: dict[int, Curve]  # by island, and WHOLE_RUN
    remeasures: list[Remeasure]
    scores: list[Point]  # every candidate's first evaluation that passed


class _Board:
    """The current score of each candidate of one group, and the best of them."""

    def __init__(self) -> None:
        self.scores: dict[int, float] = {}
        self.best: float | None = None

    def set(self, candidate_id: int, score: float | None) -> bool:
        """Whether the best changed."""
        before = self.best
        old = self.scores.pop(candidate_id, None)
        if score is not None:
            self.scores[candidate_id] = score
        if old is not None and old == before and (score is None or score < old):
            self.best = max(self.scores.values(), default=None)
        elif score is not None and (self.best is None or score > self.best):
            self.best = score
        return self.best != before


def replay(
    candidates: Mapping[int, CandidateOutline],
    evaluations: Iterable[EvaluationOutline],
    started: float,
) -> Progress:
    """See the module's docstring; the seconds count from `started`."""
    boards: dict[int, _Board] = {}
    curves: dict[int, Curve] = {}
    passed: dict[int, float] = {}  # the lowest passing score of each candidate so far
    failed: set[int] = set()
    seen: set[int] = set()
    remeasures: list[Remeasure] = []
    scores: list[Point] = []
    seconds = 0.0
    for evaluation in evaluations:
        candidate = candidates.get(evaluation.candidate_id)
        if candidate is None:
            continue
        seen.add(candidate.id)
        seconds = max(seconds, evaluation.finished_at - started)
        ok = evaluation.status == OK and evaluation.score is not None
        if ok:
            low = passed.get(candidate.id)
            passed[candidate.id] = evaluation.score if low is None else min(low, evaluation.score)
        else:
            failed.add(candidate.id)
        if evaluation.kind == REMEASURE:
            remeasures.append(
                Remeasure(len(seen), seconds, evaluation.score if ok else None, candidate.id)
            )
        elif ok:
            scores.append(Point(len(seen), seconds, evaluation.score))
        score = None if candidate.id in failed else passed.get(candidate.id)
        for group in (candidate.island, WHOLE_RUN):
            board = boards.setdefault(group, _Board())
            before = board.best
            if board.set(candidate.id, score):
                # NaN where a failed re-measurement took the group's only score away: the
                # plotted line breaks there rather than going on at a best that is gone.
                curve = curves.setdefault(group, Curve())
                curve.candidates.append(len(seen))
                curve.seconds.append(seconds)
                curve.best.append(math.nan if board.best is None else board.best)
                if before is not None and (board.best is None or board.best < before):
                    curve.falls.append(
                        Fall(len(seen), seconds, before, board.best, candidate.id, not ok)
                    )
    for group, curve in curves.items():  # each curve runs to the end of the run
        best = boards[group].best
        if best is not None:
            curve.candidates.append(len(seen))
            curve.seconds.append(seconds)
            curve.best.append(best)
    return Progress(curves, remeasures, scores)
