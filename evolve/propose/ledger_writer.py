"""Model calls written to the store the moment they complete, from any node of a cluster.

Proposals run in actors, possibly on other machines, and a model call is paid for whether
or not its proposal ever reports back: a driver killed mid-proposal must not lose it. So
each call goes straight to the proposal worker that hosts the run's services
(evolve/propose/service_host.py), on the driver's node (where a SQLite store is), and this writer
stores it. The engine settles the proposal later; the writer writes nothing else.

A thread of its own writes the calls; on SQLite with group commits: the calls that arrive
while one transaction is written go together in the next. Proposal threads hand their calls over
and go on (evolve/llm/hooks.py's `SentCalls` says when one waits): with a model that
answers at once, one transaction per call, each on the proposal's way back and one at a
time, held a proposal about 30 ms between its reply and its return, most of its trip.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from evolve.llm import LLMCall
from evolve.store import Store

log = logging.getLogger("evolve.propose.ledger_writer")


@dataclass
class Pending:
    """One call handed to the writer, and how its write ended."""

    proposal_id: int
    call: LLMCall
    error: Exception | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def wait(self, timeout_s: float | None = None) -> None:
        """Returns once the call is stored; raises what storing it raised, or TimeoutError."""
        if not self.done.wait(timeout_s):
            raise TimeoutError(f"model call not stored within {timeout_s} s")
        if self.error is not None:
            raise self.error


class LedgerWriter:
    def __init__(self, url: str) -> None:
        self.store = Store(url)
        self._queue: list[Pending] = []
        self._writing = False  # a batch taken from the queue is being written
        self._changed = threading.Condition()
        threading.Thread(target=self._write_forever, name="ledger-writer", daemon=True).start()

    def submit(self, proposal_id: int, call: LLMCall) -> Pending:
        """Hands the call over; it is written with the next batch."""
        pending = Pending(proposal_id, call)
        with self._changed:
            self._queue.append(pending)
            self._changed.notify_all()
        return pending

    def record(self, proposal_id: int, call: LLMCall) -> None:
        """Returns once the call is stored."""
        self.submit(proposal_id, call).wait()

    def drained(self) -> None:
        """Returns once every call handed over before it is written."""
        with self._changed:
            self._changed.wait_for(lambda: not self._queue and not self._writing)

    def _write_forever(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue))
                batch, self._queue, self._writing = self._queue, [], True
            try:
                self._write(batch)
            finally:
                with self._changed:
                    self._writing = False
                    self._changed.notify_all()

    def _write(self, batch: list[Pending]) -> None:
        """One transaction for the batch where the store takes one writer at a time
        (SQLite): each transaction waits for the driver's to end, so fewer is faster. On
        PostgreSQL each call has a transaction of its own: writing one locks its
        proposal's row, and a transaction holding several could deadlock with the driver's
        turn, which settles several proposals. If a batch fails, each call is written
        alone, so that one bad call (one whose proposal does not exist) costs the others
        nothing."""
        alone = batch
        if len(batch) > 1 and self.store.one_writer_at_a_time:
            try:
                self.store.add_proposal_calls([(p.proposal_id, p.call) for p in batch])
            except Exception:
                log.warning("a batch of %d calls failed; writing them one by one", len(batch))
            else:
                alone = []
        for pending in alone:
            try:
                self.store.add_proposal_call(pending.proposal_id, pending.call)
            except Exception as error:
                pending.error = error
        for pending in batch:
            if pending.error is not None:
                log.error("model call of proposal %d not stored: %s", pending.proposal_id,
                          pending.error)  # fmt: skip
            pending.done.set()
