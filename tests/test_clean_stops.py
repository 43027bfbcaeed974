"""Stopping a run leaves nothing running: SIGTERM removes the run's containers and worker
processes before the driver exits, `kill -9` of the driver leaves no candidate or worker
alive five seconds later, and the next `evolve` command marks such a run stopped and cleans
up what is left even when nothing else could. Each holds for a run on this machine's
processes (the local executor, `evolve run`'s default) and for one on a local Ray instance
(`--ray-address local`).

Each run evaluates with a real evaluator plugin, installed for the test through an entry
point as a user would, whose candidates sleep in the sandbox two processes deep until they
are killed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from evolve.runtime.processes import ProcessId, start_time
from evolve.sandboxes import docker_available
from evolve.sandboxes.docker import LABEL, OWNER_PID
from evolve.store import Store
from tests.conftest import SYNTHETIC_SEED, descendants, write_synthetic_task

pytestmark = pytest.mark.system

EVOLVE = [sys.executable, "-m", "evolve"]
MARKER = f"7{os.getpid() % 1000:03d}.25"  # how long a candidate sleeps: unique to this test run
PLUGIN = f'''"""Candidates that sleep in the sandbox, two processes deep, until they are killed."""

from evolve.plugin.evaluator import Evaluator
from evolve.plugin.results import EvalResult


class Sleeper(Evaluator):
    name = "sleeper"

    def __init__(self, params, task_dir):
        pass

    def evaluate(self, program, sandbox, *, seed):
        argv = ["sh", "-c", "sleep {MARKER} & sleep {MARKER}; wait"]
        sandbox.run(argv, files={{}}, limits=self.limits)
        return EvalResult("ok", metrics={{"x": 1.0}})
'''
TASK = """name: sleepy
seed: seed.py
evaluator: {{name: sleeper}}
objectives: [{{name: x, direction: maximize}}]
budget: {{candidates: 5}}
sandbox: {{backend: {backend}, timeout_s: 3000}}
"""
needs_docker = pytest.mark.skipif(not docker_available()[0], reason=f"{docker_available()[1]}")
EXECUTORS = ["local", "ray"]  # where the run's workers are: this machine's processes, or Ray


def _install_plugin(site: Path) -> dict[str, str]:
    """The plugin, and an environment whose Python (and Ray's workers) find it."""
    info = site / "evolve_sleeper-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "evolve_sleeper.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evolve-sleeper\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[evolve.evaluators]\nsleeper = evolve_sleeper:Sleeper\n"
    )
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _next_run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Another `evolve run` on the same store: only a run sweeps up after dead drivers."""
    task = write_synthetic_task(tmp_path / "other", candidates=2)
    done = subprocess.run(
        [*EVOLVE, "run", str(task), "--name", "other", "--workers", "1", "--plain"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _start(
    tmp_path: Path, backend: str, executor: str
) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`evolve run` of the sleepy task, its workers on `executor` ("local" or "ray")."""
    env = _install_plugin(tmp_path / "site")
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "seed.py").write_text(SYNTHETIC_SEED)
    (tmp_path / "task" / "task.yaml").write_text(TASK.format(backend=backend))
    log = (tmp_path / "driver.log").open("wb")
    where = ["--ray-address", "local"] if executor == "ray" else []
    command = [*EVOLVE, "run", "task/task.yaml", "--name", "sleepy", "--workers", "1", "--plain"]
    driver = subprocess.Popen(
        [*command, *where], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    return driver, env


def _sleepers() -> list[ProcessId]:
    """The candidates' processes, in a container or not (a container's are visible here)."""
    wanted = b"\0".join([b"sleep", MARKER.encode(), b""])
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and Path(f"/proc/{entry}/cmdline").read_bytes() == wanted:
                started = start_time(int(entry))
                if started is not None:
                    found.append(ProcessId("", int(entry), started))
    return found


def _descendants(root: int) -> list[ProcessId]:
    found = descendants(root)
    return [ProcessId("", pid, started) for pid in found if (started := start_time(pid))]


def _alive(processes: list[ProcessId]) -> list[ProcessId]:
    return [p for p in processes if start_time(p.pid) == p.started]


def _evaluating(driver: subprocess.Popen[bytes], tmp_path: Path) -> list[ProcessId]:
    """Wait until a candidate sleeps in the sandbox; then every process of the run: the
    driver's descendants (its workers, Ray if it has it, the guardian) and the candidate's.
    Sleepers already there when it is called are another test's leftovers: the driver has
    only just started, seconds before its first candidate can sleep."""
    earlier = set(_sleepers())
    deadline = time.monotonic() + 180
    while len(ours := [p for p in _sleepers() if p not in earlier]) < 2:
        assert driver.poll() is None, (tmp_path / "driver.log").read_text()
        assert time.monotonic() < deadline, "no candidate started sleeping"
        time.sleep(0.2)
    return _descendants(driver.pid) + ours


def _containers(owners: list[ProcessId]) -> list[str]:
    """The sandbox containers that these processes own."""
    pids = {str(p.pid) for p in owners}
    client = docker.from_env()
    listed = client.containers.list(all=True, filters={"label": f"{LABEL}=1"})
    return [c.id for c in listed if c.labels.get(OWNER_PID) in pids]


def _status(tmp_path: Path) -> str:
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        record = store.get_run("sleepy")
        assert record is not None
        return record.status


def _kill_group(driver: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(driver.pid, signal.SIGKILL)


def _worker(run: list[ProcessId], executor: str) -> ProcessId:
    """The run's one evaluation worker: the local executor's child process, or Ray's actor."""
    if executor == "ray":
        found = [p for p in run if _cmdline(p).startswith(b"ray::RayEvaluationWorker")]
    else:
        found = [p for p in run if b"\0-m\0evolve.executors.actor_process\0" in _cmdline(p)]
    assert len(found) == 1, [_cmdline(p) for p in run]
    return found[0]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "backend", ["process", pytest.param("docker", marks=[pytest.mark.docker, needs_docker])]
)
def test_after_kill_9_of_the_driver_nothing_of_the_run_lives_5_s(
    tmp_path: Path, backend: str, executor: str
) -> None:
    driver, env = _start(tmp_path, backend, executor)
    try:
        run = _evaluating(driver, tmp_path)
        _worker(run, executor)
        ray_processes = [p for p in run if _cmdline(p).startswith(b"ray::")]
        assert bool(ray_processes) == (executor == "ray"), [_cmdline(p) for p in run]
        if backend == "docker":
            assert _containers(run), "no sandbox container seen"
        driver.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        driver.wait(timeout=10)
        while _alive(run) and time.monotonic() - killed < 5:
            time.sleep(0.05)
        took = time.monotonic() - killed
        left = _alive(run)
    finally:
        _kill_group(driver)
    print(f"\n{backend}, {executor}: the last process of the run ended {took:.2f} s after kill -9")
    assert not left, f"alive 5 s after kill -9: {left}"
    if backend == "docker":
        assert not _containers(run), "a sandbox container outlived the run"
    board = subprocess.run(
        [*EVOLVE, "leaderboard", "sleepy"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert board.returncode == 0, board.stderr
    assert _status(tmp_path) == "running"  # a command that only reads changes nothing
    after = _next_run(tmp_path, env)
    assert "marked killed" in after.stderr, after.stderr
    assert _status(tmp_path) == "killed"


@pytest.mark.docker
@needs_docker
@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_next_run_cleans_up_when_the_guardian_died_too(tmp_path: Path, executor: str) -> None:
    """The worst case: the candidate stopped its worker (which so never removes its
    container, nor, on Ray, notices that Ray is gone), and the guardian was killed with the
    driver."""
    driver, env = _start(tmp_path, "docker", executor)
    try:
        run = _evaluating(driver, tmp_path)
        worker = _worker(run, executor)
        (guardian,) = [p for p in run if b"evolve.runtime.guardian" in _cmdline(p)]
        os.kill(worker.pid, signal.SIGSTOP)
        os.kill(guardian.pid, signal.SIGKILL)  # as a machine-wide kill would
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        # Looked at at once: on a machine running other tests, another driver's clean-up of
        # Ray instances whose raylet is gone may take these leftovers first.
        assert _containers(run), "nothing was left to clean up: the test proves nothing"
        assert _status(tmp_path) == "running"
        after = _next_run(tmp_path, env)
    finally:
        _kill_group(driver)
    assert "marked killed" in after.stderr and _status(tmp_path) == "killed", after.stderr
    assert not _containers(run), "the next run left the sandbox containers"
    assert not _alive(run), f"the next run left {_alive(run)}"


@pytest.mark.docker
@needs_docker
@pytest.mark.parametrize("executor", EXECUTORS)
def test_sigterm_stops_the_run_and_removes_its_containers_before_exit(
    tmp_path: Path, executor: str
) -> None:
    driver, _ = _start(tmp_path, "docker", executor)
    try:
        run = _evaluating(driver, tmp_path)
        assert _containers(run)
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=60)
        containers, left = _containers(run), _alive(run)
    finally:
        _kill_group(driver)
    log = (tmp_path / "driver.log").read_text()
    assert driver.returncode == 130, log
    assert "stopped. Continue with: evolve run --resume sleepy" in log
    assert _status(tmp_path) == "stopped"
    assert not containers, "a sandbox container outlived the driver"
    assert not [p for p in left if b"evolve.runtime.guardian" not in _cmdline(p)], left


def _cmdline(process: ProcessId) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{process.pid}/cmdline").read_bytes()
    return b""
