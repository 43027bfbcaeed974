"""Attacks that a hostile candidate makes on the machine around it, run on both backends.

Each attack is a real program in a real sandbox: it snoops on other processes' environments
and working folders, starts daemons that escape its process group, attaches a debugger to its
parent, holds the output pipes open, and litters /tmp and /dev/shm. Each must be contained,
and what the candidate left behind must show in its result.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.plugin.sandbox import Limits, Sandbox
from evolve.sandboxes import DockerSandbox
from tests.conftest import open_backend, unique_sleep

GONE_WITHIN_S = 5.0
HOST_SECRET = "evolve-containment-secret-4be1"


@pytest.fixture(
    scope="module", params=["process", pytest.param("docker", marks=pytest.mark.docker)]
)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = open_backend(request.param)
    yield box
    box.close()


@pytest.fixture(scope="module")
def host_secret_holder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A host process of this user with a secret in its environment, as a Ray worker holds
    the driver's API keys, working in a folder of its own; candidates must see none of it."""
    holder = subprocess.Popen(
        ["sleep", "300"],
        env={**os.environ, "EVOLVE_FAKE_API_KEY": HOST_SECRET},
        cwd=tmp_path_factory.mktemp("holder-cwd"),
    )
    yield holder.pid
    holder.kill()
    holder.wait()


def marked_pids(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def gone(marker: str) -> bool:
    deadline = time.monotonic() + GONE_WITHIN_S
    while marked_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not marked_pids(marker)


def run(sandbox: Sandbox, script: str, **limits: float) -> tuple[str, bool, list[str]]:
    result = sandbox.run(["sh", "-c", script], files={}, limits=Limits(**limits))  # type: ignore[arg-type]
    said = (result.stdout + result.stderr).decode(errors="replace")
    return said, result.ok, result.left_behind


def test_no_environment_of_another_process_is_readable(
    sandbox: Sandbox, host_secret_holder: int
) -> None:
    said, _, _ = run(
        sandbox,
        f"env; cat /proc/{host_secret_holder}/environ; for f in /proc/*/environ; do "
        "cat $f; echo; done 2>&1",
    )
    assert HOST_SECRET not in said
    assert "EVOLVE_FAKE_API_KEY" not in said


def test_no_host_process_is_visible(sandbox: Sandbox, host_secret_holder: int) -> None:
    said, ok, _ = run(
        sandbox, "ls /proc | grep -c '^[0-9]'; ls -l /proc/*/cwd 2>&1; cat /proc/*/cmdline"
    )
    assert ok, said
    visible = int(said.split()[0])
    assert visible < 10, said  # the job, its shell, ls, grep and the supervisor: not the host
    assert "holder-cwd" not in said  # a host process's working folder
    assert f"/proc/{host_secret_holder}/" not in said or "No such file" in said


def test_a_setsid_daemon_is_named_and_killed(sandbox: Sandbox) -> None:
    marker = unique_sleep()
    said, ok, left = run(
        sandbox, f"setsid sleep {marker} > /dev/null 2>&1 < /dev/null & echo started"
    )
    assert "started" in said
    assert not ok and left, left
    assert gone(marker)


def test_a_double_fork_is_named_and_killed(sandbox: Sandbox) -> None:
    marker = unique_sleep()
    _, ok, left = run(sandbox, f"(sh -c 'sleep {marker} &' &) ; sleep 0.2")
    assert not ok and left
    assert gone(marker)


def test_held_open_pipes_do_not_hold_the_stage(sandbox: Sandbox) -> None:
    """The daemon keeps stdout and stderr: the stage still ends when its process does."""
    marker = unique_sleep()
    started = time.monotonic()
    said, ok, left = run(sandbox, f"setsid sleep {marker} & echo done", timeout_s=60)
    took = time.monotonic() - started
    assert "done" in said and not ok and left
    assert took < 30, f"the stage waited {took:.1f}s for a daemon holding its pipes"
    assert gone(marker)


def test_a_debugger_cannot_attach_to_the_parent(sandbox: Sandbox) -> None:
    attach = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "for pid in {os.getppid(), 1}:\n"
        "    r = libc.ptrace(16, pid, 0, 0)\n"  # PTRACE_ATTACH
        "    print(pid, r, ctypes.get_errno())\n"
    )
    result = sandbox.run(["python3", "-c", attach], files={}, limits=Limits())
    lines = result.stdout.decode().split("\n")
    assert result.exit_code == 0, result.stderr
    for line in filter(None, lines):
        _, returned, _ = line.split()
        assert returned == "-1", lines  # refused: the supervisor and init are not dumpable
    assert sandbox.run(["true"], files={}, limits=Limits()).ok  # and the sandbox still works


