"""When the model path cannot work, the run stops and says why, instead of spending its
budget on failures that will not change.

Two things end it. A refusal (a key refused, a model the server does not know: the
proposal outcome "refused") ends it at once, with the client's one line
(evolve/llm/failures.py). And while no model proposal of the run has yet brought back a
program, the same failure `limit` times in a row ends it: unparseable replies, edits
outside the EVOLVE-BLOCKs, empty replies, requests that fail alike (an HTTP 400), or
requests whose every attempt met a server error or a timeout (each such attempt counts
once, so a server that answers 500 to everything is given up on after `limit` attempts,
not `limit` proposals of retries).

Once a model proposal has brought back a program, the model path is known to work: its
later failures are a search that found nothing (the fruitless stop, evolve/engine/budgets.py) or
an outage, which the provider circuits ride out (evolve/llm/circuit.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evolve.plugin.proposal_outcomes import Outcome

SAME_FAILURES = 20  # the default of llm.same_failures

# What each failure is, and what to change, by the proposal outcome (or, where every
# attempt failed, by the status of the last).
_SAID: dict[str, tuple[str, str]] = {
    "server_error": (
        "every attempt met a server error",
        "check that the model's server works, then resume the run",
    ),
    "timeout": (
        "no attempt was answered within llm.timeout_s",
        "raise llm.timeout_s, or check that the model's server answers",
    ),
    "rate_limited": (
        "every attempt was rate-limited (429)",
        "lower llm.concurrency, or raise the provider's rate limit",
    ),
    "unparseable_after_repair": (
        "the replies could not be applied, even after a repair turn",
        "try a stronger model, or the `rewrite` mutator",
    ),
    "outside_block": (
        "the edits touched code outside the EVOLVE-BLOCKs",
        "mark all the code the model may change with EVOLVE-BLOCK markers, or try a stronger model",
    ),
    "empty": (
        "the model replied with nothing",
        "raise llm.max_tokens (a reasoning model may spend them all thinking), or try "
        "another model",
    ),
    "out_of_turns": (
        "the agent used its turns without submitting",
        "raise the agent's max_turns, or use the `diff` mutator",
    ),
    "failed": ("the model's requests failed", "fix what the error says in the task's llm section"),
}
EXAMPLE_CHARS = 200  # of the last failure's words, quoted in the line
# Statuses of which every attempt counts, not the proposal: a proposal retries them.
_PER_ATTEMPT = frozenset({"server_error", "timeout"})


class FailureStreak:
    """Told how each model proposal ended, in the order the driver settles them; `failure`
    is the line the run stops with, once there is one."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.works = False  # a model proposal brought back a program
        self.kind: str | None = None
        self.count = 0
        self.failure: str | None = None

    def produced(self) -> None:
        """A model proposal brought back a program, new or not."""
        self.works = True
        self.kind, self.count = None, 0

    def failed(self, outcome: Outcome, reason: str, calls: Sequence[Any]) -> None:
        """A model proposal that brought back no program; `calls`, the model calls it made
        (LLMCall or the ledger's records of them: each has a status and an error). One
        that made none failed before it reached the model, and says nothing about it."""
        if self.failure is not None:
            return
        if outcome == "refused":
            self.failure = reason
            return
        if outcome in ("budget", "interrupted") or not calls or self.works:
            return
        kind, count = _kind(outcome, calls)
        if kind not in _SAID:
            return
        self.count = self.count + count if kind == self.kind else count
        self.kind = kind
        if self.count >= self.limit:
            what, change = _SAID[kind]
            example = _first_line(calls[-1].error or reason)
            self.failure = (
                f"the model's proposals failed the same way {self.count} times in a row, and "
                f"none brought back a program: {what} (the last: {example}): {change}"
            )


def _kind(outcome: Outcome, calls: Sequence[Any]) -> tuple[str, int]:
    """The failure's kind, and how many times it counts."""
    if outcome != "retries_exhausted":
        return outcome, 1
    last = calls[-1].status
    if last in _PER_ATTEMPT:
        return last, sum(call.status == last for call in calls)
    return last, 1


def _first_line(text: str) -> str:
    """The line the run ends with stays one line: a reply's own words may span many."""
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= EXAMPLE_CHARS else line[: EXAMPLE_CHARS - 3] + "..."
