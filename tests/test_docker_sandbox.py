"""The Docker sandbox against a real engine: the process sandbox's misbehaving programs, plus
what a warm container adds (reuse, a clean slate per job, replacement when it dies)."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, suppress
from pathlib import Path

import docker
import pytest

from evolve.plugin.sandbox import Limits, RunResult, SandboxUnavailable, open_sandbox
from evolve.sandboxes import DockerSandbox, docker_available
from evolve.sandboxes.docker import LABEL, OWNER_HOST, OWNER_PID, reap_stale

AVAILABLE, WHY = docker_available()
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not AVAILABLE, reason=f"no Docker sandbox here: {WHY}"),
]

GENEROUS_S = 20.0  # "finished in reasonable time", never a timing assertion


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    """One sandbox for the module, as a worker keeps one: its container stays warm."""
    box = DockerSandbox()
    yield box
    box.close()


def test_exit_code_and_both_streams(sandbox: DockerSandbox) -> None:
    result = sandbox.run(["sh", "-c", "echo out; echo err >&2; exit 3"], files={}, limits=Limits())
    assert (result.exit_code, result.signal, result.ok) == (3, None, False)
    assert (result.stdout, result.stderr) == (b"out\n", b"err\n")
    assert not result.timed_out and not result.output_truncated
    assert result.peak_memory_bytes > 0


def test_files_go_in_and_collected_files_come_back(sandbox: DockerSandbox) -> None:
    files = {
        "data/in.txt": b"payload",
        "run.sh": b"#!/bin/sh\ncat data/in.txt > out.txt\nmkdir sub && echo deep > sub/x\n"
        b"echo named > stdout\n",
    }
    result = sandbox.run(
        ["./run.sh"], files=files, limits=Limits(), collect=["out.txt", "sub/x", "stdout", "nope"]
    )
    assert result.ok, result.stderr
    assert result.files == {"out.txt": b"payload", "sub/x": b"deep\n", "stdout": b"named\n"}


def test_a_compiled_binary_runs_in_the_work_dir(sandbox: DockerSandbox) -> None:
    source = b'#include <stdio.h>\nint main(void) { puts("compiled"); return 0; }\n'
    built = sandbox.run(
        ["gcc", "-O2", "hello.c", "-o", "hello"],
        files={"hello.c": source},
        limits=Limits(),
        collect=["hello"],
    )
    assert built.ok, built.stderr
    ran = sandbox.run(["./hello"], files={"hello": built.files["hello"]}, limits=Limits())
    assert (ran.ok, ran.stdout) == (True, b"compiled\n")


def test_collect_refuses_symlinks_out_of_the_work_dir(sandbox: DockerSandbox) -> None:
    result = sandbox.run(
        ["sh", "-c", "ln -s /etc/passwd leak; mkfifo pipe"],
        files={},
        limits=Limits(),
        collect=["leak", "pipe"],
    )
    assert result.ok and result.files == {}


@pytest.mark.parametrize("path", ["/etc/passwd", "../escape", ""])
def test_paths_outside_the_work_dir_are_refused(sandbox: DockerSandbox, path: str) -> None:
    with pytest.raises(ValueError, match="relative"):
        sandbox.run(["true"], files={path: b"x"}, limits=Limits())
    with pytest.raises(ValueError, match="relative"):
        sandbox.run(["true"], files={}, limits=Limits(), collect=[path])


def test_host_environment_does_not_leak(
    sandbox: DockerSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVOLVE_TEST_SECRET", "hunter2")
    result = sandbox.run(["env"], files={}, limits=Limits())
    assert result.ok
    assert b"hunter2" not in result.stdout and b"EVOLVE_TEST_SECRET" not in result.stdout
    assert b"PATH=/usr/local/bin:/usr/bin:/bin" in result.stdout


def test_no_network_no_root_and_a_read_only_root(sandbox: DockerSandbox) -> None:
    script = "id -u; ls /sys/class/net; touch /etc/x 2>/dev/null && echo wrote-root; true"
    result = sandbox.run(["sh", "-c", script], files={}, limits=Limits())
    assert result.ok and result.stdout == b"1000\nlo\n"


def test_a_missing_program_raises_as_in_the_process_sandbox(sandbox: DockerSandbox) -> None:
    with pytest.raises(FileNotFoundError):
        sandbox.run(["no-such-program"], files={}, limits=Limits())


def test_a_hang_is_killed_at_the_timeout(sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    result = sandbox.run(["sleep", "1000"], files={}, limits=Limits(timeout_s=1))
    assert result.timed_out and not result.ok
    assert result.signal == signal.SIGKILL
    assert time.monotonic() - started < GENEROUS_S


def test_a_busy_loop_dies_at_its_cpu_limit(sandbox: DockerSandbox) -> None:
    result = sandbox.run(
        ["sh", "-c", "while :; do :; done"], files={}, limits=Limits(timeout_s=60, cpu_s=1)
    )
    assert result.timed_out and result.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_an_output_flood_is_capped_drained_and_harmless(sandbox: DockerSandbox) -> None:
    cap = 64 * 1024
    result = sandbox.run(
        ["sh", "-c", "yes | head -c 100000000; echo done >&2"],
        files={},
        limits=Limits(max_output_bytes=cap, timeout_s=60),
    )
    assert result.ok and result.output_truncated
    assert len(result.stdout) == cap and result.stderr == b"done\n"


def test_a_memory_hog_fails(sandbox: DockerSandbox) -> None:
    hog = "x = bytearray(2 * 1024**3); print('allocated')"
    result = sandbox.run(
        ["python3", "-c", hog], files={}, limits=Limits(memory_bytes=256 * 1024**2)
    )
    assert not result.ok
    assert b"allocated" not in result.stdout


def test_processes_that_share_a_memory_bomb_meet_the_cgroup(sandbox: DockerSandbox) -> None:
    """Each stays under RLIMIT_AS; together they pass the container's memory limit."""
    fill = "import time; x = bytearray(200 << 20); x[::4096] = bytes(len(x) >> 12); time.sleep(1)"
    one = f"(python3 -c '{fill}'; echo $?) & "
    limits = Limits(memory_bytes=256 * 1024**2)
    result = sandbox.run(["sh", "-c", one * 3 + "wait"], files={}, limits=limits)
    assert b"137" in result.stdout.split()  # SIGKILL from the OOM killer
    assert sandbox.run(["true"], files={}, limits=limits).ok  # the container survived
    assert result.oom_kills >= 1  # the cgroup counted them; the job itself exited 0
    assert result.ok and result.limit is None