def test_a_job_cannot_stop_or_kill_its_supervisor(sandbox: Sandbox) -> None:
    """The job runs as its supervisor's uid: it tries every way to signal it (by pid, by its
    process group, every process it may signal) and to trace it, then outlives its limit.
    The stage must still end at its limit with what the job printed, and its own children
    stay its to signal. In Docker the job's parent is the supervisor itself, and every try
    is refused; under bubblewrap it is the init of the job's PID namespace, which signals
    from inside cannot stop, and the supervisor is out of the job's sight."""
    meddle = (
        "import ctypes, os, signal, subprocess, sys, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "parent = os.getppid()\n"
        "tries = [('kill', lambda: os.kill(parent, signal.SIGSTOP)),\n"
        "         ('kill -9', lambda: os.kill(parent, signal.SIGKILL)),\n"
        "         ('killpg', lambda: os.killpg(os.getpgid(parent), signal.SIGSTOP)),\n"
        "         ('kill -1', lambda: os.kill(-1, signal.SIGSTOP)),\n"
        "         ('signal 0', lambda: os.kill(parent, 0)),\n"
        "         ('pidfd', lambda: signal.pidfd_send_signal(os.pidfd_open(parent),\n"
        "             signal.SIGSTOP))]\n"
        "for name, call in tries:\n"
        "    try:\n"
        "        call()\n"
        "        print(name, 'reached the supervisor', flush=True)\n"
        "    except OSError as exc:\n"
        "        print(name, 'refused', exc.errno, flush=True)\n"
        "print('tgkill', libc.tgkill(parent, parent, signal.SIGSTOP), ctypes.get_errno())\n"
        "print('ptrace', libc.ptrace(16, parent, 0, 0), flush=True)\n"
        "child = subprocess.Popen(['sleep', '100'])\n"
        "child.send_signal(signal.SIGTERM)\n"
        "print('own child', child.wait(), flush=True)\n"
        "time.sleep(100)\n"
    )
    result = sandbox.run(["python3", "-c", meddle], files={}, limits=Limits(timeout_s=3))
    said = result.stdout.decode()
    assert result.timed_out, (said, result.stderr)
    assert "own child -15" in said, said  # its own processes are still its to signal
    assert "ptrace -1" in said, said
    if isinstance(sandbox, DockerSandbox):
        for name in ("kill", "kill -9", "killpg", "kill -1", "signal 0", "pidfd"):
            assert f"{name} refused 1" in said, said  # EPERM
        assert "tgkill -1 1" in said, said
    assert sandbox.run(["true"], files={}, limits=Limits()).ok


def test_tmp_and_shm_residue_stays_in_the_job(sandbox: Sandbox) -> None:
    name = f"evolve-residue-{uuid.uuid4().hex[:12]}"
    said, ok, _ = run(  # a container's /tmp is read-only: its work dir is the scratch space
        sandbox, f"(echo x > /tmp/{name}) 2>/dev/null; echo x > /dev/shm/{name} && echo wrote"
    )
    assert ok and "wrote" in said, said
    assert not Path("/dev/shm", name).exists() and not Path("/tmp", name).exists()
    said, _, _ = run(sandbox, f"ls /dev/shm /tmp; cat /dev/shm/{name} /tmp/{name}")
    assert "No such file" in said


def test_there_is_no_network(sandbox: Sandbox) -> None:
    probe = (
        "import socket\n"
        "s = socket.socket()\n"
        "s.settimeout(2)\n"
        "try:\n"
        "    s.connect(('8.8.8.8', 53)); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', e)\n"
    )
    result = sandbox.run(["python3", "-c", probe], files={}, limits=Limits())
    assert b"refused" in result.stdout, result.stdout + result.stderr


def test_host_files_are_read_only_and_home_is_hidden(sandbox: Sandbox) -> None:
    target = Path(__file__).resolve().parent / f"evolve-written-{uuid.uuid4().hex[:8]}"
    said, _, _ = run(sandbox, f"echo x > {target}; ls -A {Path.home()} | head -3")
    assert not target.exists()
    assert ".bashrc" not in said and ".profile" not in said


@pytest.mark.skipif(sys.platform != "linux", reason="linux namespaces")
def test_the_job_runs_in_its_own_pid_namespace(sandbox: Sandbox) -> None:
    said, ok, _ = run(sandbox, "readlink /proc/self/ns/pid")
    assert ok, said
    assert said.strip() != os.readlink("/proc/self/ns/pid")


