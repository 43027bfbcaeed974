"""How model proposals are spread over parents, so that each model call can buy a new idea.

Requests sent together never see each other's answers, and a model asked the same question
about the same program gives the same few answers: many requests on one parent at once come
back as duplicates of one another, each paid for. So a parent has at most
`search.in_flight_per_parent` model proposals in flight; while the population is small,
the run holds no more model proposals in flight than that many per scored program (the
seed alone gets that many, not every slot). A prompt on a parent names the proposals still
in flight on it, so the model knows it is not the only one asked.

A proposal rejected before evaluation (a duplicate, or too similar to a program of the run)
cools its parent: no model proposal starts on it again until something else happens in the
run (another proposal settles, or an evaluation is recorded), by when its prompt shows the
rejected change among the parent's recent attempts. With nothing else in flight the parent
is open again at once, so a run never stalls on a cooled parent. A setting of 0 turns the
cap, the small-population limit and the cooling off.
"""

from __future__ import annotations

from collections.abc import Iterable


class Spread:
    def __init__(self, per_parent: int) -> None:
        """`per_parent`: model proposals in flight on one parent at most; 0, no limit."""
        self.per_parent = per_parent
        self.flying: dict[int, tuple[int, str]] = {}  # proposal id: (parent id, label)
        self.scored: set[int] = set()
        self.events = 0  # settlements and evaluations so far: the clock cooling runs on
        self.cooled: dict[int, int] = {}  # parent id: `events` when its proposal was rejected

    def started(self, proposal_id: int, parent_id: int, label: str) -> None:
        """A model proposal on `parent_id` was opened; `label` names it in later prompts."""
        self.flying[proposal_id] = (parent_id, label)

    def ended(self, proposal_id: int, *, rejected: bool) -> None:
        """A model proposal settled; `rejected`: as a duplicate or too similar."""
        parent = self.flying.pop(proposal_id, None)
        self.events += 1
        if rejected and parent is not None and self.per_parent:
            self.cooled[parent[0]] = self.events

    def evaluated(self, candidate_id: int, scored: bool) -> None:
        """An evaluation was recorded: the candidate is a scored program or no longer one."""
        self.events += 1
        if scored:
            self.scored.add(candidate_id)
        else:
            self.scored.discard(candidate_id)

    def restore(self, scored: Iterable[int]) -> None:
        """The scored programs of a resumed run."""
        self.scored.update(scored)

    def room(self, model_in_flight: int) -> bool:
        """Whether one more model proposal may start: at most `per_parent` per scored
        program in flight at once, and one while none is scored."""
        if not self.per_parent:
            return True
        return model_in_flight < max(1, self.per_parent * len(self.scored))

    def open_to(self, parent_id: int) -> bool:
        """Whether a model proposal may start on `parent_id` now."""
        if not self.per_parent:
            return True
        mine = sum(parent == parent_id for parent, _ in self.flying.values())
        if mine >= self.per_parent:
            return False
        cooled_at = self.cooled.get(parent_id)
        if cooled_at is None:
            return True
        if cooled_at == self.events and self.flying:
            return False
        del self.cooled[parent_id]
        return True

    def parents_in_flight(self) -> set[int]:
        """The parents of the model proposals in flight."""
        return {parent for parent, _ in self.flying.values()}

    def being_tried(self, parent_id: int) -> tuple[str, ...]:
        """The labels of the model proposals in flight on `parent_id`, oldest first."""
        return tuple(label for parent, label in self.flying.values() if parent == parent_id)
