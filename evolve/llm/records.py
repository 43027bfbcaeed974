"""What one model request leaves behind for the ledger and the USD budget.

Kept apart from the client so that the store and the budgets can name these records
without loading the provider SDKs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

# "refused": the provider refused the key or does not know the model (or no key was
# found); nothing sent with that key or model can work, so the run stops at once.
Status = Literal["ok", "rate_limited", "server_error", "timeout", "empty", "error", "refused"]


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


@dataclass(frozen=True)
class Usage:
    """The tokens one reply reports, in one shape for both APIs: `input_tokens` is all the
    input, and the cached and cache-written tokens are parts of it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
