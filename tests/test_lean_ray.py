"""A local Ray instance runs only what a run talks to (evolve/runtime/lean_ray.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
import ray
from ray._private import ray_constants, services
from ray._private.node import Node

from evolve.runtime import cluster, lean_ray
from evolve.runtime.lean_ray import (
    STAND_IN,
    lean_start,
    left_out,
    stands_in_for_agents,
    with_stand_in_agents,
)
from tests.conftest import descendants


def descendants_commands(root: int) -> list[str]:
    """The command lines of every process under `root`."""
    commands = []
    for pid in descendants(root):
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return commands


@pytest.mark.usefixtures("ray_session")
def test_a_local_instance_keeps_no_task_events() -> None:
    """Nothing reads them without a dashboard, and the GCS kept every task's, growing
    through a run (evolve/runtime/cluster.py). Ray's processes report them once a second."""
    from ray._private.state import state

    @ray.remote(num_cpus=0)
    def nothing() -> None:
        return None

    ray.get([nothing.remote() for _ in range(20)], timeout=60)
    time.sleep(2.5)
    assert state._get_all_task_events() == []


@pytest.mark.usefixtures("ray_session")
def test_a_local_instance_leaves_out_the_monitors_and_the_dashboard_and_still_runs_tasks() -> None:
    @ray.remote(num_cpus=0)
    def answer() -> int:
        return 42

    assert ray.get(answer.remote(), timeout=60) == 42
    commands = descendants_commands(os.getpid())
    assert any("gcs_server" in c for c in commands) and any("raylet" in c for c in commands)
    for script in (
        "autoscaler/_private/monitor.py",
        "log_monitor.py",
        "dashboard/dashboard.py",
        "dashboard/agent.py",
        "runtime_env/agent/main.py",
    ):
        assert not any(script in c for c in commands), (script, commands)
    # The raylet's two agents are stand-ins, each with its port files written.
    stand_ins = [c.split() for c in commands if c.startswith(f"/bin/sh {STAND_IN} ")]
    assert len(stand_ins) == 2, commands
    port_files = [Path(f) for argv in stand_ins for f in argv[2:]]
    assert len(port_files) == 4 and all(f.read_text() == "-1" for f in port_files)
    # Ray's own methods are back once the start is over.
    assert all(getattr(Node, name).__name__ == name for name in left_out())
    assert services.start_ray_process.__module__ == services.__name__


# Agents are stood in for only once cluster.connect has set Ray's `uv run` flag off, as every
# start of Ray in a run does first.
@pytest.mark.usefixtures("ray_session")
def test_a_retried_start_gets_rays_own_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    original = services.start_ray_process
    with lean_start(stand_in_agents=False):
        assert services.start_ray_process is original
    with lean_start(stand_in_agents=True):
        assert services.start_ray_process is not original
    assert services.start_ray_process is original
    # What a local start asks for, try by try, when every try fails.
    asked: list[bool] = []

    def failing(address: str | None, stand_in_agents: bool) -> Exception:
        asked.append(stand_in_agents)
        return Exception("The current node timed out during startup.")

    monkeypatch.setattr(cluster, "_attempt", failing)
    monkeypatch.setattr(cluster, "START_BACKOFF_S", 0.0)
    with pytest.raises(RuntimeError, match="did not start in 3 tries"):
        cluster._init(None)
    assert asked == [True, False, False]


def test_a_job_that_ray_would_give_a_runtime_environment_gets_the_real_agents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ray_constants.RAY_RUNTIME_ENV_HOOK, raising=False)
    monkeypatch.setattr(ray_constants, "RAY_ENABLE_UV_RUN_RUNTIME_ENV", False)  # as connect sets
    assert stands_in_for_agents()
    monkeypatch.setenv(ray_constants.RAY_RUNTIME_ENV_HOOK, "my_hooks.make_env")
    assert not stands_in_for_agents()
    monkeypatch.delenv(ray_constants.RAY_RUNTIME_ENV_HOOK)
    monkeypatch.setattr(ray_constants, "RAY_ENABLE_UV_RUN_RUNTIME_ENV", True)
    assert not stands_in_for_agents()


