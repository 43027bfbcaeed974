"""What a call cost, so that the USD budget can stop a run before the bill surprises anyone.

The built-in table holds list prices as published when this file was written (2025). They go
stale: a task overrides or extends them under `llm.prices`, keyed by model label. A model in
neither place costs 0.0 and its calls are marked unpriced rather than guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float


BUILTIN_PRICES: dict[str, Price] = {
    "openai:gpt-5": Price(1.25, 10.00),
    "openai:gpt-5-mini": Price(0.25, 2.00),
    "openai:gpt-5-nano": Price(0.05, 0.40),
    "openai:gpt-4.1": Price(2.00, 8.00),
    "openai:gpt-4.1-mini": Price(0.40, 1.60),
    "openai:gpt-4.1-nano": Price(0.10, 0.40),
    "openai:gpt-4o-mini": Price(0.15, 0.60),
    "openai:o4-mini": Price(1.10, 4.40),
    "anthropic:claude-opus-4-5": Price(5.00, 25.00),
    "anthropic:claude-sonnet-4-5": Price(3.00, 15.00),
    "anthropic:claude-haiku-4-5": Price(1.00, 5.00),
}


def cost(price: Price, input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1e6
