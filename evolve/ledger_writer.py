"""Model calls written to the store the moment they complete, from any node of a cluster.

Proposals run in actors, possibly on other machines, and a model call is paid for whether
or not its proposal ever reports back: a driver killed mid-proposal must not lose it. So
each call goes straight to the proposal worker that hosts the run's services
(evolve/service_host.py), on the driver's node (where a SQLite store is), and this writer
stores it in its own short transaction. The engine settles the proposal later; the writer
writes nothing else.
"""

from __future__ import annotations

from evolve.llm import LLMCall
from evolve.store import Store


class LedgerWriter:
    def __init__(self, url: str) -> None:
        self.store = Store(url)

    def record(self, proposal_id: int, call: LLMCall) -> None:
        self.store.add_proposal_call(proposal_id, call)