@pytest.mark.usefixtures("ray_session")
def test_the_driver_asks_for_no_uv_run_runtime_environment() -> None:
    # Ray reads the flag when it is imported, before evolve can set it in the environment.
    assert os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] == "0"
    assert ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV is False


def test_only_the_agents_commands_are_replaced_and_only_when_the_raylet_names_its_session() -> None:
    node = "ab" * 28
    raylet = [
        "raylet",
        "--session_dir=/tmp/s",
        f"--node_id={node}",
        "--dashboard_agent_command=python agent.py --minimal",
        "--runtime_env_agent_command=python main.py",
        "--object_store_memory=100",
    ]
    changed = with_stand_in_agents(raylet)
    assert changed[:3] == raylet[:3] and changed[5] == raylet[5]
    for argument, port in ((changed[3], "metrics_agent_port"), (changed[4], "runtime_env_agent")):
        assert str(STAND_IN) in argument and f"/tmp/s/{port}" in argument and node in argument
        assert "agent.py" not in argument and "main.py" not in argument
    assert (
        with_stand_in_agents([r for r in raylet if "session_dir" not in r])
        == raylet[:1] + raylet[2:]
    )


def alive(pid: int) -> bool:
    """Running, not a zombie that nobody has reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2][0] != "Z"
    except OSError:
        return False


def raylet_like(
    files: list[Path], named_raylet: str, inside: Sequence[str] = ()
) -> tuple[int, bool, float]:
    """Run a parent that starts a stand-in as a raylet does (naming `named_raylet` as its
    raylet; "self" for the parent itself; under the command `inside`, if given), waits
    until the stand-in has written its files or ended, and a little longer, then ends, as
    a raylet killed with SIGKILL. The stand-in's pid, whether it was still waiting when
    its raylet ended, and the CPU seconds it had used by then (-1 where unknown). The
    parent stays unreaped until the stand-in closes its output, which it inherited: a
    stand-in that waited on its raylet's pid would wait for ever."""
    parent = subprocess.run(
        [
            *inside,
            sys.executable,
            "-c",
            "import os, pathlib, subprocess, sys, time\n"
            "named, *argv = sys.argv[1:]\n"
            "raylet = str(os.getpid()) if named == 'self' else named\n"
            "env = {**os.environ, 'RAY_RAYLET_PID': raylet}\n"
            "child = subprocess.Popen(['/bin/sh', *argv], env=env)\n"
            "print(child.pid, flush=True)\n"
            "deadline = time.monotonic() + 20\n"
            "while time.monotonic() < deadline and child.poll() is None and not all(\n"
            "        pathlib.Path(f).exists() for f in argv[1:]):\n"
            "    time.sleep(0.05)\n"
            "time.sleep(1.5)  # longer than a stand-in's poll\n"
            "waiting = child.poll() is None\n"
            "try:\n"
            "    stat = pathlib.Path(f'/proc/{child.pid}/stat').read_text()\n"
            "    ticks = sum(map(int, stat.rsplit(') ', 1)[1].split()[11:13]))\n"
            "except (OSError, ValueError):\n"
            "    ticks = -1\n"
            "print(waiting, ticks, flush=True)\n",
            named_raylet,
            str(STAND_IN),
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    pid, waiting, ticks = parent.stdout.split()
    cpu_s = int(ticks) / os.sysconf("SC_CLK_TCK") if int(ticks) >= 0 else -1.0
    return int(pid), waiting == "True", cpu_s


def test_a_stand_in_writes_its_port_files_and_ends_with_its_raylet(tmp_path: Path) -> None:
    files = [tmp_path / "metrics_agent_port_x", tmp_path / "runtime_env_agent_port_x"]
    stand_in, waited, cpu_s = raylet_like(files, "self")
    assert waited, "the stand-in ended before its raylet"
    assert 0 <= cpu_s < 0.5, "the stand-in spun while it waited"
    assert [f.read_text() for f in files] == ["-1", "-1"]
    assert not list(tmp_path.glob("*.partial"))
    deadline = time.monotonic() + 10
    while alive(stand_in) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(stand_in), "the stand-in outlived its raylet"


def test_a_stand_in_in_a_pid_namespace_seen_through_the_hosts_proc_ends_with_its_raylet(
    tmp_path: Path,
) -> None:
    # `unshare --pid` without a /proc of its own: the shell's $$ is its pid inside the
    # namespace, and names another process in /proc. The namespace's first process, a
    # shell, outlives the raylet-like parent and adopts the stand-in, and waits for the
    # stand-in to close the output they share: one that never ended would time out.
    namespaces = (["unshare", "--pid", "--fork"], ["unshare", "-r", "--pid", "--fork"])
    usable = [
        n for n in namespaces if shutil.which(n[0]) and not subprocess.run([*n, "true"]).returncode
    ]
    if not usable:
        pytest.skip("no PID namespace for this user")
    init = ["sh", "-c", 'printf "%s\\n" "$("$@")"', "sh"]
    files = [tmp_path / "metrics_agent_port_x"]
    _, waited, _ = raylet_like(files, "self", [*usable[0], *init])
    assert waited, "the stand-in ended before its raylet"
    assert files[0].read_text() == "-1"


def test_a_stand_in_whose_raylet_dies_while_it_writes_its_files_ends(tmp_path: Path) -> None:
    # Its port file is held back (a FIFO that nobody reads yet) until its raylet has died
    # and been reaped: the stand-in, adopted meanwhile, must not take its new parent for
    # its raylet.
    port = tmp_path / "metrics_agent_port_x"
    os.mkfifo(f"{port}.partial")
    raylet = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time\n"
            "env = {**os.environ, 'RAY_RAYLET_PID': str(os.getpid())}\n"
            "child = subprocess.Popen(['/bin/sh', *sys.argv[1:]], env=env)\n"
            "print(child.pid, flush=True)\n"
            # Dies once the stand-in waits to open its port file, or after 10 s where the
            # kernel does not say what a process waits on.
            "deadline = time.monotonic() + 10\n"
            "wchan = f'/proc/{child.pid}/wchan'\n"
            "while open(wchan).read() != 'wait_for_partner' and time.monotonic() < deadline:\n"
            "    time.sleep(0.01)\n",
            str(STAND_IN),
            str(port),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert raylet.stdout is not None
    stand_in = int(raylet.stdout.readline())
    raylet.wait(timeout=30)
    held_back = Path(f"{port}.partial")
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(held_back.read_text()))
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # no writer came: a writer of our own lets the reader end
        os.close(os.open(held_back, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    assert read == ["-1"], "the stand-in never wrote its port file"
    deadline = time.monotonic() + 10
    while alive(stand_in) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(stand_in), "the stand-in waited on the process that adopted it"


def test_a_stand_in_whose_raylet_is_gone_before_it_looks_ends_at_once(tmp_path: Path) -> None:
    # Its parent is not the raylet named in its environment: that raylet has ended, and
    # the stand-in was adopted by the process now its parent.
    files = [tmp_path / "runtime_env_agent_port_x"]
    stand_in, _, _ = raylet_like(files, str(2**22 + 1))
    deadline = time.monotonic() + 10
    while alive(stand_in) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(stand_in)
    assert not files[0].exists()


def test_the_api_server_is_left_out_only_where_no_dashboard_module_would_wait_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This environment has Ray without the dashboard's dependencies, as evolve installs it.
    assert "start_api_server" in left_out()
    # With ray[default], the agent's modules wait for the API server: it must start.
    monkeypatch.setattr(lean_ray, "get_dashboard_dependency_error", lambda: None)
    assert left_out() == ("start_monitor", "start_log_monitor")
