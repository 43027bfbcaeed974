"""Each parent's latest settled proposals, as every model prompt on that parent shows them.

Reading them from the store took a query per model proposal, about a twelfth of the
driver's CPU with a fast model. The driver settles every proposal of its run itself
(evolve/propose/admission.py), so a parent's list is read from the store once, the first time a
prompt needs it (a resumed run's parents have attempts from before), and kept up to date
here from then on. A child's status and score are looked up when the prompt is written,
in the engine's candidate records, which every evaluation updates.

A prompt shows distinct changes: a proposal that repeated an earlier one on the parent (a
duplicate, say) is shown once, by the attempt that made a child where one did, so that a
run of repeats does not push older ideas out of sight and have them proposed again. To
find `limit` distinct ones, REPEATS_KEPT times as many are kept.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass

from evolve.engine.candidate_cache import CandidateCache
from evolve.mutators.base import PastAttempt
from evolve.plugin.proposal_outcomes import Outcome
from evolve.store import ProposalRecord, Store

PARENTS_KEPT = 4096  # parents whose attempts are kept in memory; a bound, not the run
REPEATS_KEPT = 4  # settled proposals kept per parent, per attempt shown


@dataclass(frozen=True)
class Settled:
    """What a settled proposal leaves for later prompts on its parent."""

    operator: str
    outcome: str
    summary: str
    child_id: int | None = None
    nearest_id: int | None = None

    @classmethod
    def of(cls, proposal: ProposalRecord) -> Settled:
        return cls(
            proposal.operator,
            proposal.outcome or "",
            proposal.summary or _first_line(proposal.detail),
            proposal.candidate_id,
            proposal.nearest_id,
        )


class RecentAttempts:
    def __init__(self, store: Store, candidates: CandidateCache, limit: int) -> None:
        """`limit`: attempts shown per prompt (search.history); 0 shows none."""
        self.store, self.candidates, self.limit = store, candidates, limit
        self.kept: OrderedDict[int, deque[Settled]] = OrderedDict()  # oldest first

    def of(self, parent_id: int) -> tuple[PastAttempt, ...]:
        """Distinct changes, newest first, with each child as it stands now."""
        if not self.limit:
            return ()
        kept = self.kept.get(parent_id)
        if kept is None:
            stored = self.store.recent_attempts(parent_id, self.limit * REPEATS_KEPT)
            kept = deque(
                (Settled.of(p) for p in reversed(stored)), maxlen=self.limit * REPEATS_KEPT
            )
            self.kept[parent_id] = kept
            if len(self.kept) > PARENTS_KEPT:
                self.kept.popitem(last=False)
        self.kept.move_to_end(parent_id)
        return tuple(self._shown(settled) for settled in _distinct(reversed(kept), self.limit))

    def settled(
        self,
        parent_id: int,
        operator: str,
        outcome: Outcome,
        *,
        summary: str = "",
        detail: str = "",
        child_id: int | None = None,
        nearest_id: int | None = None,
    ) -> None:
        """A proposal on `parent_id` was just settled. A parent no prompt asked about yet
        is left to the store, which will hold this one by the time a prompt does."""
        kept = self.kept.get(parent_id)
        if kept is not None:
            line = summary or _first_line(detail)
            kept.append(Settled(operator, outcome, line, child_id, nearest_id))

    def _shown(self, settled: Settled) -> PastAttempt:
        outcome, score = settled.outcome, None
        if outcome == "candidate" and settled.child_id is not None:
            child = self.candidates.get(settled.child_id)
            outcome, score = child.status, child.score
        elif outcome == "too_similar" and settled.nearest_id is not None:
            outcome = f"too_similar to #{settled.nearest_id}"
        elif outcome == "duplicate" and settled.nearest_id is not None:
            outcome = f"duplicate of #{settled.nearest_id}"
        repeated = settled.nearest_id if settled.outcome == "duplicate" else None
        return PastAttempt(
            settled.operator, outcome, settled.summary, settled.child_id, score, repeated
        )


def _distinct(newest_first: Iterable[Settled], limit: int) -> list[Settled]:
    """Up to `limit` attempts, one per change (those without a summary each count), in the
    order each change was last tried; of a change tried more than once, the attempt that
    made a child if one did, else the newest."""
    shown: dict[str | int, Settled] = {}
    for number, settled in enumerate(newest_first):
        change: str | int = settled.summary or number
        first = shown.get(change)
        if first is None:
            if len(shown) == limit:
                continue
            shown[change] = settled
        elif first.child_id is None and settled.child_id is not None:
            shown[change] = settled
    return list(shown.values())


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:160]