def test_an_out_of_memory_kill_names_the_memory_limit(sandbox: DockerSandbox) -> None:
    """Past the container's memory (the address space left unlimited, as for a sanitized
    binary), the out-of-memory killer ends the job: the supervisor sees the cgroup count the
    kill, and the job's end names the limit and its key, not a bare signal 9. A job whose
    child was killed so, and that fails for it, says so too."""
    hog = "x = bytearray(400 << 20); x[::4096] = bytes(len(x) >> 12)"
    limits = Limits(memory_bytes=64 * 1024**2, address_space_bytes=0)
    killed = sandbox.run(["python3", "-c", hog], files={}, limits=limits)
    assert killed.signal == signal.SIGKILL and killed.limit == "memory_bytes"
    assert killed.describe() == (
        "was killed by the out-of-memory killer at its memory limit of 64 MB (sandbox.memory_mb)"
    )
    parent = sandbox.run(["sh", "-c", f"python3 -c '{hog}'; exit 3"], files={}, limits=limits)
    assert parent.exit_code == 3 and parent.oom_kills == 1
    assert parent.describe() == (
        "exited with code 3; the out-of-memory killer killed 1 of its processes at its memory "
        "limit of 64 MB (sandbox.memory_mb)"
    )


def test_filling_the_work_dir_ends_in_enospc_not_a_full_host_disk() -> None:
    with closing(DockerSandbox(work_bytes=16 * 1024**2)) as box:
        fill = "for i in 1 2 3; do head -c 10000000 /dev/zero > f$i || exit 1; done"
        result = box.run(["sh", "-c", fill], files={}, limits=Limits())
    assert result.exit_code == 1 and b"No space left on device" in result.stderr


