"""The programs a run holds one small change from a parent, named in the prompts on it.

A model asked to improve a parent does not see the rest of the run. Setting again the knob
whose change made the parent gives back the parent's own parent or one of its siblings;
making a sibling's change on top of the parent's gives back that sibling's child that made
the parent's change (the two made in the other order); setting again the knob whose change
made the parent's parent gives back a cousin, where a sibling of the parent's parent made
the parent's change too. Each comes back a duplicate, paid for and thrown away. So a prompt
names the relatives that are one small change from its parent
(evolve/mutators/small_change.py): its parents, its siblings and their children, its
cousins, and its own children that its recent attempts do not list already, each as its
change to the parent, with its score.

Relatives are found in memory. The run's children by first parent are read from the store
once, without their code, the first time a prompt needs them, and kept up to date by the
engine from then on; the records of relatives the engine's cache lacks are read together in
one query. A program never changes, so whether a relative is one change from a parent, and
how that change reads, is worked out once per pair and kept.

Requests sent together never see each other's answers: a proposal on a sibling in flight
that makes the parent's change gives the same program as the sibling's change made on the
parent. So a prompt also names the parent's siblings that model proposals in flight work
on, each with the change that made it (`racing`).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Collection

from evolve.engine.candidate_cache import CandidateCache
from evolve.mutators.base import Neighbour
from evolve.mutators.small_change import small_change
from evolve.store import CandidateRecord, Store

SCANNED = 24  # of the siblings of a parent and of its parent, and of its children: the newest
PER_SIBLING = 4  # of the children of each of those siblings, the newest looked at
SHOWN_CHARS = 480  # the changes shown on one prompt together, about 120 tokens
RACING_SHOWN = 4  # siblings with proposals in flight named on one prompt, the newest
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

    def racing(self, parent: CandidateRecord, flying: Collection[int]) -> tuple[Neighbour, ...]:
        """The siblings of `parent` among `flying` (the parents of the model proposals in
        flight), each with the change that made it from their common parent, where that
        is small and the sibling is more than one change from `parent`. A proposal on such
        a sibling that makes `parent`'s change gives the program that its change made on
        `parent` would: two requests at once that cannot see each other's answers."""
        if not parent.parent_ids:
            return ()
        first = parent.parent_ids[0]
        records = self.candidates.many([first, *flying])
        common = records.get(first)
        siblings = [
            record
            for i, record in records.items()
            if i != parent.id and record.parent_ids[:1] == (first,)
        ]
        racing = []
        for sibling in siblings:
            change = self._change(common, sibling) if common is not None else None
            if change and not self._change(parent, sibling):
                racing.append(Neighbour(sibling.id, change, sibling.status, sibling.score))
        return tuple(sorted(racing, key=lambda n: n.id)[-RACING_SHOWN:])

    def _change(self, base: CandidateRecord, other: CandidateRecord) -> str | None:
        pair = (base.id, other.id)
        if pair not in self.changes:
            self._keep(pair, small_change(base.program, other.program))
        return self.changes.get(pair)

    def _relatives(self, parent: CandidateRecord) -> list[int]:
        """Its parents, its newest siblings and their newest children, the newest children
        of its parent's newest siblings, and its own newest children, without repeats: a
        bounded number, however large the run."""
        found = list(parent.parent_ids)
        if parent.parent_ids:
            siblings = self._siblings(parent.parent_ids[0], parent.id)
            found += siblings
            found += [i for sibling in siblings for i in self.family.of(sibling)[-PER_SIBLING:]]
            grandparent = self.candidates.many(parent.parent_ids[:1]).get(parent.parent_ids[0])
            if grandparent is not None and grandparent.parent_ids:
                uncles = self._siblings(grandparent.parent_ids[0], grandparent.id)
                found += [i for uncle in uncles for i in self.family.of(uncle)[-PER_SIBLING:]]
        found += self.family.of(parent.id)[-SCANNED:]
        return list(dict.fromkeys(found))

    def _siblings(self, parent_id: int, child_id: int) -> list[int]:
        """The newest SCANNED children of `parent_id` but `child_id`."""
        return [i for i in self.family.of(parent_id)[-SCANNED - 1 :] if i != child_id][-SCANNED:]

    def _keep(self, pair: tuple[int, int], change: str | None) -> None:
        self.changes[pair] = change
        if len(self.changes) > PAIRS_KEPT:
            self.changes.popitem(last=False)
