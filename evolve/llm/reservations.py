"""Reserve, then spend: a model request is held against the run's USD and token budgets
at its worst case before it is sent, and the reply settles the charge.

The worst case is the prompt's tokens, bounded from its text (CHARS_PER_TOKEN), plus
`max_tokens` for the answer, priced at the model's dearest input rate. The book lives
with the run's other services (evolve/propose/service_host.py), so that every proposal worker
reserves against the same totals. A request that does not fit waits while other
reservations are outstanding, since their replies usually charge less than they held;
once none is, it is refused and the run stops on that budget. So the charges held at
any moment never pass a limit, and the run ends within one request's worst case of it
(less any part of a prompt the bound missed).

A request whose reply never comes keeps its reservation as its charge (see
evolve/llm/records.py): the provider bills it all the same.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from evolve.llm.prices import Price
from evolve.llm.records import LLMCall

CHARS_PER_TOKEN = 3  # fewer than any tokenizer of code or English takes: a bound, not a guess
WAIT_S = 0.2  # between asks while other reservations are outstanding
OK = "ok"
WAIT = "wait"


class BudgetRefused(Exception):
    """A request not sent, because its worst case would take the run past a budget."""


def prompt_tokens_bound(texts: Iterable[str]) -> int:
    """Tokens the prompt made of `texts` may count, read from its length."""
    return math.ceil(len("\n".join(texts)) / CHARS_PER_TOKEN)


def worst_usd(price: Price | None, prompt_tokens: int, max_tokens: int) -> float:
    """The most a request may cost: every prompt token at the dearest input rate (a cache
    write costs more than plain input), and every answer token; 0.0 for an unpriced model."""
    if price is None:
        return 0.0
    input_rate = max(price.input_per_mtok, price.cache_write_per_mtok or 0.0)
    return (prompt_tokens * input_rate + max_tokens * price.output_per_mtok) / 1e6


class Book:
    """The run's charges, reservations included, against its limits (None: no limit).
    Starts from the charges the store holds, so that a resumed run counts what it spent
    and what was lost in flight."""

    def __init__(
        self,
        usd: float | None,
        tokens: int | None,
        *,
        charged_usd: float = 0.0,
        charged_tokens: int = 0,
    ) -> None:
        self.usd_limit, self.token_limit = usd, tokens
        self.charged_usd, self.charged_tokens = charged_usd, charged_tokens
        self.held: dict[str, tuple[int, float]] = {}  # call_id: its reservation
        self._lock = threading.Lock()

    def reserve(self, call: LLMCall) -> str:
        """OK once `call`'s reservation is held; WAIT while it does not fit but others are
        outstanding; otherwise why it is refused."""
        with self._lock:
            tokens = self.charged_tokens + call.reserved_tokens
            usd = self.charged_usd + call.reserved_usd
            if self.token_limit is not None and tokens > self.token_limit:
                refusal = (
                    f"token budget reached ({self.charged_tokens:,} of {self.token_limit:,} "
                    f"charged; the next request may use {call.reserved_tokens:,})"
                )
            elif self.usd_limit is not None and usd > self.usd_limit:
                refusal = (
                    f"USD budget reached (${self.charged_usd:.4f} of ${self.usd_limit:g} "
                    f"charged; the next request may cost ${call.reserved_usd:.4f})"
                )
            else:
                self.charged_tokens, self.charged_usd = tokens, usd
                self.held[call.call_id] = (call.reserved_tokens, call.reserved_usd)
                return OK
            return WAIT if self.held else refusal

    def release(self, call_id: str) -> None:
        """Give back a reservation whose request was never sent."""
        with self._lock:
            tokens, usd = self.held.pop(call_id, (0, 0.0))
            self.charged_tokens -= tokens
            self.charged_usd -= usd

    def settle(self, call: LLMCall) -> None:
        """Replace the reservation with the call's charge. A call reserved before this book
        opened (its host restarted) was counted from the store at its reservation, and
        stays so."""
        with self._lock:
            if call.call_id not in self.held:
                return
            tokens, usd = self.held.pop(call.call_id)
            self.charged_tokens += call.charged_tokens - tokens
            self.charged_usd += call.charged_usd - usd
