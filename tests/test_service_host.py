"""The run's services, hosted by the first proposal worker: the ledger writer and the
circuits answer other processes from threads of their own, and neither holds the other
up."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import ray

from evolve.executors.on_ray import RayActor, start_proposal_worker
from evolve.executors.ray_services import RemoteLedger
from evolve.llm import LLMCall
from evolve.llm.client import LLMClient
from evolve.llm.config import parse_model
from evolve.mutators import MutationError, MutationRequest, Parent, Proposal
from evolve.plugin.program import Program
from evolve.plugin.secrets import Keys
from evolve.propose.service_host import ServicePlan
from evolve.propose.services import RunServices
from evolve.store import CandidateRecord, Store
from tests.conftest import SYNTHETIC_SEED
from tests.fakes.llm_server import Reply, ScriptedLLMServer, Stall

RUN = "hosted"


def opened(tmp_path: Path, operator: str) -> tuple[Store, CandidateRecord, int]:
    """A SQLite store at tmp_path/e.db with a run, its seed, and a proposal on the seed."""
    store = Store(f"sqlite:///{tmp_path / 'e.db'}")
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    proposal = store.open_proposal(RUN, operator=operator, parent_ids=[seed.id], island=0)
    return store, seed, proposal


@contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """The store's write lock, held by another process: every write waits until the end."""
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def paid(started_at: float) -> LLMCall:
    """A model call that succeeded; each gets a call_id of its own."""
    return LLMCall("openai", "m", "p", "r", 10, 5, 0.01, 0.1, "ok", started_at=started_at)


@pytest.mark.usefixtures("ray_session")
def test_a_write_held_up_by_a_locked_store_holds_up_no_circuit_answer(tmp_path: Path) -> None:
    store, _, proposal = opened(tmp_path, "diff")
    host = start_proposal_worker({}, ServicePlan(store.url), ())
    ray.get(host.drained.remote(), timeout=60)  # started, with its store open
    with write_locked(tmp_path / "e.db"):
        write = host.record.remote(proposal, paid(time.time()))
        assert ray.wait([write], timeout=1.0)[0] == [], "the write should wait for the lock"
        # The circuits answer from their own thread meanwhile, both ways.
        assert ray.get(host.ask.remote("p"), timeout=10) == (0.0, "closed")
        ray.get(host.report.remote("p", "rate_limited", 5.0), timeout=10)
        assert "p" in ray.get(host.status.remote(), timeout=10)
        # Only now is `drained` sent: a threaded actor may run one caller's calls out of
        # order (Ray's docs, "Actor Task Execution Order"), and a `drained` sent with the
        # write could run first, find nothing queued and answer at once.
        drained = host.drained.remote()
        assert ray.wait([drained], timeout=1.0)[0] == [], "drained answered before the write"
    ray.get([write, drained], timeout=30)
    assert [c.status for c in store.proposal_calls(proposal)] == ["ok"]


class AskThenGiveUp:
    """A mutator that asks the model twice and then fails: its calls reach the store only
    through the ledger, never through a settlement."""

    name = "asker"

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.url = params["url"]

    def propose(self, request: MutationRequest) -> Proposal:
        client = LLMClient(parse_model({"model": "scripted", "base_url": self.url}))
        calls = [
            call
            for _ in range(2)
            for call in client.complete(
                "sys", [{"role": "user", "content": "go"}], max_tokens=9
            ).calls
        ]
        raise MutationError("gave up", calls)


@pytest.mark.usefixtures("ray_session")
def test_a_worker_that_does_not_host_the_services_streams_its_calls_to_the_one_that_does(
    tmp_path: Path,
) -> None:
    store, seed, proposal = opened(tmp_path, "asker")
    with ScriptedLLMServer(default=Reply("no")) as server:
        mutators = {"asker": AskThenGiveUp({"url": server.openai_url})}
        host = start_proposal_worker({}, ServicePlan(store.url), ())
        other = start_proposal_worker(mutators, host, ())
        request = MutationRequest(Parent(seed.id, seed.program, None), (), seed=1)
        failed = ray.get(
            other.propose.remote("asker", request, Keys({}), proposal, True), timeout=60
        )
    assert failed.reason == "gave up" and len(failed.calls) == 2
    # Nobody settled the proposal: both calls are in the store because the host wrote
    # them, before the proposal returned.
    stored = store.proposal_calls(proposal)
    assert sorted(c.call_id for c in stored) == sorted(c.call_id for c in failed.calls)


