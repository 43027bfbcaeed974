"""The ledger writer's group commits: calls that arrive together are stored together, each
caller returns only once its own call is in the store, and one bad call fails its own
caller and no other."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from evolve.ledger_writer import LedgerWriter
from evolve.llm import LLMCall
from evolve.program import Program
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
