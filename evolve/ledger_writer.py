"""Model calls written to the store the moment they complete, from any node of a cluster.

Proposals run in actors, possibly on other machines, and a model call is paid for whether
or not its proposal ever reports back: a driver killed mid-proposal must not lose it. So
each call goes straight to the proposal worker that hosts the run's services
(evolve/service_host.py), on the driver's node (where a SQLite store is), and this writer
stores it before the proposal that made it may return. The engine settles the proposal
later; the writer writes nothing else.

The writes are group commits. The worker's threads finish their calls in bursts (a fast
model answers many requests at once), and one transaction per call, one at a time, held
each proposal back for the others' writes and for the store's lock: with a model that
answers at once, a proposal waited about 30 ms between its reply and its return, most of
its trip. Now the calls that arrive while a transaction is being written go together in
the next one, and each caller still returns only once its own call is stored.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from evolve.llm import LLMCall
from evolve.store import Store

log = logging.getLogger("evolve.ledger_writer")


@dataclass
class _Pending:
    """One call waiting to be stored, and how its write ended. Read and set only under
    the writer's `_writing` lock."""

    proposal_id: int
    call: LLMCall
    done: bool = False
    error: Exception | None = None


class LedgerWriter:
    def __init__(self, url: str) -> None:
        self.store = Store(url)
        self._queue: list[_Pending] = []
        self._queued = threading.Lock()  # guards the queue
        self._writing = threading.Lock()  # held while one batch is written

    def record(self, proposal_id: int, call: LLMCall) -> None:
        """Returns once the call is stored, with the calls that came with it; raises what
        storing it raised."""
        mine = _Pending(proposal_id, call)
        with self._queued:
            self._queue.append(mine)
        with self._writing:
            if not mine.done:  # no batch before took it: this thread writes the next
                with self._queued:
                    batch, self._queue = self._queue, []
                self._write(batch)
        if mine.error is not None:
            raise mine.error

    def drained(self) -> None:
        """Returns once the batch under way, if any, is written."""
        with self._writing:
            pass

    def _write(self, batch: list[_Pending]) -> None:
        """One transaction for the batch; if it fails, each call in one of its own, so that
        one bad call (one whose proposal does not exist) costs the others nothing."""
        try:
            self.store.add_proposal_calls([(p.proposal_id, p.call) for p in batch])
        except Exception as error:
            if len(batch) == 1:
                batch[0].error = error
            else:
                log.warning("a batch of %d calls failed; writing them one by one", len(batch))
                for pending in batch:
                    try:
                        self.store.add_proposal_call(pending.proposal_id, pending.call)
                    except Exception as alone:
                        pending.error = alone
        for pending in batch:
            pending.done = True