def test_a_fork_bomb_hits_the_pids_limit(sandbox: DockerSandbox) -> None:
    bomb = "for i in $(seq 200); do sleep 30 & done 2>/dev/null; wait"
    started = time.monotonic()
    result = sandbox.run(["sh", "-c", bomb], files={}, limits=Limits(timeout_s=5))
    assert not result.ok
    assert time.monotonic() - started < GENEROUS_S
    assert sandbox.run(["true"], files={}, limits=Limits()).ok  # the container survived


def test_a_huge_file_hits_the_file_size_limit(sandbox: DockerSandbox) -> None:
    limits = Limits(max_file_bytes=1024**2)
    result = sandbox.run(["sh", "-c", "head -c 10000000 /dev/zero > big"], files={}, limits=limits)
    assert not result.ok


def test_a_crash_reports_its_signal(sandbox: DockerSandbox) -> None:
    result = sandbox.run(["sh", "-c", "kill -SEGV $$"], files={}, limits=Limits())
    assert result.exit_code is None and result.signal == signal.SIGSEGV
    assert "signal 11" in result.describe()


def test_the_container_is_reused_across_runs(sandbox: DockerSandbox) -> None:
    sandbox.run(["true"], files={}, limits=Limits())
    first = sandbox.container_id
    for _ in range(3):
        assert sandbox.run(["true"], files={}, limits=Limits()).ok
    assert first is not None and sandbox.container_id == first


def test_each_job_starts_from_a_clean_slate(sandbox: DockerSandbox) -> None:
    """Nothing a job leaves (files, locked dirs, escaped processes) reaches the next job."""
    litter = (
        "echo x > here; mkdir -p locked/deep && echo x > locked/deep/f && chmod 000 locked; "
        "echo x > /work/stash; echo x > /dev/shm/stash; chmod 000 /work; "
        "setsid sleep 1000 > /dev/null 2>&1 &"
    )
    littered = sandbox.run(["sh", "-c", litter], files={}, limits=Limits())
    assert littered.exit_code == 0 and not littered.ok
    assert littered.left_behind  # the setsid escapee (named sleep or setsid, as it stood)
    look = "ls -A /work /dev/shm .; pgrep -c -u sandbox -x sleep"
    result = sandbox.run(["sh", "-c", look], files={}, limits=Limits())
    listing = result.stdout.decode().split()
    assert "stash" not in listing and "here" not in listing and "locked" not in listing
    assert listing[-1] == "0", result.stdout  # the setsid escapee died with its job


def test_a_job_cannot_reach_into_its_supervisor(sandbox: DockerSandbox) -> None:
    result = sandbox.run(["sh", "-c", "ls /proc/$PPID/fd"], files={}, limits=Limits())
    assert not result.ok and b"Permission denied" in result.stderr


def server_pid(sandbox: DockerSandbox) -> bytes:
    """The pid of the container's server, which is every job's parent."""
    result = sandbox.run(["sh", "-c", "echo $PPID"], files={}, limits=Limits())
    assert result.ok, result.stderr
    return result.stdout


def test_many_jobs_share_one_server(sandbox: DockerSandbox) -> None:
    """The server survives its own after-job `kill(-1, SIGKILL)`: the kernel spares the caller."""
    container = sandbox.container_id
    servers = {server_pid(sandbox) for _ in range(50)}
    assert len(servers) == 1 and sandbox.container_id == container


def test_a_jobs_signals_cannot_reach_the_server(sandbox: DockerSandbox) -> None:
    before, container = server_pid(sandbox), sandbox.container_id
    result = sandbox.run(
        ["sh", "-c", "kill -9 -1; kill -STOP $PPID; echo $?"], files={}, limits=Limits()
    )
    assert result.ok and result.stdout == b"1\n", result.stderr  # each refused: EPERM
    assert server_pid(sandbox) == before and sandbox.container_id == container


