"""The programs a run holds one small change from a parent, named in the prompts on it.

A model asked to improve a parent does not see the rest of the run. Setting again the knob
whose change made the parent gives back the parent's own parent or one of its siblings;
making a sibling's change on top of the parent's gives back that sibling's child that made
the parent's change (the two made in the other order). Each comes back a duplicate, paid
for and thrown away. So a prompt names the relatives that are one small change from its
parent (evolve/mutators/small_change.py): its parents, its siblings, their children, and its own
children that its recent attempts do not list already, each as its change to the parent,
with its score.

Relatives are found in memory. The run's children by first parent are read from the store
once, without their code, the first time a prompt needs them, and kept up to date by the
engine from then on; the records of relatives the engine's cache lacks are read together in
one query. A program never changes, so whether a relative is one change from a parent, and
how that change reads, is worked out once per pair and kept.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Collection

from evolve.candidate_cache import CandidateCache
from evolve.mutators.base import Neighbour
from evolve.mutators.small_change import small_change
from evolve.store import CandidateRecord, Store

SCANNED = 24  # of a parent's siblings, and of its own children, the newest looked at
PER_SIBLING = 4  # of each of those siblings' children, the newest looked at
SHOWN_CHARS = 480  # the changes shown on one prompt together, about 120 tokens
PAIRS_KEPT = 1 << 16  # (parent, relative) pairs whose change is kept; a bound, not the run


class Family:
    """Each candidate's children by their first parent, oldest first."""

    def __init__(self, store: Store, run_name: str) -> None:
        self.store, self.run_name = store, run_name
        self.children: dict[int, list[int]] | None = None  # read at the first question

    def note(self, child: CandidateRecord) -> None:
        """A child just added to the run."""
        if self.children is not None and child.parent_ids:
            self.children.setdefault(child.parent_ids[0], []).append(child.id)

    def of(self, candidate_id: int) -> list[int]:
        if self.children is None:
            read: defaultdict[int, list[int]] = defaultdict(list)
            for outline in self.store.candidate_outlines(self.run_name):
                if outline.parent_ids:
                    read[outline.parent_ids[0]].append(outline.id)
            self.children = dict(read)
        return self.children.get(candidate_id, [])


class Neighbours:
    def __init__(self, store: Store, run_name: str, candidates: CandidateCache) -> None:
        self.family = Family(store, run_name)
        self.candidates = candidates
        self.changes: OrderedDict[tuple[int, int], str | None] = OrderedDict()

    def note(self, child: CandidateRecord) -> None:
        """A child just added to the run."""
        self.family.note(child)

    def of(self, parent: CandidateRecord, listed: Collection[int] = ()) -> tuple[Neighbour, ...]:
        """The relatives of `parent` one small change from it, but those in `listed` (shown
        elsewhere in the prompt), best first, as many as SHOWN_CHARS hold."""
        ids = [i for i in self._relatives(parent) if i != parent.id and i not in listed]
        unknown = [i for i in ids if (parent.id, i) not in self.changes]
        for candidate_id, record in self.candidates.many(unknown).items():
            self._keep((parent.id, candidate_id), small_change(parent.program, record.program))
        near = {i: change for i in ids if (change := self.changes.get((parent.id, i)))}
        records = self.candidates.many(near)
        ranked = sorted(records.values(), key=lambda r: (r.score is None, -(r.score or 0.0), r.id))
        shown, room = [], SHOWN_CHARS
        for record in ranked:
            change = near[record.id]
            if len(change) <= room:
                room -= len(change)
                shown.append(Neighbour(record.id, change, record.status, record.score))
        return tuple(shown)

    def _relatives(self, parent: CandidateRecord) -> list[int]:
        """Its parents, its newest siblings and their newest children, and its own newest
        children, without repeats: a bounded number, however large the run."""
        found = list(parent.parent_ids)
        if parent.parent_ids:
            family = self.family.of(parent.parent_ids[0])
            siblings = [i for i in family[-SCANNED - 1 :] if i != parent.id][-SCANNED:]
            found += siblings
            for sibling in siblings:
                found += self.family.of(sibling)[-PER_SIBLING:]
        found += self.family.of(parent.id)[-SCANNED:]
        return list(dict.fromkeys(found))

    def _keep(self, pair: tuple[int, int], change: str | None) -> None:
        self.changes[pair] = change
        if len(self.changes) > PAIRS_KEPT:
            self.changes.popitem(last=False)
