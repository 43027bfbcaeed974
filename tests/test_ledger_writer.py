"""The ledger writer's group commits: calls that arrive together are stored together, a
caller that waits returns only once its own call is in the store, one bad call fails its
own caller and no other, and only a result that lacks its calls waits for them."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from evolve.llm import LLMCall
from evolve.llm.hooks import CallHooks, report_call
from evolve.mutators import MutationError, MutationRequest, Parent, Proposal
from evolve.plugin.program import Program
from evolve.plugin.secrets import Keys
from evolve.propose.ledger_writer import LedgerWriter
from evolve.propose.making import make_proposal
from evolve.propose.service_host import ServicePlan
from evolve.store import Store
from tests.conftest import SYNTHETIC_SEED

RUN = "ledger"
THREADS = 12


def call(n: int) -> LLMCall:
    return LLMCall("openai", "m", f"prompt {n}", "reply", 10, 5, 0.01, 0.1, "ok", started_at=n)


def stored_prompts(db: Path) -> set[str]:
    """Read by a connection of its own: what other processes see, committed."""
    with sqlite3.connect(db) as connection:
        return {row[0] for row in connection.execute("SELECT prompt FROM llm_calls")}


def test_calls_that_arrive_together_are_each_stored_before_their_caller_returns(
    tmp_path: Path,
) -> None:
    db = tmp_path / "e.db"
    store = Store(f"sqlite:///{db}")
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    proposals = [
        store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
        for _ in range(THREADS)
    ]
    writer = LedgerWriter(store.url)
    missing_on_return: list[int] = []
    failures: dict[int, BaseException] = {}
    start = threading.Barrier(THREADS)

    def record(n: int) -> None:
        start.wait()
        # One caller names a proposal that does not exist.
        proposal = proposals[n] if n != 5 else 10**6
        try:
            writer.record(proposal, call(n))
        except Exception as error:
            failures[n] = error
            return
        if f"prompt {n}" not in stored_prompts(db):
            missing_on_return.append(n)

    # The store's lock is held while the callers arrive, so that they queue up and are
    # written in batches once it is free.
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    threads = [threading.Thread(target=record, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    blocker.execute("ROLLBACK")
    blocker.close()
    for thread in threads:
        thread.join(timeout=60)

    assert missing_on_return == []
    assert list(failures) == [5] and isinstance(failures[5], KeyError)
    assert stored_prompts(db) == {f"prompt {n}" for n in range(THREADS) if n != 5}
    for n, proposal in enumerate(proposals):
        assert [c.prompt for c in store.proposal_calls(proposal)] == (
            [] if n == 5 else [f"prompt {n}"]
        )


def test_a_call_stored_twice_is_stored_once(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'e.db'}")
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    proposal = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    writer = LedgerWriter(store.url)
    once = call(1)
    writer.record(proposal, once)
    writer.record(proposal, once)
    store.add_proposal_calls([(proposal, once), (proposal, call(2))])
    assert sorted(c.prompt for c in store.proposal_calls(proposal)) == ["prompt 1", "prompt 2"]
    with pytest.raises(KeyError):
        store.add_proposal_calls([(proposal, call(3)), (10**6, call(4))])
    assert len(store.proposal_calls(proposal)) == 2, "a failed batch writes none of its calls"


class CallingMutator:
    """Pays for one model call (reported as a client reports it), then ends as told."""

    name = "diff"

    def __init__(self, ending: str) -> None:
        self.ending = ending

    def propose(self, request: MutationRequest) -> Proposal:
        paid = call(len(self.ending))
        report_call(paid)
        if self.ending == "crash":
            raise RuntimeError("the mutator broke after its call")
        if self.ending == "decline":
            raise MutationError("the reply had no diff", calls=(paid,))
        if self.ending == "decline without its call":
            raise MutationError("the reply had no diff")
        return Proposal(request.parent.program, {"operator": "diff"}, (paid,))


@pytest.mark.parametrize(
    ("ending", "waits"),
    [("crash", True), ("decline without its call", True), ("decline", False), ("return", False)],
)
def test_only_a_result_that_lacks_its_calls_waits_for_them_to_be_stored(
    tmp_path: Path, ending: str, waits: bool
) -> None:
    """A result that carries its calls goes back at once (the engine stores the calls from
    whichever copy comes first); one that lacks them (a crash) makes the engine read them
    from the ledger, so it returns only once they are there. Either way the call is
    stored."""
    db = tmp_path / "e.db"
    store = Store(f"sqlite:///{db}")
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    proposal = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    services = ServicePlan(store.url).open()
    hooks = CallHooks(proposal, sink=services)
    request = MutationRequest(Parent(seed.id, seed.program, 1.0), (), seed=0)
    results: list[object] = []

    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the ledger cannot write while this is held
    try:
        proposing = threading.Thread(
            target=lambda: results.append(
                make_proposal(CallingMutator(ending), request, Keys(), hooks)
            )
        )
        proposing.start()
        # Room for a slow machine, yet well short of the 30 s a waiting write gives up after.
        proposing.join(timeout=2.0 if waits else 10.0)
        assert proposing.is_alive() == waits
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    proposing.join(timeout=60)
    services.drained()
    assert len(results) == 1
    assert [c.prompt for c in store.proposal_calls(proposal)] == [f"prompt {len(ending)}"]