def meddled_during_a_job(
    sandbox: DockerSandbox, script: str, meddling: list[str], limits: Limits
) -> RunResult:
    """The job's result after `meddling` ran in its container, as uid 1000, once the job's
    `sleep` started: what only something beside the job could do to its server."""
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(sandbox.run, ["sh", "-c", script], files={}, limits=limits)
        container, waited = None, time.monotonic()
        while time.monotonic() - waited < 60:
            container = container or sandbox.container_id
            if container and docker.from_env().containers.get(container).exec_run(
                ["pgrep", "-x", "sleep"], user="1000"
            ).exit_code == 0:
                break
            time.sleep(0.05)
        docker.from_env().containers.get(container).exec_run(meddling, user="1000")
        return running.result()


def test_a_server_killed_under_a_job_fails_it_and_the_next_gets_a_new_server(
    sandbox: DockerSandbox,
) -> None:
    before, container = server_pid(sandbox), sandbox.container_id
    result = meddled_during_a_job(sandbox, "sleep 30", ["kill", "-9", "-1"], Limits())
    assert not result.ok and "supervisor died" in result.stderr.decode()
    assert server_pid(sandbox) != before and sandbox.container_id == container


def test_a_job_that_outlives_its_killed_server_loses_the_container(
    sandbox: DockerSandbox,
) -> None:
    """A survivor could tamper with the next server as it starts, before it locks itself."""
    server = server_pid(sandbox).decode().strip()
    container = sandbox.container_id
    escape = "setsid sleep 1000 > /dev/null 2>&1 & sleep 30"
    result = meddled_during_a_job(sandbox, escape, ["kill", "-9", server], Limits())
    assert not result.ok and "replaced" in result.stderr.decode()
    look = sandbox.run(["sh", "-c", "pgrep -c -u sandbox -x sleep"], files={}, limits=Limits())
    assert look.stdout == b"0\n" and sandbox.container_id != container


def test_a_server_killed_between_jobs_is_replaced_unnoticed(sandbox: DockerSandbox) -> None:
    before, container = server_pid(sandbox), sandbox.container_id
    docker.from_env().containers.get(container).exec_run(["kill", "-9", "-1"], user="1000")
    assert server_pid(sandbox) != before and sandbox.container_id == container


def test_a_container_killed_from_outside_is_replaced(sandbox: DockerSandbox) -> None:
    sandbox.run(["true"], files={}, limits=Limits())
    before = sandbox.container_id
    docker.from_env().containers.get(before).kill()
    result = sandbox.run(["echo", "back"], files={}, limits=Limits())
    assert result.ok and result.stdout == b"back\n"
    assert sandbox.container_id not in (None, before)


def test_a_stopped_supervisor_meets_the_host_deadline() -> None:
    """If the in-container supervisor cannot kill the job, the host kills the container."""
    with closing(DockerSandbox(grace_s=1)) as box:
        server = server_pid(box).decode().strip()
        meddling = ["kill", "-STOP", server]
        result = meddled_during_a_job(box, "sleep 1000", meddling, Limits(timeout_s=5))
        assert result.timed_out and "container was killed" in result.stderr.decode()
        assert box.container_id is None
        assert box.run(["true"], files={}, limits=Limits()).ok


def test_other_limits_get_a_container_of_their_own(sandbox: DockerSandbox) -> None:
    sandbox.run(["true"], files={}, limits=Limits())
    before = sandbox.container_id
    assert sandbox.run(["true"], files={}, limits=Limits(max_processes=32)).ok
    assert sandbox.container_id != before


def test_an_unreachable_daemon_raises_sandbox_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable, match="unreachable"):
        DockerSandbox().run(["true"], files={}, limits=Limits())
    ok, why = docker_available()
    assert not ok and "unreachable" in why
    with pytest.raises(SandboxUnavailable):
        open_sandbox("docker")


class EngineLink:
    """A unix socket relaying to the real engine, which a test can cut and restore: an engine
    outage and its return, without stopping the daemon that other tests share."""

    def __init__(self, path: Path, engine: str) -> None:
        self.path, self.engine = path, engine
        self.sockets: list[socket.socket] = []

    def up(self) -> None:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(self.path))
        listener.listen()
        self.sockets = [listener]
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        for sock in self.sockets:  # shutdown wakes the threads blocked on them; close does not
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.path.unlink()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX)
            engine.connect(self.engine)
            self.sockets += [client, engine]
            for source, sink in ((client, engine), (engine, client)):
                threading.Thread(target=_relay, args=(source, sink), daemon=True).start()


