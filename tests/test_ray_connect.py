"""Joining a Ray cluster that will not have us: one line naming the cause and the fix, in
seconds, with none of Ray's own warnings on the terminal. Against a real head (`ray start
--head` with token authentication on, in a temporary folder and HOME, on free ports of
127.0.0.1) and a real `evolve run` joining it, so what is checked is what Ray really says.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray

from evolve.plugin.secrets import secret_names
from evolve.runtime import ray_output, runlog
from evolve.runtime.processes import kill, ray_processes
from tests.conftest import write_synthetic_task

EVOLVE = [sys.executable, "-m", "evolve"]
RAY = str(Path(sys.executable).with_name("ray"))
HOST = "127.0.0.1"
HEAD_START_S = 90.0  # two shared cores under other test runs: Ray's own start is slow
FAST_S = 15.0  # Ray alone retries a refused token for 20 s; the probe answers in well under
TERM_GRACE_S = 3.0  # a throwaway head: no need to wait out `ray start --block`'s own stop
STOP_GRACE_S = 10.0
# Ray's raw output as it reaches a terminal: glog's "[date time W pid tid] file.cc:N:" or
# a C++ stack trace line.
RAW_RAY = re.compile(r"gcs_client|\.cc:\d+|\[C\+\+\]|^\[\d{4}-\d\d-\d\d ", re.MULTILINE)
# Ray resolves 127.0.0.1 to this machine's outward address unless told it is alone, and a
# head bound to 127.0.0.1 is then out of its reach: head and driver both get this.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@dataclass(frozen=True)
class Head:
    address: str
    token: str


def _clean_env(home: Path) -> dict[str, str]:
    """This environment without the secrets, without any Ray settings of the user's, and with
    `home` for HOME, so that the user's own ~/.ray is neither read nor written."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("RAY_") and name not in secret_names(os.environ)
    }
    return {**env, **LOOPBACK_ONLY, "HOME": str(home)}


def _free_ports() -> int:
    """A base port P with P..P+40 free on 127.0.0.1: the head's own ports and its workers'."""
    for _ in range(50):
        base = random.randrange(20000, 30000)
        try:
            with contextlib.ExitStack() as held:
                for port in range(base, base + 41):
                    bound = held.enter_context(socket.socket())
                    bound.bind((HOST, port))
            return base
        except OSError:
            continue
    raise RuntimeError("no block of 41 free ports on 127.0.0.1")


@pytest.fixture(scope="module")
def head() -> Iterator[Head]:
    """A one-CPU head that requires a token: started in its own process group, stopped by
    killing that group and then what its raylet started (never `ray stop`, which would
    stop every Ray on this machine, other test runs' too)."""
    root = Path(tempfile.mkdtemp(prefix="evolve-rc-"))  # short: Ray's socket paths are capped
    home = root / "home"
    (home / ".ray").mkdir(parents=True)
    token = secrets.token_hex(16)
    (home / ".ray" / "auth_token").write_text(token)
    port = _free_ports()
    command = [
        RAY, "start", "--head", "--block", "--node-ip-address", HOST, "--port", str(port),
        "--node-manager-port", str(port + 1), "--object-manager-port", str(port + 2),
        "--dashboard-port", str(port + 3), "--dashboard-agent-listen-port", str(port + 4),
        "--dashboard-agent-grpc-port", str(port + 5), "--runtime-env-agent-port",
        str(port + 6), "--metrics-export-port", str(port + 7), "--min-worker-port",
        str(port + 10), "--max-worker-port", str(port + 40), "--include-dashboard", "false",
        "--temp-dir", str(root / "ray"), "--num-cpus", "1", "--disable-usage-stats",
    ]  # fmt: skip
    env = {**_clean_env(home), "RAY_AUTH_MODE": "token"}
    with open(root / "head.log", "wb") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    session: str | None = None
    try:
        raylet = root / "ray" / "session_latest" / "sockets" / "raylet"
        deadline = time.monotonic() + HEAD_START_S
        while not raylet.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not start:\n{(root / 'head.log').read_text()}")
            time.sleep(0.5)
        session = str((root / "ray" / "session_latest").resolve())
        yield Head(f"{HOST}:{port}", token)
    finally:
        _stop(process, session)
        shutil.rmtree(root, ignore_errors=True)


def _stop(process: subprocess.Popen[bytes], session: str | None) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # what the head's group still holds
    if session is not None:  # workers start in groups of their own
        kill(ray_processes(session), STOP_GRACE_S)


