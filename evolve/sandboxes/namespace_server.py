"""The process backend's warm server: evolve/sandboxes/supervise.py's `serve`, kept running in one
bubblewrap namespace between jobs, as Docker's backend keeps it in a container.

The namespace is the one a plain job of this backend gets (evolve/sandboxes/isolation.py), with
evolve/sandboxes/namespace_init.py as its pid 1 and the server as its only other process between
jobs. The server runs each job as the namespace's uid, sweeps what a job leaves, and
empties the work root, /tmp and /dev/shm before it reports. What it adds is a module kept
imported between jobs (`supervise._Preloaded`): the python evaluator's stages fork from it
instead of starting an interpreter, bubblewrap and an init each.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from evolve.plugin.limits import TIME
from evolve.plugin.sandbox import Limits, RunResult
from evolve.sandboxes import namespace_init, supervise
from evolve.sandboxes.isolation import Isolation
from evolve.sandboxes.server_client import failure, receive
from evolve.sandboxes.supervise import ACCEPTED, minimal_env

log = logging.getLogger("evolve.plugin.sandbox")

INIT = Path(namespace_init.__file__).read_text()
SERVER = Path(supervise.__file__).read_text()
GRACE_S = 15.0  # past a job's timeout, the host kills the whole namespace
STDERR_KEPT = 4096  # of what the server says as it dies
CHUNK = 1024**2


class NamespaceServer:
    """One server in one namespace, whose work root is a fresh host folder; `exchange` runs
    a framed job through it. Not thread-safe: the process sandbox holds a lock around it.
    bubblewrap's --die-with-parent ties the namespace to the thread that started it: one
    started from a thread that ends is lost with it, and the next job starts another."""

    def __init__(self, isolation: Isolation, limits: Limits) -> None:
        if isolation.tool is None:
            raise ValueError("a namespace server needs bubblewrap")
        self.shape = limits.max_file_bytes  # sizes the namespace's /tmp and /dev/shm
        self.warmed: str | None = None  # the key of the module the server has imported
        self.root = Path(tempfile.mkdtemp(prefix="evolve-server-"))
        options = {"scratch": [str(self.root), "/tmp", "/dev/shm"], "limit_processes": True}
        report_read, report_write = os.pipe()  # the init's report: the server's end, unread
        python = isolation.python
        init = [python, "-I", "-S", "-c", INIT, str(report_write), "--"]
        server = [python, "-I", "-S", "-c", SERVER, json.dumps(options)]
        try:
            if isolation.user is not None:
                os.chown(self.root, isolation.user, isolation.user)
            self._process = subprocess.Popen(
                [*isolation.wrap(self.root, limits), *init, *server],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=minimal_env(self.root),  # the caller's holds model keys: never the server's
                pass_fds=(report_write,),
                start_new_session=True,
                user=isolation.user,
                group=isolation.user,
                extra_groups=None if isolation.user is None else [],
            )
        except BaseException:
            os.close(report_read)
            self.root.rmdir()
            raise
        finally:
            os.close(report_write)
        self._report = report_read
        self._said = bytearray()
        self._out = bytearray()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def exchange(self, payload: bytes, limits: Limits, warm_key: str | None) -> RunResult:
        """Send one job and read its report. A job that kills the server, or outlives the
        host's deadline, gets a failed result naming why; the server is then stopped and
        `alive` is False."""
        started = time.monotonic()
        deadline = started + limits.timeout_s + GRACE_S
        if warm_key is not None and self.warmed != warm_key:
            deadline += limits.timeout_s  # the server imports the module first, within this
        accepted = False
        try:
            self._send(payload, deadline)
            self._take(len(ACCEPTED), deadline)
            accepted = True
            result = receive(self._take, deadline, limits)
        except TimeoutError:
            self.stop()
            why = f"the job outlived its timeout by {GRACE_S:g}s, so its sandbox was killed"
            return failure(time.monotonic() - started, why, limits, limit=TIME)
        except EOFError:
            self.stop()
            said = self._said.decode(errors="replace").strip()
            why = "the sandbox's supervisor died (did the job kill it?)" + (
                f": {said}" if said else ""
            )
            if not accepted:
                raise ServerLost(why) from None
            return failure(time.monotonic() - started, why, limits)
        self.warmed = warm_key or self.warmed
        return result

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def stop(self) -> None:
        """End the namespace and everything in it; its work root is the caller's to remove."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        if self._report >= 0:
            os.close(self._report)
            self._report = -1

    def _send(self, payload: bytes, deadline: float) -> None:
        stream = self._process.stdin
        if stream is None:
            raise EOFError("the sandbox server's stdin is closed")
        fd = stream.fileno()
        view = memoryview(payload)
        while view:
            if not select.select([], [fd], [], _left(deadline))[1]:
                raise TimeoutError
            try:
                sent = os.write(fd, view[: 64 * 1024])
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise EOFError("the sandbox server's stdin is closed") from exc
            view = view[sent:]

    def _take(self, size: int, deadline: float) -> bytes:
        """The next `size` bytes of the server's stdout."""
        stream = self._process.stdout
        if stream is None:
            raise EOFError("the sandbox server's stdout is closed")
        fd = stream.fileno()
        while len(self._out) < size:
            if not select.select([fd], [], [], _left(deadline))[0]:
                raise TimeoutError
            chunk = os.read(fd, max(CHUNK, size - len(self._out)))
            if not chunk:
                raise EOFError("the sandbox server's stdout ended")
            self._out += chunk
        taken = bytes(self._out[:size])
        del self._out[:size]
        return taken

    def _drain_stderr(self) -> None:
        """Keep the end of what the server writes to stderr (only as it dies), so that it
        can never block on a full pipe."""
        stream = self._process.stderr
        if stream is None:
            return
        for chunk in iter(lambda: stream.read1(CHUNK), b""):
            self._said = (self._said + chunk)[-STDERR_KEPT:]
        stream.close()


class ServerLost(RuntimeError):
    """The server died before it accepted the job: a fresh one may take it."""


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
