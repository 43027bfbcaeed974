"""The process sandbox against real misbehaving programs: floods, hangs, bombs and crashes."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from evolve.sandbox import Limits
from sandboxes import ProcessSandbox, open_sandbox

GENEROUS_S = 20.0  # "finished in reasonable time", never a timing assertion


@pytest.fixture
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie nobody reaped (no init in a container) counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def wait_dead(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


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


def test_a_busy_loop_dies_at_its_cpu_limit(sandbox: ProcessSandbox) -> None:
    started = time.monotonic()
    result = sandbox.run(
        ["sh", "-c", "while :; do :; done"], files={}, limits=Limits(timeout_s=60, cpu_s=1)
    )
    assert result.timed_out and result.signal in (signal.SIGXCPU, signal.SIGKILL)
    assert time.monotonic() - started < GENEROUS_S


def test_the_whole_group_dies_at_the_timeout(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(
        ["sh", "-c", "sleep 1000 & echo $! > pid; wait"],
        files={},
        limits=Limits(timeout_s=1),
        collect=["pid"],
    )
    assert result.timed_out
    assert wait_dead(int(result.files["pid"]))


def test_background_stragglers_die_when_the_child_exits(sandbox: ProcessSandbox) -> None:
    started = time.monotonic()
    result = sandbox.run(
        ["sh", "-c", "sleep 1000 & echo $! > pid"],
        files={},
        limits=Limits(timeout_s=60),
        collect=["pid"],
    )
    assert result.ok and not result.timed_out
    assert time.monotonic() - started < GENEROUS_S
    assert wait_dead(int(result.files["pid"]))


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
        [sys.executable, "-c", hog], files={}, limits=Limits(memory_bytes=256 * 1024**2)
    )
    assert not result.ok
    assert b"allocated" not in result.stdout


def test_a_crash_reports_its_signal(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(["sh", "-c", "kill -SEGV $$"], files={}, limits=Limits())
    assert result.exit_code is None and result.signal == signal.SIGSEGV
    assert "signal 11" in result.describe()


def test_the_work_dir_is_removed_afterwards(sandbox: ProcessSandbox) -> None:
    result = sandbox.run(["pwd"], files={}, limits=Limits())
    workdir = result.stdout.decode().strip()
    assert workdir and not os.path.exists(workdir)


def test_open_sandbox_warns_that_process_is_not_isolated(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="evolve.sandbox"):
        sandbox = open_sandbox("process")
    assert isinstance(sandbox, ProcessSandbox)
    assert "does not isolate" in caplog.text


def test_open_sandbox_names_the_known_backends() -> None:
    with pytest.raises(ValueError, match="known: docker, process"):
        open_sandbox("vm")
