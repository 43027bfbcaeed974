"""The seccomp filter every job runs under keeps its signals off its supervisor, whichever
thread of the supervisor they aim at and however they are sent, while the job's own
processes stay its to signal. The supervisor here is this test's own process, with a
second thread running, as a sandbox server's is once its warm import starts a thread pool
(OpenBLAS's, say)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.plugin.sandbox import Limits
from evolve.sandboxes.supervise import NATIVE_ABI, supervise

pytestmark = pytest.mark.skipif(NATIVE_ABI is None, reason="a machine the filter does not know")

# Signal 0 delivers nothing: it only asks whether the signal would be allowed.
MEDDLE = """
import ctypes, fcntl, os, signal, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
parent = os.getppid()
threads = sorted(int(t) for t in os.listdir(f"/proc/{parent}/task"))
print("threads", len(threads), flush=True)
def tried(name, call):
    try:
        call()
        print(name, "allowed", flush=True)
    except OSError as exc:
        print(name, "refused", exc.errno, flush=True)
def tgkill(tid):
    if libc.tgkill(parent, tid, 0) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")
for tid in threads:
    tried(f"kill thread {tid == parent}", lambda: os.kill(tid, 0))
    tried(f"tgkill thread {tid == parent}", lambda: tgkill(tid))
reader, writer = os.pipe()
tried("F_SETOWN", lambda: fcntl.fcntl(reader, fcntl.F_SETOWN, parent))
tried("F_SETSIG", lambda: fcntl.fcntl(reader, 10, signal.SIGSTOP))
tried("FIOSETOWN", lambda: fcntl.ioctl(reader, 0x8901, parent.to_bytes(4, sys.byteorder)))
child = subprocess.Popen(["sleep", "30"])
child.send_signal(signal.SIGTERM)
print("own child", child.wait(), flush=True)
"""


@pytest.fixture
def second_thread() -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join()


@pytest.mark.usefixtures("second_thread")
def test_no_signal_of_the_job_reaches_any_thread_of_its_supervisor(tmp_path: Path) -> None:
    outcome = supervise([sys.executable, "-I", "-c", MEDDLE], tmp_path, Limits(timeout_s=30))
    said = outcome.stdout.decode()
    assert outcome.exit_code == 0, (said, outcome.stderr.decode())
    count = int(said.split()[1])
    assert count >= 2, said  # the main thread and the fixture's
    assert "allowed" not in said.replace("own child", ""), said
    for tried in (
        "kill thread True", "kill thread False", "tgkill thread True", "tgkill thread False",
        "F_SETOWN", "F_SETSIG", "FIOSETOWN",
    ):  # fmt: skip
        assert f"{tried} refused 1" in said, said
    assert "own child -15" in said, said
