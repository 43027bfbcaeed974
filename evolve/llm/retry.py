"""The only retry loop there is, and how long it waits between attempts.

Retried: 429 (after its Retry-After, capped), 5xx, timeouts and lost connections, with
exponential backoff and jitter where the server gave no Retry-After. Not retried: any other
4xx (a bad key or request stays bad) and an empty reply, which was paid for: asking the
same prompt again mostly buys the same nothing.

Inside a run, a gate (the run's circuit for the provider, evolve/llm/circuit.py) is asked
before every attempt and told how each ended; it then does the waiting after a 429 or 5xx,
for all the run's workers at once, in place of this loop's own backoff.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evolve.llm.circuit import TRIPS, Gate
from evolve.llm.records import LLMCall, Status, Usage

_RETRYABLE: frozenset[Status] = frozenset({"rate_limited", "server_error", "timeout"})
_MAX_RETRY_AFTER_S = 60.0
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 30.0


@dataclass(frozen=True)
class Attempt:
    """How one HTTP attempt ended, before it is priced and clipped into an LLMCall."""

    status: Status
    answer: Any = None  # the reply text, or an AssistantTurn in a conversation
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    retry_after: float | None = None


def retry(
    attempt: Callable[[], Attempt],
    record: Callable[[Attempt, float, float], LLMCall],
    max_attempts: int,
    sleep: Callable[[float], None],
    gate: Gate | None = None,
    reserve: Callable[[], None] | None = None,
) -> tuple[Attempt, tuple[LLMCall, ...]]:
    """Attempt until a final outcome or `max_attempts`; each attempt is recorded with its
    latency and start (unix time), so a storm of 429s shows up in the ledger with what it
    cost. Waiting at the gate costs no attempt and counts in no latency. `reserve` holds
    each attempt the gate lets through against the run's budgets, and raises where the
    budgets refuse it (evolve/llm/reservations.py)."""
    calls: list[LLMCall] = []
    for number in range(1, max_attempts + 1):
        # The gate first: a request it turns away (a refused key) was never sent, and must
        # leave no reservation, and no row, behind.
        probe = gate.admit(sleep) if gate is not None else False
        if reserve is not None:
            reserve()
        started_at, started = time.time(), time.monotonic()
        try:
            outcome = attempt()
        except BaseException as exc:  # recorded, so its reservation is settled, not held
            failed = Attempt("error", error=f"{type(exc).__name__}: {exc}")
            calls.append(record(failed, time.monotonic() - started, started_at))
            raise
        latency_s = time.monotonic() - started
        if gate is not None:
            gate.report(outcome.status, outcome.retry_after, probe=probe)
        calls.append(record(outcome, latency_s, started_at))
        if outcome.status not in _RETRYABLE or number == max_attempts:
            break
        if gate is None or outcome.status not in TRIPS:
            sleep(_wait(number, outcome.retry_after))
    return outcome, tuple(calls)


def _wait(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, _MAX_RETRY_AFTER_S)
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (attempt - 1))
    return ceiling * random.uniform(0.5, 1.0)
