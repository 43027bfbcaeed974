"""A short digest of a run so far, for the prompts: what has worked and what keeps failing.

A model sees one parent at a time. The digest tells it what the whole run has learnt: how
the best score moved, which operators make children that pass and beat their parent, the
commonest failures with an example, and the changes that gained most. It is counted from
the run's candidates, with no model call: read from the store once, then kept by the
engine as candidates are added and evaluated.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from evolve.plugin.failure_line import headline, what_failed
from evolve.plugin.results import OK
from evolve.store import CandidateRecord, Store
from evolve.store.records import CandidateOutline
from evolve.store.schema import PENDING

SHOWN = 3  # failure kinds, and gains, listed
EXAMPLE_CLIP = 100  # characters of a failure's example line


@dataclass(frozen=True)
class _Candidate:
    id: int
    parent: int | None  # the first parent: the one the change was made to
    operator: str
    status: str
    score: float | None
    summary: str  # the change in one line, where the proposal stored one


def run_digest(store: Store, run_name: str) -> str:
    """About a dozen lines; empty until a child of the seed has been evaluated."""
    return _digest(store, _candidates(store, run_name))


class Outlines:
    """The run's candidates without their code, read from the store once and then kept up
    to date by the engine (`note`), so that refreshing the digest every few candidates
    never reads the whole run back: at 5,000 candidates that read cost more than the
    proposals it was written for."""

    def __init__(self, store: Store, run_name: str) -> None:
        self.store, self.run_name = store, run_name
        self.rows: dict[int, _Candidate] | None = None  # by id, oldest first

    def note(self, candidate: CandidateRecord) -> None:
        """A candidate just added, or just evaluated."""
        if self.rows is not None:
            self.rows[candidate.id] = _outline(candidate)

    def digest(self) -> str:
        if self.rows is None:
            self.rows = {c.id: c for c in _candidates(self.store, self.run_name)}
        return _digest(self.store, list(self.rows.values()))


def _digest(store: Store, every: list[_Candidate]) -> str:
    children = [c for c in every if c.parent is not None and c.status != PENDING]
    if not children:
        return ""
    scores = {c.id: c.score for c in every}
    return "\n".join(
        [
            _best(every),
            *_operators(children, scores),
            *_failures(store, children),
            *_gains(children, scores),
        ]
    )


def _outline(candidate: CandidateRecord | CandidateOutline) -> _Candidate:
    return _Candidate(
        id=candidate.id,
        parent=candidate.parent_ids[0] if candidate.parent_ids else None,
        operator=str(candidate.mutation.get("operator", "?")),
        status=candidate.status,
        score=candidate.score,
        summary=str(candidate.mutation.get("summary") or ""),
    )


def _candidates(store: Store, run_name: str) -> list[_Candidate]:
    return [_outline(candidate) for candidate in store.candidate_outlines(run_name)]


def _best(every: list[_Candidate]) -> str:
    """The best so far, where the run started, and how long since it last improved."""
    seed = every[0]
    start = f"the seed scored {seed.score:.6g}" if seed.score is not None else "the seed failed"
    best: _Candidate | None = None
    rises = 0
    for candidate in every:
        if candidate.score is None or (best is not None and candidate.score <= best.score):
            continue
        if best is not None:
            rises += 1
        best = candidate
    if best is None or best.score is None:
        return f"No program has passed yet; {start}."
    evaluated = [c for c in every if c.status != PENDING]
    since = sum(c.id > best.id for c in evaluated)
    return (
        f"Best score {best.score:.6g} (#{best.id}, {best.operator}); {start}. The best rose "
        f"{rises} times, the last {since} evaluated candidates ago."
    )


def _operators(children: list[_Candidate], scores: dict[int, float | None]) -> list[str]:
    made = Counter(c.operator for c in children)
    lines = ["Children by operator:"]
    for operator, count in made.most_common():
        mine = [c for c in children if c.operator == operator]
        passed = sum(c.status == OK for c in mine)
        gained = sum(_gain(c, scores) > 0 for c in mine)
        lines.append(f"- {operator}: {passed} of {count} passed, {gained} beat their parent")
    return lines


def _failures(store: Store, children: list[_Candidate]) -> list[str]:
    """The commonest failure statuses, each with its newest example's first line of feedback."""
    failed = [c for c in children if c.status != OK]
    if not failed:
        return []
    lines = ["Commonest failures:"]
    for status, count in Counter(c.status for c in failed).most_common(SHOWN):
        newest = max(c.id for c in failed if c.status == status)
        lines.append(f"- {status} x{count}, e.g. #{newest}: {_example(store, newest)}")
    return lines


def _example(store: Store, candidate_id: int) -> str:
    """The first line of what the failing stage said, clipped."""
    latest = store.evaluations(candidate_id)[-1:]
    if not latest:
        return "(no feedback)"
    evaluation = latest[0]
    line = headline(what_failed(evaluation.stages, evaluation.feedback)[1]) or "(no feedback)"
    return line if len(line) <= EXAMPLE_CLIP else line[: EXAMPLE_CLIP - 3] + "..."


def _gains(children: list[_Candidate], scores: dict[int, float | None]) -> list[str]:
    """The children that beat their parent by most, with what they changed."""
    ahead = sorted((c for c in children if _gain(c, scores) > 0), key=lambda c: -_gain(c, scores))
    if not ahead:
        return []
    lines = ["Largest gains over a parent:"]
    for child in ahead[:SHOWN]:
        what = f": {child.summary}" if child.summary else ""
        gain = _gain(child, scores)
        lines.append(f"- #{child.id} ({child.operator}), +{gain:.4g} over #{child.parent}{what}")
    return lines


def _gain(child: _Candidate, scores: dict[int, float | None]) -> float:
    """How much the child's score beats its first parent's; 0 when either has none."""
    parent = scores.get(child.parent) if child.parent is not None else None
    if child.score is None or parent is None:
        return 0.0
    return child.score - parent
