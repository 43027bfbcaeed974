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
from pathlib import Path

import pytest

from evolve.store import Store
from tests.fakes.llm_server import ScriptedLLMServer
from tests.test_budget_reservation import BillingModel, write_task

RUN = "before-send"
ANSWERED = 5  # requests answered before the model stalls every request


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
        task = write_task(tmp_path, server.openai_url, candidates=12, timeout_s=300, concurrency=4)
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
