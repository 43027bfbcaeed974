"""Who may be crowned champion, and which results are too good to believe.

A leading candidate is measured twice before it is crowned, and its score is the lower of
its measurements (the store keeps the minimum), so one lucky run cannot win. A result that
the evaluator flags as physically implausible, or a child many times faster than its
parent in one step (than its nearest ancestor whose measurements are believed, where the
parent is flagged and not yet confirmed), is suspect on top of that: it is measured again
with fresh inputs, each of its later measurements carries the flag, and it is crowned
only when its two latest measurements agree, so that a trick which works on some inputs
and not on others cannot take the crown.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.plugin.plausibility import FLAGGED_METRIC, flag_lines, flag_reasons
from evolve.plugin.results import OK, EvalResult
from evolve.store import CandidateRecord, EvaluationRecord, RunRecord, Store
from evolve.store.evaluations import scoring_evaluation
from evolve.task.run_names import write_best
from evolve.task.schema import ChampionSpec
from evolve.task.stored import task_info
from evolve.views.objective_terms import Terms

MAX_MEASUREMENTS = 4  # a flagged candidate whose measurements disagree this often is refused
RESUME_REMEASURE_LIMIT = 32  # unverified leaders re-measured on resume, at most
RESUME_PAGE = 256
STEP_METRIC = "speedup"


@dataclass(frozen=True)
class Decision:
    """What to do with a leading candidate; `event` is the kind of the event that says so."""

    event: str  # "best" (crown it), "remeasure" or "warning" (refuse it)
    text: str


def agree(a: float, b: float, agreement: float) -> bool:
    """For positive scores, smaller / larger >= agreement. Written as larger magnitude minus
    the gap >= agreement x larger magnitude, which is that ratio for scores of one sign
    (negative ones come from minimised objectives) and never holds for mixed signs."""
    larger = max(abs(a), abs(b))
    return larger - abs(a - b) >= agreement * larger


def machine_kind(sandbox: dict[str, Any]) -> str | None:
    """The CPU model an evaluation ran on, as its worker recorded it (evolve/engine/workers.py)."""
    return sandbox.get("node", {}).get("cpu")


def flagged(evaluation: EvaluationRecord) -> bool:
    """Only a passing measurement counts: a failed one has no score to doubt."""
    return evaluation.status == OK and evaluation.metrics.get(FLAGGED_METRIC, 0.0) >= 1


def is_flagged(evaluations: Sequence[EvaluationRecord]) -> bool:
    return any(flagged(e) for e in evaluations)


def crowned_measurement(
    evaluations: Sequence[EvaluationRecord], agreement: float
) -> EvaluationRecord | None:
    """The measurement a candidate's figure is told by: the one the referee crowns on. Not
    flagged, its lowest (the one that gave its stored score). Flagged, the lower of its two
    latest once they agree: the crown rests on them, and a flagged first score (a noisy
    timing on a loaded machine, say) is what they were taken to settle. Flagged and not
    agreed yet, its lowest, the figure it is ranked by. None while it has no score (not
    measured yet, or any measurement failed)."""
    if any(e.status != OK for e in evaluations):
        return None
    passed = [e for e in evaluations if e.score is not None]
    if is_flagged(passed) and len(passed) >= 2:
        a, b = passed[-2:]
        if a.score is not None and b.score is not None and agree(a.score, b.score, agreement):
            return a if a.score < b.score else b
    return scoring_evaluation(passed)


class Referee:
    """Reads the store only for results that may lead or that carry a speedup, so the
    common case costs one query at most."""

    def __init__(self, spec: ChampionSpec, store: Store, terms: Terms | None = None) -> None:
        self.spec, self.store = spec, store
        self.terms = terms or Terms()  # how its decisions name a score

    def review(self, kind: str, candidate: CandidateRecord, result: EvalResult) -> str | None:
        """Before a passing result is stored: flags it when its candidate is suspect, so
        that the flag is stored with it. Returns the reason when this evaluation tripped
        the step check, which asks for a re-measurement at once."""
        if kind == "evaluate":
            step = self._step(candidate, result)
            if step is not None:
                _flag(result, step)
            return step
        earlier = self._suspicion(self.store.evaluations(candidate.id))
        if earlier is not None:
            _flag(result, f"measured again because {earlier}")
        return None

    def judge(self, candidate: CandidateRecord) -> Decision:
        """The decision for a candidate whose score leads the run."""
        crown = Decision("best", f"new best #{candidate.id}: {self.terms.figure(candidate.score)}")
        if candidate.measurements < 2:
            return Decision("remeasure", f"#{candidate.id} may be a new best; re-measuring")
        passed = [e for e in self.store.evaluations(candidate.id) if e.status == OK]
        if not is_flagged(passed):
            return crown
        a, b = (e.score for e in passed[-2:])
        if a is None or b is None:
            raise ValueError(f"#{candidate.id} has a passing evaluation without a score")
        pair = f"{self.terms.amount(a)} and {self.terms.amount(b)}"
        if agree(a, b, self.spec.agreement):
            return Decision("best", f"{crown.text} (flagged; {pair} agree)")
        if len(passed) < MAX_MEASUREMENTS:
            return Decision(
                "remeasure",
                f"#{candidate.id} is flagged and its measurements {pair} disagree; re-measuring",
            )
        return Decision(
            "warning",
            f"#{candidate.id} is flagged and its {len(passed)} measurements never agreed: "
            "not crowned",
        )

    def restore(self, run_name: str) -> tuple[CandidateRecord | None, list[CandidateRecord]]:
        """The champion of a stopped run, and the first few better candidates that were
        waiting for a re-measurement when the driver died. Refused candidates are passed
        over, however many of them rank above the champion."""
        unverified: list[CandidateRecord] = []
        last: CandidateRecord | None = None
        while page := self.store.top(run_name, RESUME_PAGE, after=last):
            for candidate in page:
                decision = self.judge(candidate)
                if decision.event == "best":
                    return candidate, unverified
                if decision.event == "remeasure" and len(unverified) < RESUME_REMEASURE_LIMIT:
                    unverified.append(candidate)
            if last is not None and page[-1].id == last.id:
                break  # never for ever: a page that ends where the last did found nothing new
            last = page[-1]
        return None, unverified

    def _step(self, candidate: CandidateRecord, result: EvalResult) -> str | None:
        child = result.metrics.get(STEP_METRIC)
        if child is None or not candidate.parent_ids:
            return None
        parent_id = candidate.parent_ids[0]
        base_id, passed = self._baseline(parent_id)
        # Compared within one machine kind where the baseline was measured on the child's:
        # a step measured across kinds is partly the machines' difference. A baseline
        # measured only elsewhere is still compared, which errs towards a re-measurement.
        kind = machine_kind(result.sandbox)
        alike = [e for e in passed if machine_kind(e.sandbox) == kind] or passed
        parent = alike[-1].metrics.get(STEP_METRIC) if alike else None
        if parent is None or not parent > 0 or math.isnan(child):
            return None
        step = child / parent
        if step <= self.spec.max_step_speedup:
            return None
        over = (
            f"parent #{parent_id}"
            if base_id == parent_id
            else f"ancestor #{base_id} (parent #{parent_id} is flagged, not yet believed)"
        )
        return (
            f"step speedup {step:.1f}x over {over} is more than "
            f"max_step_speedup {self.spec.max_step_speedup:g}x"
        )

    def _baseline(self, parent_id: int) -> tuple[int, list[EvaluationRecord]]:
        """The ancestor a step is measured from, with its passing evaluations: the parent,
        unless its own measurements are not believed (flagged, and its two latest do not
        agree yet), then the nearest ancestor along first parents whose are. A suspect's
        child claims no step over the suspect, and was crowned (in each of ten runs of
        test_champion's hundredfold test) while its parent still waited for the
        measurements that refused it; measured from the grandparent, the child is as
        suspect as its parent. Where no ancestor is believed, the parent."""
        parent_passed = self._passed(parent_id)
        ancestor_id, passed = parent_id, parent_passed
        while not self._believed(passed):
            ancestor = self.store.candidate(ancestor_id)
            if ancestor is None or not ancestor.parent_ids:
                return parent_id, parent_passed
            ancestor_id = ancestor.parent_ids[0]
            passed = self._passed(ancestor_id)
        return ancestor_id, passed

    def _passed(self, candidate_id: int) -> list[EvaluationRecord]:
        return [e for e in self.store.evaluations(candidate_id) if e.status == OK]

    def _believed(self, passed: list[EvaluationRecord]) -> bool:
        """As the referee would crown it: not flagged, or flagged with its two latest
        scores in agreement."""
        if not is_flagged(passed):
            return True
        if len(passed) < 2:
            return False
        a, b = passed[-2].score, passed[-1].score
        return a is not None and b is not None and agree(a, b, self.spec.agreement)

    @staticmethod
    def _suspicion(evaluations: Sequence[EvaluationRecord]) -> str | None:
        """Why the first flagged measurement was flagged; later ones only repeat it."""
        for evaluation in evaluations:
            if flagged(evaluation):
                reasons = flag_reasons(evaluation.feedback) or ["its metric flagged is set"]
                return f"evaluation {evaluation.id} was flagged: {'; '.join(reasons)}"
        return None


class Champion:
    """The run's best so far, crowned only as the referee allows; a crowned program is
    written to the run's folder at once, so a crash never loses it."""

    def __init__(self, referee: Referee, results_dir: Path, run_name: str) -> None:
        self.referee, self.results_dir, self.run_name = referee, results_dir, run_name
        self.best: tuple[int, float] | None = None

    def restore(self) -> list[CandidateRecord]:
        """The champion of a stopped run, and its candidates still to be re-measured."""
        champion, unverified = self.referee.restore(self.run_name)
        if champion is not None and champion.score is not None:
            self.best = (champion.id, champion.score)
        return unverified

    def consider(self, candidate: CandidateRecord, stepped: str | None) -> Decision | None:
        """What to do with a newly scored candidate: nothing, unless it is suspect (it is
        measured again, whether or not it leads) or it leads the run."""
        if stepped is not None:
            return Decision("remeasure", f"#{candidate.id} flagged: {stepped}; re-measuring")
        if candidate.score is None or (self.best is not None and candidate.score <= self.best[1]):
            return None
        decision = self.referee.judge(candidate)
        if decision.event == "best":
            self.best = (candidate.id, candidate.score)
            write_best(self.results_dir, self.run_name, candidate.id, candidate.program)
        return decision


def _flag(result: EvalResult, reason: str) -> None:
    result.metrics[FLAGGED_METRIC] = 1.0
    result.feedback = "\n\n".join(p for p in (result.feedback, *flag_lines([reason])) if p)


def champion_of(store: Store, run: RunRecord) -> CandidateRecord | None:
    """The champion of a run as a reader finds it, judged by the rules its task set: a
    top score measured once, or flagged with measurements that disagree, is not it."""
    return Referee(task_info(run).champion, store).restore(run.name)[0]
