"""What a proposal is shown beyond its parent: inspirations, the parent's past attempts,
the programs the run holds one change from it, the run's digest, and how many tokens it may
spend.

Model calls are what a user pays for, so each prompt carries what the run has learnt: the
island's best where it beats the parent, and programs unlike the parent (chosen by code
distance, never by chance), what was already tried on this parent and how it ended, what
else the run holds that one small change to the parent would make again
(evolve/propose/neighbours.py), and a digest of what has worked, refreshed every
`search.digest_every` candidates from the store.
The seed is never offered to a parent that beats it, as an idea or as a crossover partner
while better partners exist: everything in the run grew from it.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Collection, Sequence

from evolve.engine.budgets import Budgets
from evolve.engine.candidate_cache import CandidateCache
from evolve.mutators import Parent
from evolve.mutators.base import Neighbour, PastAttempt
from evolve.plugin.results import OK, EvalResult
from evolve.propose.digest import Outlines
from evolve.propose.neighbours import Neighbours
from evolve.propose.recent_attempts import RecentAttempts
from evolve.search.novelty import NoveltyIndex
from evolve.search.strategy import Pick, SearchStrategy
from evolve.store import CandidateRecord, Store
from evolve.store.evaluations import scoring_evaluation
from evolve.store.schema import PENDING
from evolve.task.schema import TaskSpec

ELITE_POOL = 24  # of the island's best, where diverse inspirations are drawn from
SHOWN_KEPT = 4096  # programs as prompts show them, kept in memory; a bound, not the run


class Briefing:
    def __init__(
        self,
        spec: TaskSpec,
        store: Store,
        run_name: str,
        *,
        strategy: SearchStrategy,
        candidates: CandidateCache,
        novelty: NoveltyIndex,
        budgets: Budgets,
        recent: RecentAttempts,
    ) -> None:
        self.spec, self.store, self.run_name = spec, store, run_name
        self.strategy, self.candidates, self.novelty = strategy, candidates, novelty
        self.budgets, self.recent = budgets, recent
        self.digest = ""
        self.digested_at = -1  # candidates in the run when the digest was last written
        self.outlines = Outlines(store, run_name)
        self.neighbours = Neighbours(store, run_name, candidates)
        # Each program as a prompt shows it, by the state of its record: a new evaluation
        # changes its status or its count of measurements, and so the key. The same
        # elites are shown again and again, and reading their evaluations each time was
        # most of a model proposal's cost to the driver.
        self.shown: OrderedDict[tuple[int, str, int], Parent] = OrderedDict()
        # The metrics of the first evaluation shown (the seed's, as a rule): the run's
        # evaluator reports the same ones for every program, so the legend that explains
        # them is written once, into the system prompt that a provider caches.
        self.metric_names: tuple[str, ...] = ()

    def others(self, pick: Pick, partner_id: int | None) -> tuple[Parent, ...]:
        """The partner first (crossover's second parent), then up to `search.inspirations`
        programs: the island's best where it beats the parent, and the rest as far in code
        from the parent and from each other as the island's elites allow."""
        wanted = self.spec.search.inspirations
        taken = [] if partner_id is None else [partner_id]
        parent = self.candidates.get(pick.parent_id)
        pool = [
            i
            for i in self.strategy.elites(pick.island, ELITE_POOL)
            if i not in (pick.parent_id, partner_id) and not self._outgrown(i, parent)
        ]
        best = pool[0] if pool and self._beats(self.candidates.get(pool[0]), parent) else None
        if wanted and best is not None:
            taken.append(best)
        rest = [i for i in pool if i not in taken]
        room = wanted - (best is not None)
        taken += self.novelty.diverse(rest, room, pick.parent_id) if room > 0 and rest else []
        return tuple(self.parent(self.candidates.get(i)) for i in taken)

    def partner(self, pick: Pick, rng: random.Random) -> int | None:
        """Crossover's second parent, as the strategy draws it; the seed drawn for a parent
        that beats it gives way to one of the island's elites that beat the seed."""
        drawn = self.strategy.partner(pick, rng)
        if drawn is None:
            return None
        parent = self.candidates.get(pick.parent_id)
        if not self._outgrown(drawn, parent):
            return drawn
        seed = self.candidates.get(drawn)
        better = [
            i
            for i in self.strategy.elites(pick.island, ELITE_POOL)
            if i not in (pick.parent_id, drawn) and self._beats(self.candidates.get(i), seed)
        ]
        return rng.choice(better) if better else drawn

    def _outgrown(self, candidate_id: int, parent: CandidateRecord) -> bool:
        """Whether `candidate_id` is the seed and `parent` beats it."""
        candidate = self.candidates.get(candidate_id)
        return not candidate.parent_ids and self._beats(parent, candidate)

    @staticmethod
    def _beats(one: CandidateRecord, other: CandidateRecord) -> bool:
        if one.score is None:
            return False
        return other.score is None or one.score > other.score

    def attempts(self, parent_id: int) -> tuple[PastAttempt, ...]:
        return self.recent.of(parent_id)

    def near(
        self, parent: CandidateRecord, attempts: Sequence[PastAttempt]
    ) -> tuple[Neighbour, ...]:
        """The programs the run holds one small change from `parent`, but those that its
        recent `attempts` show already (a child, or the program a duplicate repeated)."""
        listed = {i for a in attempts for i in (a.child_id, a.repeated_id) if i is not None}
        return self.neighbours.of(parent, listed)

    def racing(self, parent: CandidateRecord, flying: Collection[int]) -> tuple[Neighbour, ...]:
        """The siblings of `parent` that model proposals in flight work on (`flying`: their
        parents), with the changes that made them (see evolve/propose/neighbours.py)."""
        return self.neighbours.racing(parent, flying)

    def run_digest(self, added: int) -> str:
        """The digest, rewritten once `search.digest_every` candidates have been added."""
        if self.digested_at < 0 or added - self.digested_at >= self.spec.search.digest_every:
            self.digest = self.outlines.digest()
            self.digested_at = added
        return self.digest

    def token_cap(self, in_flight: int) -> int | None:
        """What one more model proposal may spend in tokens, so that the proposals in
        flight together fit what is left of the token and USD budgets."""
        return self.budgets.tokens_left_each(in_flight + 1)

    def measured(
        self,
        before: CandidateRecord,
        after: CandidateRecord,
        result: EvalResult,
        score: float | None,
    ) -> None:
        """The engine recorded `result` (scored `score`), which took the candidate from
        `before` to `after`: what `parent` shows of it is known without reading the store
        when this is its first evaluation, or when it stood ok before and its shown
        evaluation is kept. The evaluation shown is the one that gave the score, the lowest
        of the ok ones and the latest of equals (see scoring_evaluation), else the latest."""
        if self.spec.llm is None:
            return
        if before.status == PENDING:
            shown = (dict(result.metrics), result.feedback)
        elif before.status == OK and (kept := self.shown.get(_key(before))) is not None:
            lower = result.ok and score is not None and before.score is not None
            if lower and score <= before.score:  # type: ignore[operator]
                shown = (dict(result.metrics), result.feedback)
            else:
                shown = (kept.metrics, kept.feedback)
        else:
            return
        self._keep(Parent(after.id, after.program, after.score, *shown), _key(after))

    def parent(self, candidate: CandidateRecord) -> Parent:
        """A program as mutators see it; a model also gets the metrics and feedback of the
        evaluation that gave its score, so the score and the numbers beside it agree."""
        if self.spec.llm is None:
            return Parent(candidate.id, candidate.program, candidate.score)
        key = _key(candidate)
        if (kept := self.shown.get(key)) is not None:
            self.shown.move_to_end(key)
            return kept
        evaluations = self.store.evaluations(candidate.id)
        shown = scoring_evaluation(evaluations) or (evaluations[-1] if evaluations else None)
        metrics, feedback = (shown.metrics, shown.feedback) if shown else ({}, "")
        parent = Parent(candidate.id, candidate.program, candidate.score, metrics, feedback)
        self._keep(parent, key)
        return parent

    def _keep(self, parent: Parent, key: tuple[int, str, int]) -> None:
        if parent.metrics and not self.metric_names:
            self.metric_names = tuple(parent.metrics)
        self.shown[key] = parent
        self.shown.move_to_end(key)
        if len(self.shown) > SHOWN_KEPT:
            self.shown.popitem(last=False)


def _key(candidate: CandidateRecord) -> tuple[int, str, int]:
    """A program as shown stays right while its standing does."""
    return (candidate.id, candidate.status, candidate.measurements)
