"""A seed whose evaluation times out on a loaded node is tried again, up to three times,
before the run gives up; a run that gives up is `failed`. The synthetic evaluator's
`flaky_first` times out the first evaluations on each worker, as a loaded node would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evolve.store import Store
from tests.conftest import write_synthetic_task

EVOLVE = [sys.executable, "-m", "evolve"]


def _run(tmp_path: Path, flaky_first: int) -> tuple[subprocess.CompletedProcess[str], str]:
    params = f"{{target: 100, flaky_first: {flaky_first}}}"
    task = write_synthetic_task(tmp_path / "task", candidates=4, params=params)
    done = subprocess.run(
        [*EVOLVE, "run", str(task), "--name", "flaky", "--workers", "1", "--plain"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        record = store.get_run("flaky")
        assert record is not None
        return done, record.status


@pytest.mark.parametrize("flaky_first", [1, 2])
def test_a_seed_that_times_out_is_tried_again_and_the_run_goes_on(
    tmp_path: Path, flaky_first: int
) -> None:
    done, status = _run(tmp_path, flaky_first)
    assert done.returncode == 0, done.stdout + done.stderr
    for attempt in range(1, flaky_first + 1):
        assert f"the seed's evaluation ended timeout (try {attempt} of 3); trying again" in (
            done.stdout
        )
    assert status == "finished" and "finished: candidate budget reached (4)" in done.stdout


def test_a_seed_that_times_out_three_times_fails_the_run(tmp_path: Path) -> None:
    done, status = _run(tmp_path, 3)
    assert done.returncode == 1
    assert "(try 2 of 3); trying again" in done.stdout
    assert "the seed #1 failed (timeout)" in done.stderr
    assert status == "failed"
