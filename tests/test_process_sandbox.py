"""The process sandbox against real misbehaving programs: floods, hangs, bombs and crashes."""

from __future__ import annotations

import gc
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evolve.plugin.sandbox import Limits, open_sandbox
from evolve.sandboxes import namespace_init
from evolve.sandboxes.isolation import UNISOLATED, detect
from evolve.sandboxes.process import ProcessSandbox, remove_tree
from tests.conftest import unique_sleep

GENEROUS_S = 20.0  # "finished in reasonable time", never a timing assertion


@pytest.fixture(params=["isolated", "unisolated"])
def sandbox(request: pytest.FixtureRequest) -> ProcessSandbox:
    """Both modes: in namespaces (bubblewrap), and as plain processes when a task insists."""
    if request.param == "unisolated":
        return ProcessSandbox(UNISOLATED)
    if detect().tool is None:
        if os.environ.get("EVOLVE_REQUIRE_DOCKER"):  # CI installs bubblewrap too
            pytest.fail(f"the process sandbox cannot isolate here: {detect().detail}")
        pytest.skip(detect().detail)
    return ProcessSandbox()


def host_pids(marker: str) -> list[int]:
    """Host pids of live processes whose command line holds `marker`: a pid that a job
    reports is its own namespace's, which means nothing out here."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return [pid for pid in found if alive(pid)]


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie nobody reaped (no init in a container) counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_exit_code_and_both_streams(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(["sh", "-c", "echo out; echo err >&2; exit 3"], files={}, limits=Limits())
    assert (result.exit_code, result.signal, result.ok) == (3, None, False)
    assert (result.stdout, result.stderr) == (b"out\n", b"err\n")
    assert not result.timed_out and not result.output_truncated
    assert result.peak_memory_bytes > 0


def test_files_go_in_and_collected_files_come_back(sandbox: ProcessSandbox) -> None:
    files = {
        "data/in.txt": b"payload",
        "run.sh": b"#!/bin/sh\ncat data/in.txt > out.txt\nmkdir sub && echo deep > sub/x\n",
    }
    result = sandbox.run(
        ["./run.sh"], files=files, limits=Limits(), collect=["out.txt", "sub/x", "missing.txt"]
    )
    assert result.ok, result.stderr
    assert result.files == {"out.txt": b"payload", "sub/x": b"deep\n"}


def test_collect_refuses_symlinks_out_of_the_work_dir(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(
        ["sh", "-c", "ln -s /etc/passwd leak; mkfifo pipe"],
        files={},
        limits=Limits(),
        collect=["leak", "pipe"],
    )
    assert result.ok and result.files == {}


@pytest.mark.parametrize("path", ["/etc/passwd", "../escape", "a/../../b", ""])
def test_paths_outside_the_work_dir_are_refused(sandbox: ProcessSandbox, path: str) -> None:
    with pytest.raises(ValueError, match="relative"):
        sandbox.run(["true"], files={path: b"x"}, limits=Limits())
    with pytest.raises(ValueError, match="relative"):
        sandbox.run(["true"], files={}, limits=Limits(), collect=[path])


def test_host_environment_does_not_leak(
    sandbox: ProcessSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVOLVE_TEST_SECRET", "hunter2")
    result = sandbox.run(["env"], files={}, limits=Limits())
    assert result.ok
    assert b"hunter2" not in result.stdout and b"EVOLVE_TEST_SECRET" not in result.stdout
    assert b"PATH=/usr/local/bin:/usr/bin:/bin" in result.stdout


def test_a_hang_is_killed_at_the_timeout(sandbox: ProcessSandbox) -> None:
    started = time.monotonic()
    result = sandbox.run(["sleep", "1000"], files={}, limits=Limits(timeout_s=1))
    assert result.timed_out and not result.ok
    assert result.signal == signal.SIGKILL
    assert time.monotonic() - started < GENEROUS_S
    assert result.limit == "timeout_s"
    assert result.describe().startswith(
        "ran past its time limit of 1 s (sandbox.timeout_s) and was killed after "
    )


def test_a_busy_loop_dies_at_its_cpu_limit(sandbox: ProcessSandbox) -> None:
    started = time.monotonic()
    result = sandbox.run(
        ["sh", "-c", "while :; do :; done"], files={}, limits=Limits(timeout_s=60, cpu_s=1)
    )
    assert result.timed_out and result.signal in (signal.SIGXCPU, signal.SIGKILL)
    assert time.monotonic() - started < GENEROUS_S
    assert result.limit == "cpu_s"
    assert result.describe().startswith("used up its CPU time limit of 1 s and was killed")


def test_a_job_that_ignores_sigxcpu_dies_at_the_hard_cpu_limit_and_says_so(
    sandbox: ProcessSandbox,
) -> None:
    """SIGKILL a second past the soft limit, which only the CPU limit sends unasked for: the
    job reads as timed out at that limit, not as killed by some signal 9."""
    spin = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"
    result = sandbox.run(
        [sandbox.python, "-c", spin], files={}, limits=Limits(timeout_s=60, cpu_s=1)
    )
    assert result.signal == signal.SIGKILL and result.cpu_s >= 2
    assert result.timed_out and result.limit == "cpu_s"
    assert "used up its CPU time limit of 1 s" in result.describe()


def test_the_whole_group_dies_at_the_timeout(sandbox: ProcessSandbox) -> None:
    marker = unique_sleep()  # no other run's sleep on the host matches it
    script = f"sleep {marker} & wait"
    result = sandbox.run(["sh", "-c", script], files={}, limits=Limits(timeout_s=1))
    assert result.timed_out
    assert wait_gone(marker)


def test_background_stragglers_die_and_fail_the_job(sandbox: ProcessSandbox) -> None:
    started = time.monotonic()
    marker = unique_sleep()
    result = sandbox.run(["sh", "-c", f"sleep {marker} &"], files={}, limits=Limits(timeout_s=60))
    assert result.exit_code == 0 and not result.timed_out and not result.ok
    assert result.left_behind
    assert "left processes behind" in result.describe()
    assert time.monotonic() - started < GENEROUS_S
    assert wait_gone(marker)


def wait_gone(marker: str, within_s: float = 15.0) -> bool:
    deadline = time.monotonic() + within_s
    while host_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not host_pids(marker)


def test_an_output_flood_is_capped_drained_and_harmless(sandbox: ProcessSandbox) -> None:
    cap = 64 * 1024
    result = sandbox.run(
        ["sh", "-c", "yes | head -c 100000000; echo done >&2"],
        files={},
        limits=Limits(max_output_bytes=cap, timeout_s=60),
    )
    assert result.ok and not result.timed_out
    assert result.output_truncated
    assert len(result.stdout) == cap and result.stderr == b"done\n"


def test_a_memory_hog_fails(sandbox: ProcessSandbox) -> None:
    hog = "x = bytearray(2 * 1024**3); print('allocated')"
    result = sandbox.run(
        [sandbox.python, "-c", hog], files={}, limits=Limits(memory_bytes=256 * 1024**2)
    )
    assert not result.ok
    assert b"allocated" not in result.stdout
    assert result.describe() == (
        "exited with code 1; its output shows it ran into its memory limit of 256 MB "
        "(sandbox.memory_mb)"
    )


def test_a_write_past_the_file_size_limit_names_the_limit(sandbox: ProcessSandbox) -> None:
    """A C program dies of SIGXFSZ, which only the limit sends; Python ignores the signal,
    and its write fails with EFBIG, which its traceback shows."""
    limits = Limits(max_file_bytes=1024**2)
    killed = sandbox.run(
        ["sh", "-c", "exec head -c 2000000 /dev/zero > big"], files={}, limits=limits
    )
    assert killed.signal == signal.SIGXFSZ and killed.limit == "max_file_bytes"
    assert killed.describe() == (
        "was killed by signal 25 (SIGXFSZ) for writing a file past its file size limit of 1 MB "
        "per file (sandbox.max_file_mb)"
    )
    writer = "open('big', 'wb').write(bytes(2000000))"
    refused = sandbox.run([sandbox.python, "-c", writer], files={}, limits=limits)
    assert b"File too large" in refused.stderr and refused.limit is None
    assert refused.describe() == (
        "exited with code 1; its output shows it ran into its file size limit of 1 MB per "
        "file (sandbox.max_file_mb)"
    )


@pytest.mark.system
def test_forks_past_the_process_limit_name_the_limit() -> None:
    """Isolated only: bubblewrap runs the job as a uid of its own (nobody, under root), which
    RLIMIT_NPROC binds; a plain process of root it does not."""
    if detect().tool is None:
        pytest.skip(detect().detail)
    forks = "import os, time\nfor _ in range(20):\n    if os.fork() == 0:\n        time.sleep(5)\n"
    sandbox = ProcessSandbox()
    result = sandbox.run(
        [sandbox.python, "-c", forks], files={}, limits=Limits(max_processes=8, timeout_s=30)
    )
    assert b"Resource temporarily unavailable" in result.stderr
    assert result.describe().startswith(
        "exited with code 1; its output shows it ran into its limit of 8 processes and "
        "threads (sandbox.max_processes)"
    )


def test_a_crash_reports_its_signal(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(["sh", "-c", "kill -SEGV $$"], files={}, limits=Limits())
    assert result.exit_code is None and result.signal == signal.SIGSEGV
    assert result.describe() == "killed by signal 11 (Segmentation fault)"


def test_a_kill_no_limit_sent_is_not_put_down_to_one(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(["sh", "-c", "kill -KILL $$"], files={}, limits=Limits())
    assert result.signal == signal.SIGKILL and result.limit is None and not result.timed_out
    assert result.describe() == (
        "killed by signal 9 (Killed) from outside the sandbox's limits: by a process of the "
        "job, or by the system running out of memory"
    )


def test_the_work_dir_is_removed_afterwards(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(["pwd"], files={}, limits=Limits())
    workdir = result.stdout.decode().strip()
    assert workdir and not os.path.exists(workdir)


def test_an_unisolated_process_sandbox_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="evolve.plugin.sandbox"):
        ProcessSandbox(UNISOLATED)
    assert "NOT isolated" in caplog.text or "no isolation" in caplog.text


def test_open_sandbox_names_the_known_backends() -> None:
    with pytest.raises(ValueError, match="installed: docker, process"):
        open_sandbox("vm")


def test_the_namespace_init_refuses_to_run_outside_a_namespace(tmp_path: Path) -> None:
    """Its sweep is kill(-1): outside a fresh PID namespace that would reach the whole host."""
    marker = tmp_path / "ran"
    init = Path(namespace_init.__file__)
    read_end, write_end = os.pipe()
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(init), str(write_end), "--", "touch", str(marker)],
        pass_fds=(write_end,),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    os.close(write_end)
    os.close(read_end)
    assert done.returncode != 0 and "only as pid 1" in done.stderr
    assert not marker.exists()


def test_no_collection_runs_while_a_work_dir_is_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree deep enough to exhaust the recursive walk must not leave other objects'
    finalizers to a collection at the bottom of it, with no stack left: the collector waits
    for the walk, and is back on after it."""
    seen: list[bool] = []
    walk = shutil.rmtree

    def watched(path: Path) -> None:
        seen.append(gc.isenabled())
        walk(path)

    monkeypatch.setattr(shutil, "rmtree", watched)
    (tmp_path / "work" / "d").mkdir(parents=True)
    remove_tree(tmp_path / "work")
    assert seen == [False] and gc.isenabled()
    assert not (tmp_path / "work").exists()
