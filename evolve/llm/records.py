"""What one model request leaves behind for the ledger and the USD and token budgets.

Kept apart from the client so that the store and the budgets can name these records
without loading the provider SDKs.

A request is charged to the budgets from before it is sent (see evolve/llm/reservations.py):
its row is written "in_flight" with its worst case reserved, and the reply replaces the
reservation with the reply's usage. A request whose reply never came (our timeout, or a
run that died while it was in flight: "lost") keeps the reservation as its charge, since
the provider bills it all the same.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

# "refused": the provider refused the key or does not know the model (or no key was
# found); nothing sent with that key or model can work, so the run stops at once.
# "in_flight": sent, its reply not yet seen; "lost": still in flight when its run stopped.
Status = Literal[
    "ok",
    "rate_limited",
    "server_error",
    "timeout",
    "empty",
    "error",
    "refused",
    "in_flight",
    "lost",
]
# Charged their reservation (the worst case) rather than a usage nobody saw.
CHARGED_IN_FULL: frozenset[str] = frozenset({"timeout", "in_flight", "lost"})


@dataclass(frozen=True)
class LLMCall:
    """One HTTP attempt, as the ledger and the USD budget see it. Holds no API key."""

    provider: str
    model: str
    prompt: str
    response: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    status: Status
    error: str | None = None
    priced: bool = True  # False: the model is in no price table, so cost_usd is 0.0, not real
    cached_tokens: int = 0  # of input_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens, written to it
    started_at: float = 0.0  # unix time the request was made
    # Names the call wherever it is written from, so that the ledger stores it once.
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    reserved_tokens: int = 0  # the worst case held against the budgets before it was sent
    reserved_usd: float = 0.0

    @property
    def charged_tokens(self) -> int:
        """What the token budget counts for this call: the reply's usage, or the
        reservation where no usage came back."""
        used = self.input_tokens + self.output_tokens
        return max(used, self.reserved_tokens) if self.status in CHARGED_IN_FULL else used

    @property
    def charged_usd(self) -> float:
        """What the USD budget counts for this call, as `charged_tokens` decides."""
        if self.status in CHARGED_IN_FULL:
            return max(self.cost_usd, self.reserved_usd)
        return self.cost_usd


@dataclass(frozen=True)
class Usage:
    """The tokens one reply reports, in one shape for both APIs: `input_tokens` is all the
    input, and the cached and cache-written tokens are parts of it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
