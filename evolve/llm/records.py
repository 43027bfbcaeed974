"""What one model request leaves behind for the ledger and the USD budget.

Kept apart from the client so that the store and the budgets can name these records
without loading the provider SDKs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "rate_limited", "server_error", "timeout", "empty", "error"]


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