def _join(
    head: Head, tmp_path: Path, env: dict[str, str] | None = None, *, candidates: int = 4
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`evolve run --ray-address` from a HOME of its own (no token unless `env` gives one);
    what it did, and how long it took."""
    task = write_synthetic_task(tmp_path / "task", candidates=candidates)
    home = tmp_path / "driver-home"
    home.mkdir(exist_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [*EVOLVE, "run", str(task), "--ray-address", head.address, "--plain"],
        cwd=tmp_path,
        env={**_clean_env(home), **(env or {})},
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done, time.monotonic() - started


def _the_one_error_line(done: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """The error line, and what Ray printed meanwhile (from the file the line names, which
    is removed: it is the user's to read, and this test's to clean up)."""
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: could not start or join the Ray cluster at ")
    assert not RAW_RAY.search(done.stdout), done.stdout
    assert not RAW_RAY.search(done.stderr), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    named = re.search(r" \(what Ray printed: (\S+)\)$", lines[0])
    if named is None:
        return lines[0], ""
    kept = Path(named[1])
    printed = kept.read_text()
    kept.unlink()
    return lines[0], printed


@pytest.mark.system
def test_a_driver_without_the_token_hears_why_and_how_to_fix_it_at_once(
    head: Head, tmp_path: Path
) -> None:
    done, took = _join(head, tmp_path)
    line, printed = _the_one_error_line(done)
    assert "requires token authentication and this machine sent no token" in line
    assert "RAY_AUTH_MODE=token" in line and "RAY_AUTH_TOKEN" in line
    assert "~/.ray/auth_token" in line
    assert took < FAST_S, f"{took:.1f}s"
    assert "gcs_client" in printed and "InvalidAuthToken" in printed  # kept, not lost


@pytest.mark.system
def test_a_wrong_token_is_named_as_wrong(head: Head, tmp_path: Path) -> None:
    done, took = _join(head, tmp_path, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "wrong"})
    line, _ = _the_one_error_line(done)
    assert "refused this machine's Ray token as wrong" in line
    assert "RAY_AUTH_TOKEN" in line and "~/.ray/auth_token" in line
    assert took < FAST_S, f"{took:.1f}s"


@pytest.mark.system
def test_token_mode_without_a_token_is_named(head: Head, tmp_path: Path) -> None:
    done, _ = _join(head, tmp_path, {"RAY_AUTH_MODE": "token"})
    line, _ = _the_one_error_line(done)
    assert "RAY_AUTH_MODE=token, but this machine has no Ray token" in line


@pytest.mark.system
def test_the_fix_the_line_names_joins_the_cluster(head: Head, tmp_path: Path) -> None:
    """RAY_AUTH_MODE=token and the head's token in ~/.ray/auth_token, as the line says."""
    home = tmp_path / "driver-home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(head.token)
    done, _ = _join(head, tmp_path, {"RAY_AUTH_MODE": "token"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "finished: candidate budget reached (4)" in done.stdout
    assert not RAW_RAY.search(done.stdout + done.stderr), done.stdout + done.stderr


@pytest.mark.system
def test_another_ray_or_python_on_the_cluster_names_both_versions(
    head: Head, tmp_path: Path
) -> None:
    """A second Ray and Python to start a head with are not to be had here, so the real head
    is made to claim other versions: Ray's check on joining compares this process's with the
    cluster metadata the head stored in its GCS (ray._private.utils.check_version_info), and
    that record is rewritten for this test and put back after it. Ray's check, the error it
    raises and the line made of it are all the real ones."""
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": head.token}
    metadata = """
import json, sys
from ray._raylet import GcsClient
gcs = GcsClient(address=sys.argv[1])
stored = json.loads(gcs.internal_kv_get(b"CLUSTER_METADATA", namespace=b"cluster"))
stored.update(json.loads(sys.argv[2]))
gcs.internal_kv_put(b"CLUSTER_METADATA", json.dumps(stored).encode(), True, namespace=b"cluster")
"""

    def claim(versions: dict[str, str]) -> None:
        subprocess.run(
            [sys.executable, "-c", metadata, head.address, json.dumps(versions)],
            env={**_clean_env(tmp_path), **token},
            check=True,
            timeout=60,
        )

    claim({"ray_version": "2.9.3", "python_version": "3.10.14"})
    try:
        done, took = _join(head, tmp_path, token)
    finally:
        claim({"ray_version": ray.__version__, "python_version": platform.python_version()})
    line, _ = _the_one_error_line(done)
    assert "the cluster runs Ray 2.9.3 on Python 3.10.14" in line
    assert f"this machine Ray {ray.__version__} on Python {platform.python_version()}" in line
    assert "install Ray 2.9.3 and Python 3.10.14 here" in line
    assert took < FAST_S, f"{took:.1f}s"


def test_what_reaches_descriptor_2_is_kept_and_written_to_the_next_run_log(
    tmp_path: Path,
) -> None:
    """Ray's C++ core writes to the descriptor itself, as a child process does: both are
    caught, the descriptor is put back even when the block raises, and the lines reach the
    run log at WARNING (Ray's warnings) or DEBUG (the rest) once it opens."""
    before = os.fstat(2)
    with pytest.raises(ZeroDivisionError), ray_output.captured() as printed:
        os.write(2, b"[2026-11-26 20:00:39,161 W 1 1] gcs_client.cc:210: refused\n")
        subprocess.run(["sh", "-c", "echo a line from a child >&2"], check=True)
        print("Python's own stderr", file=sys.__stderr__)  # pytest swaps sys.stderr
        raise ZeroDivisionError
    after = os.fstat(2)
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)
    try:
        lines = printed.lines()
    finally:
        printed.discard()
    assert len(lines) == 3, lines
    assert lines[0].endswith("gcs_client.cc:210: refused")
    assert "a line from a child" in lines[1] and "Python's own stderr" in lines[2]
    ray_output.hand_to_log(lines, logging.getLogger("evolve.runtime.cluster"))
    with runlog.run_log(tmp_path, "DEBUG") as path:
        pass
    logged = path.read_text()
    assert "WARNING evolve.runtime.cluster: Ray printed: [2026-11-26" in logged
    assert "DEBUG evolve.runtime.cluster: Ray printed: a line from a child" in logged
