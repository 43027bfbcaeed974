"""What a model request reports beyond its reply, while a proposal runs: each attempt goes
to the run's ledger as it completes, and waits on the run's circuit for its provider.

Both reach the client through a context variable set by the proposal task
(evolve/workers.py), so mutators and their clients need no plumbing of their own, and a
client used outside a run (a script, a test) reports nowhere.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

import ray

from evolve.llm.circuit import SharedCircuits
from evolve.llm.records import LLMCall

log = logging.getLogger("evolve.llm.hooks")

FLUSH_TIMEOUT_S = 30.0


class CallSink(Protocol):
    """Where a completed call is stored at once: the run's ledger writer, in the proposal
    worker that hosts the run's services (evolve/service_host.py)."""

    def send(self, proposal_id: int, call: LLMCall) -> ray.ObjectRef | None:
        """The write to wait for before the proposal returns; None once written."""
        ...


@dataclass(frozen=True)
class CallHooks:
    """`sink` stores each call; `gate` is this process's view of the run's provider
    circuits (evolve/llm/circuit.py). Either may be None."""

    proposal_id: int | None = None
    sink: CallSink | None = None
    gate: SharedCircuits | None = None


_current: ContextVar[CallHooks | None] = ContextVar("evolve_call_hooks", default=None)
_pending: ContextVar[list[ray.ObjectRef] | None] = ContextVar("evolve_call_writes", default=None)


def current() -> CallHooks | None:
    return _current.get()


@contextmanager
def hooked(hooks: CallHooks) -> Iterator[None]:
    """Report this proposal's calls through `hooks`; on leaving, wait until every call sent
    to the sink is written, so a proposal's result never arrives before its calls."""
    writes: list[ray.ObjectRef] = []
    token, pending = _current.set(hooks), _pending.set(writes)
    try:
        yield
    finally:
        _current.reset(token)
        _pending.reset(pending)
        _flush(writes)


def _flush(writes: list[ray.ObjectRef]) -> None:
    """Wait for the writes; one that failed or is late must not cost the proposal its
    result: the calls travel with it too, and the engine stores any the ledger lacks."""
    if not writes:
        return
    try:
        ray.get(writes, timeout=FLUSH_TIMEOUT_S)
    except Exception:
        log.exception("model calls not confirmed written by the ledger writer")


def report_call(call: LLMCall) -> None:
    """Send one completed attempt to the ledger; a write through Ray is waited for only
    when the proposal ends."""
    hooks, writes = _current.get(), _pending.get()
    if hooks is None or hooks.sink is None or hooks.proposal_id is None or writes is None:
        return
    write = hooks.sink.send(hooks.proposal_id, call)
    if write is not None:
        writes.append(write)
