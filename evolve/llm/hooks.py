"""What a model request reports beyond its reply, while a proposal runs: each attempt is
reserved against the run's budgets and written to its ledger before it is sent
(evolve/llm/reservations.py), goes to the ledger again as it completes, and waits on the
run's circuit for its provider.

Both reach the client through a context variable set where the proposal is made
(evolve/propose/making.py), so mutators and their clients need no plumbing of their own, and a
client used outside a run (a script, a test) reports nowhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from evolve.llm.circuit import SharedCircuits
from evolve.llm.records import LLMCall
from evolve.llm.reservations import OK, WAIT, WAIT_S, BudgetRefused

log = logging.getLogger("evolve.llm.hooks")

FLUSH_TIMEOUT_S = 30.0


# Waits up to that many seconds for one write to be stored; raises if it failed or is late.
Written = Callable[[float], object]


class CallSink(Protocol):
    """Where a completed call is stored at once: the run's ledger writer, in the proposal
    worker that hosts the run's services (evolve/propose/service_host.py)."""

    def send(self, proposal_id: int, call: LLMCall) -> Written:
        """Starts the write; what waits for it."""
        ...

    def reserve(self, proposal_id: int, call: LLMCall) -> str:
        """Holds `call`'s worst case against the run's budgets and, once it is held, stores
        `call` (status "in_flight") before returning: OK, WAIT, or why it is refused."""
        ...


@dataclass(frozen=True)
class CallHooks:
    """`sink` stores each call; `gate` is this process's view of the run's provider
    circuits (evolve/llm/circuit.py). Either may be None."""

    proposal_id: int | None = None
    sink: CallSink | None = None
    gate: SharedCircuits | None = None


_current: ContextVar[CallHooks | None] = ContextVar("evolve_call_hooks", default=None)
_sent: ContextVar[SentCalls | None] = ContextVar("evolve_sent_calls", default=None)


class SentCalls:
    """The writes a proposal's calls started. A result that carries every call its proposal
    sent (a `Proposal`, or a `MutationError` with its calls) goes back without waiting
    for them: the engine stores whichever copy of a call comes first, once, and with a
    fast model the wait was most of a proposal's trip. One that lacks some (a mutator that
    crashed) waits, since the engine then reads them from the ledger."""

    def __init__(self) -> None:
        self.writes: list[Written] = []
        self.call_ids: set[str] = set()

    def settle(self, carried: Sequence[object]) -> None:
        """Wait for the writes unless `carried` (the result's calls) holds every call sent;
        a write that failed or is late must not cost the proposal its result."""
        if self.call_ids <= {getattr(call, "call_id", None) for call in carried}:
            return
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        try:
            for wait in self.writes:
                wait(max(0.0, deadline - time.monotonic()))
        except Exception:
            log.exception("model calls not confirmed written by the ledger writer")


def current() -> CallHooks | None:
    return _current.get()


@contextmanager
def hooked(hooks: CallHooks) -> Iterator[SentCalls]:
    """Report this proposal's calls through `hooks`."""
    sent = SentCalls()
    token, writes = _current.set(hooks), _sent.set(sent)
    try:
        yield sent
    finally:
        _current.reset(token)
        _sent.reset(writes)


def reserve(call: LLMCall, patience_s: float, sleep: Callable[[float], None]) -> None:
    """Reserve `call` (an "in_flight" record of the request about to be sent) and store it
    before it is sent; waits up to `patience_s` for other reservations to settle, then
    raises BudgetRefused. Outside a run, nothing is reserved."""
    hooks = _current.get()
    if hooks is None or hooks.sink is None or hooks.proposal_id is None:
        return
    deadline = time.monotonic() + patience_s
    while (verdict := hooks.sink.reserve(hooks.proposal_id, call)) == WAIT:
        if time.monotonic() >= deadline:
            raise BudgetRefused(
                f"no room in the run's budgets for {patience_s:g} s while other requests "
                "were in flight"
            )
        sleep(WAIT_S)
    if verdict != OK:
        raise BudgetRefused(verdict)


def report_call(call: LLMCall) -> None:
    """Send one completed attempt to the ledger (see `SentCalls` for when it is waited for)."""
    hooks, sent = _current.get(), _sent.get()
    if hooks is None or hooks.sink is None or hooks.proposal_id is None or sent is None:
        return
    sent.writes.append(hooks.sink.send(hooks.proposal_id, call))
    sent.call_ids.add(call.call_id)
