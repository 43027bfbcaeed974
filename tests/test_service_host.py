"""The run's service host: the ledger writer and the circuits share one actor process, and
neither holds the other up."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
import ray

from evolve.llm import LLMCall
from evolve.program import Program
from evolve.service_host import start_service_host
from evolve.store import Store
from tests.conftest import SYNTHETIC_SEED

RUN = "hosted"


@pytest.mark.usefixtures("ray_session")
def test_a_write_held_up_by_a_locked_store_holds_up_no_circuit_answer(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    store = Store(f"sqlite:///{db}")
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    proposal = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    host = start_service_host(store.url)
    ray.get(host.drained.remote(), timeout=60)  # started, with its store open
    call = LLMCall("openai", "m", "p", "r", 10, 5, 0.01, 0.1, "ok", started_at=time.time())

    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the store's write lock, held by another process
    try:
        write = host.record.remote(proposal, call)
        drained = host.drained.remote()
        assert ray.wait([write], timeout=1.0)[0] == [], "the write should wait for the lock"
        # The circuits answer from their own thread meanwhile, both ways.
        assert ray.get(host.ask.remote("p"), timeout=10) == (0.0, "closed")
        ray.get(host.report.remote("p", "rate_limited", 5.0), timeout=10)
        assert "p" in ray.get(host.status.remote(), timeout=10)
        assert ray.wait([drained], timeout=0)[0] == [], "drained answered before the write"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    ray.get([write, drained], timeout=30)
    assert [c.status for c in store.proposal_calls(proposal)] == ["ok"]