class AskTwiceThenWait:
    """A mutator whose third request outlasts the run: its first two calls are in the
    ledger only, since the proposal never returns."""

    name = "waiter"

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.url = params["url"]

    def propose(self, request: MutationRequest) -> Proposal:
        client = LLMClient(parse_model({"model": "scripted", "base_url": self.url}))
        for _ in range(3):
            client.complete("sys", [{"role": "user", "content": "go"}], max_tokens=9)
        raise MutationError("not reached", ())


@pytest.mark.usefixtures("ray_session")
def test_a_stopping_run_keeps_the_calls_another_worker_sent_before_it_stopped(
    tmp_path: Path,
) -> None:
    """The calls of a proposal abandoned in a worker that reaches the ledger through Ray are
    written before the host stops, even while the store holds their writes up. A request
    leaves only once its row is stored (evolve/llm/reservations.py), so the store is
    locked while the first request is out: its answer's write is then held up. (Ray ran
    the host's calls in the order they arrived in every try here; the drain does not rely
    on it, as the test below shows.)"""
    store, seed, proposal = opened(tmp_path, "waiter")
    services = RunServices(ServicePlan(store.url))
    steps = (Stall(2.0, Reply("one")), Stall(30.0))
    with ScriptedLLMServer(*steps) as server:
        mutators = {"waiter": AskTwiceThenWait({"url": server.openai_url})}
        host = start_proposal_worker({}, services.plan, ())
        ray.get(host.drained.remote(), timeout=60)  # started, with its store open
        services.host = RayActor("proposals-0", host)
        other = RayActor("proposals-1", start_proposal_worker(mutators, host, ()))
        request = MutationRequest(Parent(seed.id, seed.program, None), (), seed=1)
        other.call("propose", "waiter", request, Keys({}), proposal, True)
        deadline = time.monotonic() + 60
        while not server.requests:
            assert time.monotonic() < deadline, "the first request never came"
            time.sleep(0.01)
        with write_locked(tmp_path / "e.db"):
            # The worker knows its answered call is not stored yet, and the drain waits for it.
            deadline = time.monotonic() + 30
            while other.call("flushed", 0.1).result(timeout=30) != 1:
                assert time.monotonic() < deadline, "the first answer was never sent to be stored"
            draining = threading.Thread(target=services.drain, args=([other],))
            draining.start()
            draining.join(timeout=1.0)
            assert draining.is_alive(), "the drain ended while the writes were held up"
        draining.join(timeout=60)
        assert not draining.is_alive()
        for handle in (other.handle, host):
            ray.kill(handle)
    # The answered call; the next request, let out once its row was stored, may follow it.
    assert [c.status for c in store.proposal_calls(proposal)][:1] == ["ok"]


@pytest.mark.usefixtures("ray_session")
def test_a_flush_waits_for_the_writes_sent_and_counts_those_left_unconfirmed(
    tmp_path: Path,
) -> None:
    store, _, proposal = opened(tmp_path, "diff")
    host = start_proposal_worker({}, ServicePlan(store.url), ())
    ray.get(host.drained.remote(), timeout=60)
    ledger = RemoteLedger(host)
    with write_locked(tmp_path / "e.db"):
        for n in range(2):
            ledger.send(proposal, paid(n))
        assert ledger.flush(0.5) == 2, "both writes are held up by the lock"
        assert ledger.flush(0.5) == 2, "what one flush left unconfirmed, the next waits for"
        ledger.send(proposal, paid(2))
    assert ledger.flush(30) == 0
    assert len(store.proposal_calls(proposal)) == 3
    ray.kill(host)