def _relay(source: socket.socket, sink: socket.socket) -> None:
    with suppress(OSError):
        while data := source.recv(64 * 1024):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)  # pass the exec's half-close on


@pytest.fixture
def engine_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EngineLink]:
    engine = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not engine.startswith("unix://"):
        pytest.skip(f"relaying needs a unix-socket engine, not {engine}")
    link = EngineLink(tmp_path / "engine.sock", engine.removeprefix("unix://"))
    link.up()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{link.path}")
    yield link


def test_an_engine_outage_raises_and_the_next_run_recovers(engine_link: EngineLink) -> None:
    with closing(DockerSandbox()) as box:
        assert box.run(["true"], files={}, limits=Limits()).ok
        engine_link.down()
        with pytest.raises(SandboxUnavailable, match="unreachable"):
            box.run(["true"], files={}, limits=Limits())
        engine_link.up()
        assert box.run(["echo", "back"], files={}, limits=Limits()).stdout == b"back\n"


def test_an_outage_mid_job_retires_the_container_the_job_ran_in(engine_link: EngineLink) -> None:
    engine = docker.DockerClient(base_url=f"unix://{engine_link.engine}")  # not the link
    with closing(engine):
        with closing(DockerSandbox()) as box, ThreadPoolExecutor(1) as pool:
            running = pool.submit(box.run, ["sleep", "10"], files={}, limits=Limits())
            deadline = time.monotonic() + GENEROUS_S
            while not _running_in(engine, box.container_id, "sleep 10"):
                assert time.monotonic() < deadline, "the job never started"
                time.sleep(0.05)
            during = box.container_id
            engine_link.down()
            with pytest.raises(SandboxUnavailable):
                running.result(timeout=GENEROUS_S)
            engine_link.up()
            assert box.run(["true"], files={}, limits=Limits()).ok
            assert box.container_id not in (None, during)
        with pytest.raises(docker.errors.NotFound):
            engine.containers.get(during)


def _running_in(engine: docker.DockerClient, container_id: str | None, command: str) -> bool:
    if container_id is None:
        return False
    try:
        rows = engine.api.top(container_id)["Processes"] or []
    except docker.errors.APIError:  # created, not started yet
        return False
    return any(command in " ".join(row) for row in rows)


def test_a_missing_image_names_the_fix() -> None:
    with pytest.raises(SandboxUnavailable, match="evolve-sandbox:absent is missing: build it"):
        DockerSandbox("evolve-sandbox:absent").run(["true"], files={}, limits=Limits())


@pytest.mark.skipif(
    shutil.which("nvidia-container-cli") is not None, reason="this host can pass GPUs in"
)
def test_asking_for_gpus_without_the_nvidia_toolkit_names_the_fix() -> None:
    box = DockerSandbox(gpus=True)
    with pytest.raises(SandboxUnavailable, match="install the NVIDIA container toolkit"):
        box.run(["true"], files={}, limits=Limits())
    box.close()


def test_containers_of_dead_owners_are_reaped() -> None:
    client = docker.from_env()
    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = {LABEL: "1", OWNER_PID: str(dead.pid), OWNER_HOST: socket.gethostname()}
    orphan = client.containers.create(DockerSandbox().image, ["true"], labels=labels)
    assert reap_stale(client) >= 1
    with pytest.raises(docker.errors.NotFound):
        orphan.reload()


def test_open_sandbox_gives_docker() -> None:
    box = open_sandbox("docker")
    assert isinstance(box, DockerSandbox)
    box.close()


# A job's own view of what it inherits from the server: limits, priorities, CPUs, scheduling.
INHERITED = b"""
import os, resource, subprocess
print(len(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(0)))
print([resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n[:7] == "RLIMIT_"])
print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), os.sched_getparam(0))
print(subprocess.run(["ionice"], capture_output=True, check=True).stdout)
"""


