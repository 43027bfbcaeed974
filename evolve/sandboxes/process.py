"""Run candidate code as a child process of this host, in namespaces of its own where
bubblewrap works (see evolve/sandboxes/isolation.py): the backend for hosts without Docker and for
GPUs that a container cannot reach.

Isolated, a job sees no host process, no network, no host /tmp or /dev/shm and no home
folder, writes only its work dir, and dies with everything it started. Without bubblewrap
it is bounded only by rlimits and a timeout, and every run says so.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from evolve.plugin.sandbox import Limits, RunResult, WarmPython
from evolve.sandboxes import namespace_init, python_env
from evolve.sandboxes.isolation import Isolation, detect, with_environment
from evolve.sandboxes.namespace_server import NamespaceServer, ServerLost
from evolve.sandboxes.server_client import frame_warm_job
from evolve.sandboxes.supervise import (
    Outcome,
    checked_path,
    limit_met,
    read_back,
    supervise,
    write_files,
)

log = logging.getLogger("evolve.plugin.sandbox")

INIT = Path(namespace_init.__file__).read_text()
REPORT_BYTES = 64 * 1024  # a pipe's buffer: the init's report is written before it exits


def open_sandbox(*, image: str | None = None, gpus: bool = False) -> ProcessSandbox:
    """`image` is Docker's, or the Python environment `provision` made for the task's pip
    requirements, whose Python then runs the jobs; the host's GPUs are the job's anyway."""
    folder = python_env.environment(image)
    if folder is None:
        return ProcessSandbox()
    return ProcessSandbox(with_environment(detect(), folder, python_env.python_of(folder)))


def readiness() -> tuple[bool, str]:
    """Ready means isolated: a job that runs as a plain process of this user is not."""
    isolation = detect()
    if isolation.tool is None:
        return False, isolation.detail
    return True, f"process, isolated by {isolation.detail}"


def provision(
    *,
    image: str | None,
    packages: Sequence[str],
    pip: Sequence[str],
    progress: Callable[[str], None],
) -> str | None:
    """No Debian package is installed: jobs run the host's own software. PyPI requirements
    go into a Python environment for the jobs' Python (evolve/sandboxes/python_env.py), whose
    folder is returned; None without any."""
    if not pip:
        return None
    isolation = detect()
    return str(python_env.provide(isolation.python, pip, progress, isolation.user))


def reap_orphans() -> int:
    """Nothing outlives its worker here: each job's namespace dies with its init, a warm
    server's with its bubblewrap, which dies with the worker (--die-with-parent), and a
    job's leftovers are swept when it ends (evolve/sandboxes/supervise.py)."""
    return 0


