"""The only retry loop there is, and how long it waits between attempts.

Retried: 429 (after its Retry-After, capped), 5xx, timeouts and lost connections, with
exponential backoff and jitter where the server gave no Retry-After. Not retried: any other
4xx (a bad key or request stays bad) and an empty reply, which was paid for: asking the
same prompt again mostly buys the same nothing.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evolve.llm.records import LLMCall, Status

_RETRYABLE: frozenset[Status] = frozenset({"rate_limited", "server_error", "timeout"})
_MAX_RETRY_AFTER_S = 60.0
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 30.0


@dataclass(frozen=True)
class Attempt:
    """How one HTTP attempt ended, before it is priced and clipped into an LLMCall."""

    status: Status
    answer: Any = None  # the reply text, or an AssistantTurn in a conversation
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    retry_after: float | None = None


def retry(
    attempt: Callable[[], Attempt],
    record: Callable[[Attempt, float], LLMCall],
    max_attempts: int,
    sleep: Callable[[float], None],
) -> tuple[Attempt, tuple[LLMCall, ...]]:
    """Attempt until a final outcome or `max_attempts`; each attempt is recorded with its
    latency, so a storm of 429s shows up in the ledger with what it cost."""
    calls: list[LLMCall] = []
    for number in range(1, max_attempts + 1):
        started = time.monotonic()
        outcome = attempt()
        calls.append(record(outcome, time.monotonic() - started))
        if outcome.status not in _RETRYABLE or number == max_attempts:
            break
        sleep(_wait(number, outcome.retry_after))
    return outcome, tuple(calls)


def _wait(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, _MAX_RETRY_AFTER_S)
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (attempt - 1))
    return ceiling * random.uniform(0.5, 1.0)
