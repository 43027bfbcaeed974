"""What each operator and each model bought: proposals, accepted children, improvements over
the parent, and what they cost.

A proposal is accepted when it became a candidate that passed its evaluation; it improved
when that candidate's score beats its (first) parent's. Both scores are the candidates'
scores now, after every re-measurement. Candidates with no proposal in the ledger (made
before proposals were recorded, or written straight to the store) count under their
mutation record's operator, at no cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from evolve.store.records import CandidateOutline, ModelSpend, ProposalRecord

NO_MODEL = "no model"


@dataclass
class Tally:
    name: str
    proposals: int = 0
    candidates: int = 0  # new programs
    accepted: int = 0  # ... that passed their evaluation
    improved: int = 0  # ... and beat their parent
    gain: float = 0.0  # the score they gained over their parents, summed over the improved
    best_gain: float = 0.0
    cost_usd: float = 0.0
    tokens: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposals if self.proposals else 0.0

    @property
    def cost_per_improvement(self) -> float | None:
        return self.cost_usd / self.improved if self.improved else None


@dataclass(frozen=True)
class _Attempt:
    """One proposal, or a candidate standing in for the proposal it has none of."""

    operator: str
    models: tuple[str, ...]
    outcome: str
    child: CandidateOutline | None
    parent: CandidateOutline | None
    cost_usd: float
    tokens: int


def _attempts(
    candidates: Mapping[int, CandidateOutline], proposals: Iterable[ProposalRecord]
) -> list[_Attempt]:
    attempts: list[_Attempt] = []
    proposed: set[int] = set()
    for proposal in proposals:
        child = candidates.get(proposal.candidate_id) if proposal.candidate_id else None
        parent = candidates.get(proposal.parent_ids[0]) if proposal.parent_ids else None
        if child is not None:
            proposed.add(child.id)
        attempts.append(
            _Attempt(
                proposal.operator,
                proposal.models,
                proposal.outcome or "in_flight",
                child,
                parent,
                proposal.cost_usd,
                proposal.tokens,
            )
        )
    for candidate in candidates.values():
        if candidate.id in proposed or not candidate.parent_ids:
            continue
        mutation = candidate.mutation
        operator = str(mutation.get("mutator") or mutation.get("operator") or "?")
        model = mutation.get("model")
        attempts.append(
            _Attempt(
                operator,
                (str(model),) if model else (),
                "candidate",
                candidate,
                candidates.get(candidate.parent_ids[0]),
                0.0,
                0,
            )
        )
    return attempts


def _count(tally: Tally, attempt: _Attempt) -> None:
    tally.proposals += 1
    tally.outcomes[attempt.outcome] = tally.outcomes.get(attempt.outcome, 0) + 1
    tally.cost_usd += attempt.cost_usd
    tally.tokens += attempt.tokens
    child = attempt.child
    if child is None:
        return
    tally.candidates += 1
    if child.score is None:
        return
    tally.accepted += 1
    parent = attempt.parent
    if parent is not None and parent.score is not None and child.score > parent.score:
        gain = child.score - parent.score
        tally.improved += 1
        tally.gain += gain
        tally.best_gain = max(tally.best_gain, gain)


def by_operator(
    candidates: Mapping[int, CandidateOutline], proposals: Iterable[ProposalRecord]
) -> list[Tally]:
    """One tally per operator, most proposals first."""
    tallies: dict[str, Tally] = {}
    for attempt in _attempts(candidates, proposals):
        _count(tallies.setdefault(attempt.operator, Tally(attempt.operator)), attempt)
    return sorted(tallies.values(), key=lambda t: (-t.proposals, t.name))


def by_model(
    candidates: Mapping[int, CandidateOutline],
    proposals: Iterable[ProposalRecord],
    spend: Iterable[ModelSpend],
) -> list[Tally]:
    """One tally per model, with its spend and tokens from the ledger's calls (exact, and
    split by model where one proposal asked two); proposals that asked no model count
    under NO_MODEL. Empty when the run called no model."""
    ledger = {f"{s.provider}:{s.model}": s for s in spend}
    if not ledger:
        return []
    tallies: dict[str, Tally] = {}
    for attempt in _attempts(candidates, proposals):
        for model in attempt.models or (NO_MODEL,):
            _count(tallies.setdefault(model, Tally(model)), attempt)
    for name, paid in ledger.items():
        tally = tallies.setdefault(name, Tally(name))
        tally.cost_usd, tally.tokens = paid.cost_usd, paid.input_tokens + paid.output_tokens
    return sorted(tallies.values(), key=lambda t: (t.name == NO_MODEL, -t.proposals, t.name))
