"""The `evolve` command as a user runs it: real subprocesses, a real SQLite file, the workers
this machine's processes (the default) or a real local Ray instance (`--ray-address local`)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.sandboxes.docker import docker_available
from evolve.store import Store
from tests.conftest import EVOLVE, postgres_schema, write_synthetic_task
from tests.helpers.cli import evolve, kill_group

pytestmark = pytest.mark.system


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_run_then_leaderboard_and_show(tmp_path: Path, executor: str) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=25)
    where = ("--ray-address", "local") if executor == "ray" else ()
    command = ("run", task, "--name", "demo", "--workers", "2", "--seed", "3", *where)
    done = evolve(*command, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_log = (tmp_path / "results" / "demo" / "run.log").read_text()
    assert f"run demo starts with 2 worker(s) ({executor})" in run_log, run_log
    assert "results in results/demo" in done.stdout
    assert "finished: candidate budget reached (25)" in done.stdout
    said = (
        r"^best: candidate #\d+, distance [\d.]+(, seed 97: [^;]+| \(the seed\)); distance, lower"
    )
    assert re.search(said, done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^its metrics: distance [\d.]+, ", done.stdout, re.MULTILINE), done.stdout
    assert "Started a local Ray instance" not in done.stdout + done.stderr
    best_file = tmp_path / "results" / "demo" / "best" / "seed.py"
    assert best_file.exists()
    best_id = int((best_file.parent / "CANDIDATE").read_text())

    board = evolve("leaderboard", cwd=tmp_path)
    assert board.returncode == 0, board.stderr
    assert f"#{best_id}" in board.stdout and "distance" in board.stdout

    shown = evolve("show", best_id, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "lineage to the seed" in shown.stdout and "seed)" in shown.stdout
    assert "@knob" in shown.stdout

    assert evolve("show", "999999", cwd=tmp_path).returncode == 2


def test_a_malformed_task_exits_2_naming_file_line_and_field(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    task.write_text(task.read_text().replace("candidates: 30", "candidates: -4"))
    done = evolve("run", task, cwd=tmp_path)
    assert done.returncode == 2
    assert "task.yaml:13: budget.candidates" in done.stderr
    assert not (tmp_path / "results" / "evolve.db").exists()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where the run's store is: its default SQLite file, or a PostgreSQL schema of its own
    (where turns commit on a thread of their own: evolve/store/commits.py)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results' / 'evolve.db'}"
        return
    with postgres_schema() as url:
        yield url


def test_sigkill_mid_run_then_resume_loses_and_repeats_nothing(
    tmp_path: Path, store_url: str
) -> None:
    task = write_synthetic_task(
        tmp_path / "task", candidates=40, params="{target: 100, delay_s: 0.2}"
    )
    database = ["--db", store_url]
    sqlite_file = Path(store_url.removeprefix("sqlite:///")) if "sqlite" in store_url else None
    driver = subprocess.Popen(
        [*EVOLVE, "run", str(task), "--name", "crash", "--workers", "2", "--plain", *database],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        finished_before: dict[int, tuple[int, str]] = {}
        while time.monotonic() < deadline and len(finished_before) < 10:
            time.sleep(0.3)
            if sqlite_file is not None and not sqlite_file.exists():
                continue  # the driver makes it (a PostgreSQL schema is made under a lock)
            with Store(store_url) as store:
                if store.get_run("crash"):
                    finished_before = _evaluations(store)
        assert len(finished_before) >= 10, "the run never got going"
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        kill_group(driver)
    with Store(store_url) as store:
        finished_before = _evaluations(store)  # whatever committed before the kill
        assert store.count_candidates("crash") < 40

    resumed = evolve("run", "--resume", "crash", "--workers", "2", *database, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming run crash" in resumed.stdout

    with Store(store_url) as store:
        after = _evaluations(store)
        assert all(after[e] == finished_before[e] for e in finished_before), (
            "a finished evaluation changed"
        )
        assert store.count_candidates("crash") == 40
        assert store.pending_candidates("crash") == []
        first_evaluations = Counter(
            e.candidate_id for e in store.run_evaluations("crash") if e.kind == "evaluate"
        )
        assert len(first_evaluations) == 40
        assert set(first_evaluations.values()) == {1}, "a candidate was evaluated twice"
        assert store.get_run("crash").status == "finished"


def _evaluations(store: Store) -> dict[int, tuple[int, str]]:
    """Every recorded evaluation of the run: id -> (candidate, status)."""
    return {e.id: (e.candidate_id, e.status) for e in store.run_evaluations("crash")}


@pytest.mark.docker
@pytest.mark.skipif(not docker_available()[0], reason=f"docker: {docker_available()[1]}")
def test_sandbox_build_is_cached_and_check_reports_what_works(tmp_path: Path) -> None:
    build = evolve("sandbox", "build", cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    assert "not rebuilding" in build.stdout and "sandbox image ready" in build.stdout
    check = evolve("sandbox", "check", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    for finding in (
        "engine:",
        "image:",
        "trivial job: exited with code 0",
        "perf counters:",
        "gpu:",
        "ok   process isolation: bubblewrap",
        "ok   process job: exited with code 0",
    ):
        assert finding in check.stdout


def test_ctrl_c_stops_cleanly_and_the_run_resumes(tmp_path: Path) -> None:
    task = write_synthetic_task(
        tmp_path / "task", candidates=30, params="{target: 100, delay_s: 0.2}"
    )
    db = tmp_path / "results" / "evolve.db"
    driver = subprocess.Popen(
        [*EVOLVE, "run", str(task), "--name", "int", "--workers", "1", "--plain"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.3)
            if db.exists():
                with Store(f"sqlite:///{db}") as store:
                    if store.get_run("int") and store.count_candidates("int") >= 5:
                        break
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=60)
    finally:
        kill_group(driver)
    assert driver.returncode == 130
    assert "stopped. Continue with: evolve run --resume int" in out
    with Store(f"sqlite:///{db}") as store:
        assert store.get_run("int").status == "stopped"
    resumed = evolve("run", "--resume", cwd=tmp_path)  # the latest run
    assert resumed.returncode == 0, resumed.stderr
    with Store(f"sqlite:///{db}") as store:
        assert store.count_candidates("int") == 30 and not store.pending_candidates("int")


def run_without(tmp_path: Path, task: Path, *flags: str, bwrap_fails: bool = False):
    """`evolve run` on a host with no Docker engine, and optionally a bubblewrap that cannot
    make namespaces (as inside many containers)."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    if bwrap_fails:
        fake = tmp_path / "bin"
        fake.mkdir(exist_ok=True)
        (fake / "bwrap").write_text(
            "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
        )
        (fake / "bwrap").chmod(0o755)
        env["PATH"] = f"{fake}:{env['PATH']}"
    return subprocess.run(
        [*EVOLVE, "run", str(task), *flags], cwd=tmp_path, capture_output=True, text=True,
        timeout=240, env=env,
    )  # fmt: skip