def inherited(sandbox: DockerSandbox) -> bytes:
    result = sandbox.run(["python3", "look.py"], files={"look.py": INHERITED}, limits=Limits())
    assert result.ok, result.stderr
    return result.stdout


# Each reaches the server (every job's parent) from a job of its uid, which the kernel allows.
TAMPERING = {
    "RLIMIT_NOFILE": "resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (48, 48))",
    "RLIMIT_DATA": "resource.prlimit(os.getppid(), resource.RLIMIT_DATA, (300 << 20, 300 << 20))",
    "nice": "os.setpriority(os.PRIO_PROCESS, os.getppid(), 19)",
    "CPU affinity": "os.sched_setaffinity(os.getppid(), {0})",
    "scheduler": "os.sched_setscheduler(os.getppid(), os.SCHED_IDLE, os.sched_param(0))",
    "io priority": "os.system(f'ionice -c 3 -p {os.getppid()}')",
}


@pytest.mark.parametrize("what", TAMPERING)
def test_a_job_that_changes_what_its_server_passes_on_fails_and_the_next_gets_a_new_server(
    sandbox: DockerSandbox, what: str
) -> None:
    """The job's later siblings would inherit the change, and a lowered hard limit cannot be
    raised again: the server stops instead, and the job that did it is told why."""
    before, server, container = inherited(sandbox), server_pid(sandbox), sandbox.container_id
    if what == "CPU affinity" and before.startswith(b"1 "):
        pytest.skip("the container sees one CPU: there is no affinity to narrow")
    if what == "io priority" and platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the server reads its I/O priority on x86_64 and aarch64 only")
    tamper = f"import os, resource; {TAMPERING[what]}"
    result = sandbox.run(["python3", "-c", tamper], files={}, limits=Limits())
    said = result.stderr.decode()
    assert not result.ok and "changed the sandbox server's own" in said and what in said, said
    assert inherited(sandbox) == before
    assert server_pid(sandbox) != server and sandbox.container_id == container


def test_after_a_server_was_tampered_with_an_innocent_job_gets_its_memory(
    sandbox: DockerSandbox,
) -> None:
    """The reviewed attack: the job after it could not allocate 400 MB, nor open 48 files."""
    tamper = "; ".join(TAMPERING[what] for what in ("RLIMIT_NOFILE", "RLIMIT_DATA", "nice"))
    sandbox.run(["python3", "-c", f"import os, resource; {tamper}"], files={}, limits=Limits())
    innocent = "x = bytearray(400 << 20); files = [open('/dev/null') for _ in range(100)]"
    assert sandbox.run(["python3", "-c", innocent], files={}, limits=Limits()).ok


PLANT_IPC = b"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
CREATE = 0o1000 | 0o600  # IPC_CREAT, readable by the uid only
segment = libc.shmget(0x5EC, ctypes.c_size_t(4096), CREATE)
address = libc.shmat(segment, None, 0)
ctypes.memmove(address, b"secret", 6)
libc.shmdt(ctypes.c_void_p(address))
assert min(libc.semget(0x5EC, 1, CREATE), libc.msgget(0x5EC, CREATE)) >= 0
assert libc.mq_open(b"/leak", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
"""
IPC_LISTING = "tail -qn +2 /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg; ls -A /dev/mqueue"


def test_ipc_objects_a_job_leaves_are_gone_for_the_next(sandbox: DockerSandbox) -> None:
    """SysV shared memory, semaphores and message queues and POSIX message queues outlive the
    processes that made them, like files: the scrub removes them too."""
    plant = f"python3 plant.py && {IPC_LISTING}"
    planted = sandbox.run(["sh", "-c", plant], files={"plant.py": PLANT_IPC}, limits=Limits())
    assert planted.ok, planted.stderr
    assert len(planted.stdout.splitlines()) == 4 and planted.stdout.endswith(b"leak\n")
    look = sandbox.run(["sh", "-c", IPC_LISTING], files={}, limits=Limits())
    assert look.ok and look.stdout == b"", look.stdout