def test_a_leftover_named_in_raw_bytes_is_still_named_and_killed(sandbox: Sandbox) -> None:
    """A process picks its own name (PR_SET_NAME), bytes that are not UTF-8 included."""
    marker = unique_sleep()
    rename = (
        "import ctypes, os, sys\n"
        "r, w = os.pipe()\n"
        "if os.fork() == 0:\n"
        "    ctypes.CDLL(None).prctl(15, b'\\xff\\xfe-evil', 0, 0, 0)\n"  # PR_SET_NAME
        "    os.write(w, b'x')\n"
        f"    os.execvp('sleep', ['sleep', '{marker}'])\n"
        "os.read(r, 1)\n"
    )
    result = sandbox.run(["python3", "-c", rename], files={}, limits=Limits())
    assert result.exit_code == 0 and not result.ok, result.stderr
    assert result.left_behind, result
    assert gone(marker)


def test_no_host_socket_is_reachable(sandbox: Sandbox) -> None:
    """Read-only binds do not stop connect(): the Docker and D-Bus sockets must not exist."""
    probe = (
        "import socket\n"
        "for path in ('/run/docker.sock', '/var/run/docker.sock', '/run/dbus/system_bus_socket'):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    try:\n"
        "        s.connect(path); print('reached', path)\n"
        "    except OSError as e:\n"
        "        print('refused', path, e.errno)\n"
    )
    result = sandbox.run([sandbox.python, "-c", probe], files={}, limits=Limits())
    said = result.stdout.decode()
    assert said.count("refused") == 3 and "reached" not in said, said + result.stderr.decode()


def test_no_host_setting_is_writable_and_no_root_secret_readable(sandbox: Sandbox) -> None:
    setting = "/proc/sys/kernel/printk_ratelimit_burst"
    said, _, _ = run(
        sandbox,
        f"v=$(cat {setting}); (echo $v > {setting}) 2>/dev/null && echo wrote-sysctl; "
        "cat /etc/shadow > /dev/null 2>&1 && echo read-shadow; echo checked",
    )
    assert "checked" in said
    assert "wrote-sysctl" not in said and "read-shadow" not in said, said


def test_a_tree_too_deep_to_walk_is_still_cleaned_up(sandbox: Sandbox) -> None:
    deep = (
        "import os\n"
        "print(os.getcwd(), flush=True)\n"
        "for _ in range(3000):\n"
        "    os.mkdir('d'); os.chdir('d')\n"
    )
    result = sandbox.run([sandbox.python, "-c", deep], files={}, limits=Limits())
    assert result.exit_code == 0, result.stderr
    workdir = result.stdout.decode().split()[0]
    assert not Path(workdir).exists() or isinstance(sandbox, DockerSandbox)
    assert sandbox.run(["true"], files={}, limits=Limits()).ok  # and the next job is fine


def test_scratch_space_is_capped(sandbox: Sandbox) -> None:
    """Many files each under the file-size cap must not fill the machine's memory."""
    fill = (
        "for i in $(seq 1 100); do head -c 1048576 /dev/zero > /dev/shm/f$i 2>/dev/null "
        "|| break; done; echo count=$(ls /dev/shm | wc -l)"
    )
    said, _, _ = run(sandbox, fill, max_file_bytes=1024**2)
    assert int(said.split("count=")[1].split()[0]) < 100, said  # a container's holds 64 MiB


KEYCTL_READ, KEY_SPEC_SESSION_KEYRING, KEYCTL_INVALIDATE = 11, -3, 21
SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl


def test_the_callers_session_keyring_is_not_the_jobs(sandbox: Sandbox) -> None:
    """Kernel keys are inherited through the session keyring, not the environment."""
    numbers = SYSCALLS.get(os.uname().machine)
    if numbers is None:
        pytest.skip("keyctl's syscall number is not known for this machine")
    add_key, keyctl = numbers
    libc = ctypes.CDLL(None, use_errno=True)
    payload = f"keyring-{HOST_SECRET}".encode()
    key = libc.syscall(add_key, b"user", b"evolve-test", payload, len(payload), -3)
    if key < 0:
        pytest.skip(f"no session keyring here (errno {ctypes.get_errno()})")
    probe = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "buf = ctypes.create_string_buffer(4096)\n"
        f"n = libc.syscall({keyctl}, {KEYCTL_READ}, {KEY_SPEC_SESSION_KEYRING}, buf, 4096)\n"
        "for at in range(0, max(n, 0), 4):\n"
        "    key = int.from_bytes(buf.raw[at:at + 4], 'little')\n"
        f"    got = libc.syscall({keyctl}, {KEYCTL_READ}, key, buf, 4096)\n"
        "    print(buf.raw[:max(got, 0)])\n"
        "print('looked')\n"
    )
    try:
        result = sandbox.run([sandbox.python, "-c", probe], files={}, limits=Limits())
    finally:
        libc.syscall(keyctl, KEYCTL_INVALIDATE, key)
    assert b"looked" in result.stdout, result.stderr
    assert HOST_SECRET.encode() not in result.stdout
