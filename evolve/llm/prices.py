"""What a call cost, so that the USD budget can stop a run before the bill surprises anyone.

The built-in table holds list prices as published when this file was written (2025). They go
stale: a task overrides or extends them under `llm.prices`, keyed by model label. A model in
neither place costs 0.0 and its calls are marked unpriced rather than guessed at; a task
with a USD budget must price every model it names (evolve/task/checks.py).

Prompt caching changes the rate of part of the input: tokens read from the provider's cache
are cheaper (Anthropic 0.1x, OpenAI 0.1x to 0.5x by model), and Anthropic charges more
(1.25x, 5-minute cache) for the tokens it writes there.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """USD per million tokens. A cache rate of None charges those tokens as plain input."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None


def _openai(input_per_mtok: float, output_per_mtok: float, cached_share: float) -> Price:
    """OpenAI writes its cache for free and reads it at a share of the input price."""
    return Price(input_per_mtok, output_per_mtok, round(input_per_mtok * cached_share, 6))


def _anthropic(input_per_mtok: float, output_per_mtok: float) -> Price:
    """Anthropic reads its cache at 0.1x input and writes it (5-minute TTL) at 1.25x."""
    return Price(
        input_per_mtok,
        output_per_mtok,
        round(input_per_mtok * 0.1, 6),
        round(input_per_mtok * 1.25, 6),
    )


BUILTIN_PRICES: dict[str, Price] = {
    "openai:gpt-5": _openai(1.25, 10.00, 0.1),
    "openai:gpt-5-mini": _openai(0.25, 2.00, 0.1),
    "openai:gpt-5-nano": _openai(0.05, 0.40, 0.1),
    "openai:gpt-4.1": _openai(2.00, 8.00, 0.25),
    "openai:gpt-4.1-mini": _openai(0.40, 1.60, 0.25),
    "openai:gpt-4.1-nano": _openai(0.10, 0.40, 0.25),
    "openai:gpt-4o-mini": _openai(0.15, 0.60, 0.5),
    "openai:o4-mini": _openai(1.10, 4.40, 0.5),
    "anthropic:claude-opus-4-5": _anthropic(5.00, 25.00),
    "anthropic:claude-sonnet-4-5": _anthropic(3.00, 15.00),
    "anthropic:claude-haiku-4-5": _anthropic(1.00, 5.00),
}


def cost(
    price: Price,
    input_tokens: int,
    output_tokens: int,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float:
    """`input_tokens` counts all input, the cached and cache-written tokens among them."""
    plain = input_tokens - cached_tokens - cache_write_tokens
    cached_rate = _or(price.cached_input_per_mtok, price.input_per_mtok)
    write_rate = _or(price.cache_write_per_mtok, price.input_per_mtok)
    return (
        plain * price.input_per_mtok
        + cached_tokens * cached_rate
        + cache_write_tokens * write_rate
        + output_tokens * price.output_per_mtok
    ) / 1e6


def shown_cost(usd: float, tokens: int) -> str:
    """A cost as the board, the progress line, `evolve runs` and `evolve show` write it:
    "unpriced" where tokens were used and nothing was charged, since a model in no price
    table is charged 0.0, which is not what it costs."""
    return "unpriced" if usd == 0 and tokens > 0 else f"${usd:.4f}"


def _or(rate: float | None, fallback: float) -> float:
    return fallback if rate is None else rate
