"""What a run may still spend: candidates, wall time, model dollars and tokens.

The wall clock is the run's, not the process's: a resumed run starts from the time the
store says it has used, and the time used is written back every second, so that a crash
loses at most a second of it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from evolve.llm import LLMCall
from evolve.llm.prices import shown_cost
from evolve.store import Store
from evolve.store.records import LLMCallRecord
from evolve.task.schema import Budget

MAX_FRUITLESS = 200  # proposals in a row that were duplicates or failures before giving up
WALL_FLUSH_S = 1.0


class Budgets:
    def __init__(self, budget: Budget, store: Store, run_name: str, *, wall_used_s: float) -> None:
        self.budget, self.store, self.run_name = budget, store, run_name
        self.spent_usd, self.spent_tokens = store.llm_spend(run_name)
        self.llm_proposals = 0  # finished proposals that called a model, for their average cost
        self.refused: str | None = None  # why a request was refused its reservation
        self.fruitless = 0
        self.wall_before = wall_used_s
        self.started = self.flushed = time.monotonic()

    @property
    def elapsed(self) -> float:
        return self.wall_before + time.monotonic() - self.started

    def stop_reason(self, added: int) -> str | None:
        """Why no new proposal may start, with `added` candidates in the store."""
        if spent := self.spent_reason(added):
            return spent
        if self.fruitless >= MAX_FRUITLESS:
            return f"the last {MAX_FRUITLESS} proposals were all known programs or failures"
        return None

    def spent_reason(self, added: int) -> str | None:
        """Which budget is spent, with `added` candidates in the store: unlike a fruitless
        streak, which the next child that passes ends, that is for good."""
        budget = self.budget
        if budget.candidates is not None and added >= budget.candidates:
            return f"candidate budget reached ({budget.candidates})"
        if budget.wall_time_s is not None and self.elapsed >= budget.wall_time_s:
            return f"wall-time budget reached ({budget.wall_time_s:.0f}s)"
        if budget.usd is not None and self.spent_usd >= budget.usd:
            return f"USD budget reached (${self.spent_usd:.4f} of ${budget.usd:g})"
        if budget.tokens is not None and self.spent_tokens >= budget.tokens:
            return f"token budget reached ({self.spent_tokens} of {budget.tokens})"
        return self.refused

    def refuse(self, reason: str) -> None:
        """A model request found no room for its worst case in the run's budgets
        (evolve/llm/reservations.py): no new proposal starts."""
        self.refused = self.refused or reason

    def overtime_s(self) -> float | None:
        """How far past the wall-time budget the run is; None while within it (or without one)."""
        limit = self.budget.wall_time_s
        if limit is None or self.elapsed < limit:
            return None
        return self.elapsed - limit

    def room_for(self, added: int) -> bool:
        """Whether the candidate budget takes one more candidate beyond `added`."""
        return self.budget.candidates is None or added < self.budget.candidates

    def affordable(self, in_flight: int) -> bool:
        """Whether one more model proposal fits the USD and token budgets, counting the
        `in_flight` ones at the average cost so far: so a run stops within one proposal of
        its limit."""
        budget = self.budget
        if budget.usd is None and budget.tokens is None:
            return True
        if not self.llm_proposals:
            return in_flight == 0  # no cost known yet: feel the price with one request
        for spent, limit in ((self.spent_usd, budget.usd), (self.spent_tokens, budget.tokens)):
            if limit is not None and spent + in_flight * spent / self.llm_proposals >= limit:
                return False
        return True

    def tokens_left_each(self, proposals: int) -> int | None:
        """The tokens each of `proposals` model proposals may still use, sharing what is left
        of the token budget, and of the USD budget at the run's average price per token;
        None without either budget."""
        budget, left = self.budget, []
        if budget.tokens is not None:
            left.append(budget.tokens - self.spent_tokens)
        if budget.usd is not None and self.spent_usd > 0 and self.spent_tokens > 0:
            left.append((budget.usd - self.spent_usd) * self.spent_tokens / self.spent_usd)
        if not left:
            return None
        return max(1, int(min(left) / max(1, proposals)))

    def spend(self, calls: Sequence[LLMCall | LLMCallRecord]) -> float:
        """Count a finished proposal's model calls at their charge (a request that timed
        out at its worst case); what they cost in USD."""
        usd = sum(call.charged_usd for call in calls)
        self.llm_proposals += bool(calls)
        self.spent_usd += usd
        self.spent_tokens += sum(call.charged_tokens for call in calls)
        return usd

    def flush_wall(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.flushed >= WALL_FLUSH_S:
            self.store.add_wall_time(self.run_name, now - self.flushed)
            self.flushed = now

    def spend_line(self) -> str:
        budget = self.budget
        usd = f" of ${budget.usd:g}" if budget.usd is not None else ""
        tokens = f" of {budget.tokens:,}" if budget.tokens is not None else ""
        cost = shown_cost(self.spent_usd, self.spent_tokens)
        return f"models {cost}{usd}, {self.spent_tokens:,} tokens{tokens}"