class ProcessSandbox:
    name = "process"

    def __init__(self, isolation: Isolation | None = None) -> None:
        self.isolation = detect() if isolation is None else isolation
        self.private_scratch = self.isolation.tool is not None
        self.python = self.isolation.python
        self._held = _Held()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._held.drop)  # and at exit
        if self.isolation.tool is None:
            log.warning("process sandbox: %s", self.isolation.detail)

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        for name in (*files, *collect):
            checked_path(name)
        workdir = Path(tempfile.mkdtemp(prefix="evolve-run-"))
        try:
            write_files(workdir, files)
            if self.isolation.tool is None:
                outcome = supervise(argv, workdir, limits)
            else:
                outcome = self._contained(argv, workdir, limits)
            collected = read_back(workdir, collect, limits.max_file_bytes)
        finally:
            remove_tree(workdir)
        return RunResult(**outcome._asdict(), files=collected, limits=limits)

    def _contained(self, argv: Sequence[str], workdir: Path, limits: Limits) -> Outcome:
        """argv under bwrap, with evolve/sandboxes/namespace_init.py as the init of its PID
        namespace;
        how argv itself ended comes from the init's report: bwrap only reports the init."""
        user = self.isolation.user
        if user is not None:
            _give(workdir, user)
        read_end, write_end = os.pipe()
        try:
            init = [self.isolation.python, "-I", "-S", "-c", INIT, str(write_end), "--"]
            outcome = supervise(
                [*self.isolation.wrap(workdir, limits), *init, *argv],
                workdir,
                limits,
                pass_fds=(write_end,),
                as_user=user,
                filter_job=False,  # namespaces of its own: see supervise's filter_job
            )
            os.close(write_end)
            write_end = -1
            with open(read_end, "rb", closefd=False) as pipe:
                raw = pipe.read(REPORT_BYTES)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        try:
            report = json.loads(raw)
        except ValueError:  # none: the init was killed with the job (a timeout, say)
            return outcome
        if "errno" in report:  # argv could not start, as a plain exec would raise it
            raise OSError(report["errno"], report["error"])
        timer_fired = outcome.limit == "timeout_s"
        limit = limit_met(limits, report["signal"], timer_fired, outcome.cpu_s)
        return outcome._replace(
            exit_code=report["exit_code"],
            signal=report["signal"],
            timed_out=limit in ("timeout_s", "cpu_s"),
            left_behind=[*outcome.left_behind, *report["left_behind"]],
            limit=limit,
        )

    def run_python(
        self,
        warm: WarmPython,
        args: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        """Isolated, through a server kept in one namespace that imports warm's module once
        (evolve/sandboxes/namespace_server.py); otherwise as one command, imports and all."""
        if self.isolation.tool is None:
            argv = warm.argv(self.python, args)
            return self.run(argv, files={**warm.files, **files}, limits=limits, collect=collect)
        for name in (*warm.files, *files, *collect):
            checked_path(name)
        payload = frame_warm_job(warm, args, self.python, files, limits, collect)
        with self._lock:
            try:
                result = self._server(limits, warm.key).exchange(payload, limits, warm.key)
            except ServerLost as lost:  # before it took the job: a fresh server takes it
                log.warning("process sandbox: %s; starting another", lost)
                self._held.drop()
                result = self._server(limits, warm.key).exchange(payload, limits, warm.key)
            if self._held.server is not None and not self._held.server.alive:
                self._held.drop()
        return result

    def close(self) -> None:
        """Stop the warm server, if one runs; plain runs leave nothing behind."""
        with self._lock:
            self._finalizer()

    def _server(self, limits: Limits, warm_key: str) -> NamespaceServer:
        """The warm server, replaced where `limits` size its namespace differently or where
        it keeps another module imported."""
        held = self._held
        if held.server is not None and (
            held.server.shape != limits.max_file_bytes or held.server.warmed not in (None, warm_key)
        ):
            held.drop()
        if held.server is None:
            held.server = NamespaceServer(self.isolation, limits)
        return held.server


class _Held:
    """The warm server, held apart from the sandbox so that a finalizer can stop it."""

    server: NamespaceServer | None = None

    def drop(self) -> None:
        if self.server is not None:
            self.server.stop()
            remove_tree(self.server.root)
            self.server = None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """A job can leave a tree so deep that the recursive walk ends in a RecursionError. A
    garbage collection falling due at the bottom of that recursion would run other objects'
    finalizers with no stack left, and they would fail instead (a container's clean-up, in
    a process that holds one): seen once in the test suite. The walk takes milliseconds."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _give(workdir: Path, user: int) -> None:
    """Hand the work dir and its files to the uid the job runs as."""
    for folder, _, names in os.walk(workdir):
        os.chown(folder, user, user)
        for name in names:
            os.chown(os.path.join(folder, name), user, user, follow_symlinks=False)


def remove_tree(root: Path) -> None:
    """Remove a work dir whatever the job made of it: dirs it locked (mode 000), symlinks out
    of it (never followed), and trees too deep for a recursive walk in Python, with
    coreutils, which walks them iteratively."""
    try:
        with _collector_paused():
            shutil.rmtree(root)
        return
    except (OSError, RecursionError):
        pass
    subprocess.run(["chmod", "-R", "u+rwx", "--", str(root)], capture_output=True, check=False)
    done = subprocess.run(["rm", "-rf", "--", str(root)], capture_output=True, check=False)
    if done.returncode != 0:
        log.error(
            "could not remove the work dir %s: %s", root, done.stderr.decode(errors="replace")
        )
