"""A seed whose evaluation times out on a loaded node is tried again, up to three times,
before the run gives up; a run that gives up is `failed`. The synthetic evaluator's
`flaky_first` times out the first evaluations on each worker, as a loaded node would."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.store import Store
from tests.conftest import write_synthetic_task

pytestmark = pytest.mark.system

EVOLVE = [sys.executable, "-m", "evolve"]


def _run(
    tmp_path: Path, flaky_first: int, workers: int = 1
) -> tuple[subprocess.CompletedProcess[str], str]:
    params = f"{{target: 100, flaky_first: {flaky_first}}}"
    task = write_synthetic_task(tmp_path / "task", candidates=4, params=params)
    done = subprocess.run(
        [*EVOLVE, "run", str(task), "--name", "flaky", "--workers", str(workers), "--plain"],
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
        assert f"(try {attempt} of 3); trying again, on another worker if there is one" in (
            done.stdout
        )
    assert status == "finished" and "finished: candidate budget reached (4)" in done.stdout


def test_a_seed_that_times_out_three_times_fails_the_run(tmp_path: Path) -> None:
    done, status = _run(tmp_path, 3)
    assert done.returncode == 1
    assert "the seed's evaluation ended timeout on worker-0@" in done.stdout
    assert "(try 2 of 3); trying again" in done.stdout
    assert "the seed #1 failed (timeout)" in done.stderr
    assert status == "failed"


def test_the_seed_is_tried_again_on_another_worker(tmp_path: Path) -> None:
    """Each worker's first evaluation times out: the second try must not go back to the
    worker that just failed, and the third may, since it has no more failures left."""
    done, status = _run(tmp_path, 1, workers=2)
    assert done.returncode == 0, done.stdout + done.stderr
    tried = re.findall(r"the seed's evaluation ended timeout on (\S+) \(try", done.stdout)
    assert len(tried) == 2 and tried[0] != tried[1], done.stdout
    assert status == "finished"