def test_without_docker_the_run_refuses_rather_than_fall_back(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=5)
    task.write_text(task.read_text().replace("backend: process", "backend: docker"))
    done = run_without(tmp_path, task)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "the docker sandbox cannot run here" in done.stderr
    assert "--sandbox process" in done.stderr
    assert not (tmp_path / "results" / "evolve.db").exists()
    asked = run_without(tmp_path, task, "--sandbox", "process")
    assert asked.returncode == 0, asked.stderr
    assert "sandbox: process, isolated by bubblewrap" in asked.stdout


def test_an_unisolated_process_sandbox_runs_only_where_the_task_asks(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=5)
    flagged = task.parent / "flagged.yaml"
    flagged.write_text(task.read_text().replace("backend: process", "backend: docker"))
    refused = run_without(tmp_path, flagged, "--sandbox", "process", bwrap_fails=True)
    assert refused.returncode == 2
    assert "cannot isolate here" in refused.stderr and "NOT isolated" in refused.stderr
    accepted = run_without(tmp_path, task, bwrap_fails=True)
    assert accepted.returncode == 0, accepted.stderr
    assert "NOT isolated" in accepted.stderr


def test_an_unreachable_ray_cluster_fails_fast_and_leaves_no_run(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    with socket.socket() as probe:  # a port that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = evolve("run", task, "--ray-address", f"127.0.0.1:{port}", cwd=tmp_path, timeout=60)
    assert done.returncode == 1
    assert f"could not start or join the Ray cluster at 127.0.0.1:{port}" in done.stderr
    assert not (tmp_path / "results" / "evolve.db").exists()
