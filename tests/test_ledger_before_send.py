"""The ledger holds a row for every model request sent, committed before the request leaves:
a `kill -9` of a run with requests in flight loses none of them, and `--resume` charges
them their worst case, which is what the provider bills a request it took but whose
answer nobody read (see tests/test_budget_reservation.py's BillingModel)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config

from evolve.llm import LLMCall
from evolve.plugin.program import Program
from evolve.store import Store, default_url
from evolve.store.upgrade import MIGRATIONS
from tests.conftest import SYNTHETIC_SEED, postgres_schema
from tests.fakes.llm_server import ScriptedLLMServer
from tests.helpers.llm_runs import BillingModel, billed_task
from tests.helpers.stores import raw_engine

RUN = "before-send"
ANSWERED = 5  # requests answered before the model stalls every request


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of either kind."""
    if request.param == "sqlite":
        yield default_url(tmp_path / "results")
        return
    with postgres_schema() as schema_url:
        yield schema_url


def statuses(db: Path) -> list[str]:
    with Store(f"sqlite:///{db}") as store:
        return [call.status for call in store.llm_calls_of_run(RUN)]


@pytest.mark.usefixtures("ray_session")
def test_a_kill_9_with_requests_in_flight_then_resume_charges_what_the_provider_billed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "results" / "evolve.db"
    evolve = [sys.executable, "-m", "evolve"]
    model = BillingModel(stalls=lambda n: n >= ANSWERED, stall_s=600)
    with ScriptedLLMServer(default=model) as server:
        # The stalled requests are killed with the driver, never timed out and retried.
        task = billed_task(tmp_path, server.openai_url, candidates=12, timeout_s=300, concurrency=4)
        driver = subprocess.Popen(
            [*evolve, "run", str(task), "--name", RUN, "--workers", "1", "--plain"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            # Killed once the answers are stored and the stalled requests stopped coming:
            # then every request the server took is either answered or in flight.
            deadline, seen = time.monotonic() + 180, (-1, [])
            while time.monotonic() < deadline:
                now = (len(server.requests), statuses(db) if db.exists() else [])
                stalled = now[0] - ANSWERED
                if stalled >= 2 and now == seen and now[1].count("ok") == ANSWERED:
                    break
                seen = now
                time.sleep(1.0)
            else:
                pytest.fail(f"the run never settled with requests in flight: {seen}")
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
        finally:
            if driver.poll() is None:
                driver.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)

        killed = statuses(db)
        assert killed.count("in_flight") == stalled, "a request in flight has no row"
        assert len(killed) == len(server.requests)

        model.stalls = lambda n: False
        resumed = subprocess.run(
            [*evolve, "run", "--resume", RUN, "--workers", "1", "--plain"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        billed = sum(model.billed)

    with Store(f"sqlite:///{db}") as store:
        calls = store.llm_calls_of_run(RUN)
        usd, tokens = store.llm_spend(RUN)
    assert len(calls) == len(model.billed)
    assert [c.status for c in calls].count("lost") == stalled
    assert "in_flight" not in {c.status for c in calls}
    assert abs(tokens - billed) <= 0.001 * billed, (tokens, billed)
    assert usd == pytest.approx(sum(c.charged_usd for c in calls))


def in_flight(tokens: int, usd: float) -> LLMCall:
    """A request's row as it is written before it is sent."""
    return LLMCall("openai", "m", "", "", 0, 0, 0.0, 0.0, "in_flight", started_at=time.time(),
                   reserved_tokens=tokens, reserved_usd=usd)  # fmt: skip


def test_a_row_in_flight_is_charged_its_reservation_until_its_reply_or_for_good(
    url: str,
) -> None:
    with Store(url) as store:
        record = store.create_run(RUN, task_path="t", task_yaml="", seed=1, settings={})
        seed = store.add_candidate(record.name, Program({"s.py": SYNTHETIC_SEED}),
                                   parent_ids=[], island=0, generation=0, mutation={})  # fmt: skip
        assert seed is not None
        proposal = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
        answered, lost = in_flight(900, 0.009), in_flight(800, 0.008)
        store.add_proposal_call(proposal, answered)
        store.add_proposal_call(proposal, lost)
        assert store.llm_spend(RUN) == (pytest.approx(0.017), 1700)
        reply = replace(answered, response="r", input_tokens=300, output_tokens=40,
                        cost_usd=0.001, latency_s=0.5, status="ok")  # fmt: skip
        store.add_proposal_call(proposal, reply)
        store.add_proposal_call(proposal, reply)  # the settlement's copy: stored once
        assert store.llm_spend(RUN) == (pytest.approx(0.009), 1140)
        assert store.interrupt_proposals(RUN) == 1
        late = replace(lost, response="r", input_tokens=10, output_tokens=5, status="ok")
        store.add_proposal_call(proposal, late)  # a reply after the run closed changes nothing
        calls = store.proposal_calls(proposal)
        assert [(c.status, c.charged_tokens) for c in calls] == [("ok", 340), ("lost", 800)]
        assert store.llm_spend(RUN) == (pytest.approx(0.009), 1140)


def test_a_ledger_from_before_charges_is_charged_its_usage(url: str) -> None:
    with Store(url) as store:
        record = store.create_run(RUN, task_path="t", task_yaml="", seed=1, settings={})
        seed = store.add_candidate(record.name, Program({"s.py": SYNTHETIC_SEED}),
                                   parent_ids=[], island=0, generation=0, mutation={})  # fmt: skip
        assert seed is not None
        proposal = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
        call = LLMCall("openai", "m", "p", "r", 120, 30, 0.002, 0.1, "ok")
        store.add_proposal_call(proposal, call)
    engine = raw_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:  # as the store was before the charges were kept
        config.attributes["connection"] = connection
        command.downgrade(config, "-1")
    engine.dispose()
    with Store(url) as store:
        assert store.llm_spend(RUN) == (pytest.approx(0.002), 150)
