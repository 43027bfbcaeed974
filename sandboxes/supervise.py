"""Run one untrusted command under limits and report how it ended: the core of every sandbox.

Stdlib only and self-contained, because it runs in two places. The process backend imports
it on the host; the Docker backend sends this file's source into its container and runs it
there once, with `python3 -c`, as a server that takes jobs framed on stdin and frames their
reports on stdout (`serve`). Both backends therefore enforce one implementation of the limits.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import resource
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import BinaryIO, NamedTuple, Protocol

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
EXECUTABLE_MAGIC = (b"\x7fELF", b"#!")
CHUNK = 64 * 1024
FRAME = struct.Struct(">Q")  # the length before each JSON frame of the container protocol
ACCEPTED = b"\x06"  # the server has read the whole job: a death after it is the job's doing

_libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child must not load libraries


class JobLimits(Protocol):
    """What the supervisor needs of evolve.sandbox.Limits, which a container cannot import."""

    @property
    def timeout_s(self) -> float: ...
    @property
    def cpu_s(self) -> float | None: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def max_processes(self) -> int: ...
    @property
    def max_output_bytes(self) -> int: ...
    @property
    def max_file_bytes(self) -> int: ...
    @property
    def address_space_bytes(self) -> int | None: ...


class Outcome(NamedTuple):  # not a dataclass: importing it costs 15 ms per container
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    stdout: bytes
    stderr: bytes
    wall_s: float
    peak_memory_bytes: int
    timed_out: bool
    output_truncated: bool


def checked_path(path: str) -> PurePosixPath:
    """A work-dir-relative path, refusing anything that could reach outside the work dir."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"sandbox paths must be relative and stay inside the work dir: {path!r}")
    return pure


def minimal_env(workdir: Path) -> dict[str, str]:
    """A fixed environment, so no host variable (API keys, tokens) ever reaches a candidate."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir),
        "LANG": "C.UTF-8",
        "TMPDIR": str(workdir),
    }


def write_files(workdir: Path, files: Mapping[str, bytes]) -> None:
    for name, content in files.items():
        target = workdir / checked_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(0o755 if content.startswith(EXECUTABLE_MAGIC) else 0o644)


def open_collected(workdir: Path, names: Sequence[str]) -> dict[str, BinaryIO]:
    """The requested regular files that exist, opened; symlinks and FIFOs a candidate planted
    are refused. The caller closes them."""
    found: dict[str, BinaryIO] = {}
    root = os.path.realpath(workdir)
    for name in names:
        target = workdir / checked_path(name)
        if os.path.commonpath([root, os.path.realpath(target)]) != root:
            continue
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        handle = open(fd, "rb")  # noqa: SIM115 -- handed to the caller, who closes it
        if stat.S_ISREG(os.fstat(fd).st_mode):
            found[name] = handle
        else:
            handle.close()
    return found


def read_back(workdir: Path, names: Sequence[str], cap: int) -> dict[str, bytes]:
    """The first `cap` bytes of each collected file that exists."""
    found: dict[str, bytes] = {}
    for name, handle in open_collected(workdir, names).items():
        with handle:
            found[name] = handle.read(cap)
    return found


def supervise(
    argv: Sequence[str], workdir: Path, limits: JobLimits, *, limit_processes: bool = True
) -> Outcome:
    """Run argv in workdir under `limits`, timed from out here; the whole group dies after it.

    `limit_processes=False` leaves RLIMIT_NPROC unset, for hosts where a pids cgroup bounds
    the processes instead: the rlimit counts every process of the uid on the whole machine.
    """
    parent = os.getpid()
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=workdir,
        env=minimal_env(workdir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: _limit_child(limits, parent, limit_processes),
    )
    try:
        stdout, stderr, timed_out, truncated = _pump(proc, limits, started + limits.timeout_s)
    finally:
        _kill_group(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.monotonic() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    return Outcome(
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        stdout=stdout,
        stderr=stderr,
        wall_s=wall_s,
        peak_memory_bytes=usage.ru_maxrss * 1024,
        timed_out=timed_out or code == -signal.SIGXCPU,
        output_truncated=truncated,
    )


def _limit_child(limits: JobLimits, parent: int, limit_processes: bool) -> None:
    """Runs in the forked child before exec: keep only async-signal-safe-ish work here."""
    cpu = math.ceil(limits.cpu_s if limits.cpu_s is not None else limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    space = (
        limits.memory_bytes if limits.address_space_bytes is None else limits.address_space_bytes
    )
    if space <= 0:  # a sanitizer's shadow memory: see evolve.sandbox.Limits
        space = resource.RLIM_INFINITY
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    if limit_processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os._exit(1)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _pump(
    proc: subprocess.Popen[bytes], limits: JobLimits, deadline: float
) -> tuple[bytes, bytes, bool, bool]:
    """Read both pipes up to the cap until the child exits or the deadline passes.

    When the child exits, its process group is killed so that stragglers (background jobs
    holding the pipes open) neither run on nor keep us waiting. Bytes beyond the cap are
    read and dropped, so a flood never blocks the child nor fills our memory.
    """
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = bytearray(), bytearray()
    truncated = timed_out = False
    pidfd = os.pidfd_open(proc.pid)
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout.fileno(), selectors.EVENT_READ, stdout)
        selector.register(proc.stderr.fileno(), selectors.EVENT_READ, stderr)
        selector.register(pidfd, selectors.EVENT_READ, None)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = pidfd in selector.get_map()
                break
            for key, _ in selector.select(remaining):
                if key.data is None:  # the child exited
                    selector.unregister(pidfd)
                    _kill_group(proc.pid)
                    continue
                chunk = os.read(key.fd, CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                kept: bytearray = key.data
                room = limits.max_output_bytes - len(kept)
                kept += chunk[: max(room, 0)]
                truncated = truncated or len(chunk) > room
    os.close(pidfd)
    return bytes(stdout), bytes(stderr), timed_out, truncated


# The container side. A container runs one job at a time as a uid that runs nothing else but
# the server, so after a job every other process of that uid is a leftover, and so is every
# file it can write.


def serve(
    stdin: BinaryIO, stdout: BinaryIO, scratch: Sequence[str] = ("/work", "/dev/shm")
) -> None:
    """Run the jobs framed on stdin one by one, each in a fresh dir under scratch[0], until EOF.

    In:  FRAME + JSON {argv, limits, collect, files: [[name, size], ...]}, then the files' bytes.
    Out: ACCEPTED once the job is read, then FRAME + JSON {outcome fields, stdout: size, stderr:
         size, files: [[name, size], ...]} and those bytes in that order; or FRAME + JSON
         {errno, error} if argv cannot start or its files cannot be written.
    Every process of this uid but the server dies and every scratch dir is emptied before the
    report goes out, so a report vouches for a clean slate; if emptying fails, the server dies
    instead and the host fails that job. The same happens first thing, for a predecessor that
    a job killed mid-job. The server's own code lives in memory only (it came with -c).
    """
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # the job (same uid) cannot open our /proc/PID/*
    _scrub(scratch)
    while _serve_one(stdin, stdout, scratch):
        pass


def _serve_one(stdin: BinaryIO, stdout: BinaryIO, scratch: Sequence[str]) -> bool:
    """One job, start to report; False once the host has closed our stdin."""
    head = stdin.read(FRAME.size)
    if not head:
        return False
    spec = json.loads(_read_exact(stdin, FRAME.unpack(head)[0]))
    files = {name: _read_exact(stdin, size) for name, size in spec["files"]}
    stdout.write(ACCEPTED)
    stdout.flush()
    limits = SimpleNamespace(**spec["limits"])
    workdir = Path(scratch[0], f"job-{os.urandom(6).hex()}")  # not tempfile: 3 ms of imports
    try:
        workdir.mkdir(mode=0o700)
        write_files(workdir, files)
        outcome = supervise(spec["argv"], workdir, limits, limit_processes=False)
    except OSError as exc:  # as ProcessSandbox raises it
        _scrub(scratch)
        _write_frame(stdout, {"errno": exc.errno, "error": str(exc)})
        return True
    _kill_all_of_this_uid()  # before reading back, so that nothing rewrites what is collected
    collected = open_collected(workdir, spec["collect"])
    _scrub(scratch)  # the open files outlive their names
    _send_report(stdout, outcome, collected, limits)
    return True


def _send_report(
    out: BinaryIO, outcome: Outcome, collected: dict[str, BinaryIO], limits: JobLimits
) -> None:
    """Stream the collected files rather than hold them: the supervisor's memory stays small."""
    sizes = {
        n: min(os.fstat(h.fileno()).st_size, limits.max_file_bytes) for n, h in collected.items()
    }
    report = {**outcome._asdict(), "stdout": len(outcome.stdout), "stderr": len(outcome.stderr)}
    _write_frame(out, {**report, "files": list(sizes.items())})
    out.write(outcome.stdout)
    out.write(outcome.stderr)
    for name, handle in collected.items():
        with handle:
            left = sizes[name]
            while left:
                chunk = handle.read(min(CHUNK, left))
                if not chunk:
                    raise EOFError(f"{name} shrank while it was sent")
                out.write(chunk)
                left -= len(chunk)
    out.flush()


def _scrub(scratch: Sequence[str]) -> None:
    _kill_all_of_this_uid()
    for root in scratch:
        _empty(Path(root))


def _kill_all_of_this_uid() -> None:
    """SIGKILL every process this uid may signal but us (the kernel spares the caller's thread
    group): stragglers that left the job's group too.

    One call suffices even against a fork bomb: the kernel walks the task list under the lock
    that fork needs to add a child, and a fork whose parent already has SIGKILL pending fails.
    """
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def _empty(root: Path) -> None:
    """Remove everything under root that this uid owns, first unlocking dirs a job chmod-ed."""
    mine = os.getuid()
    if root.stat().st_uid == mine:
        root.chmod(0o700)
    for entry in root.iterdir():
        status = entry.lstat()
        if status.st_uid != mine:  # another uid's, in a shared dir like /dev/shm
            continue
        if not stat.S_ISDIR(status.st_mode):
            entry.unlink()
            continue
        entry.chmod(0o700)
        for path, dirs, _ in os.walk(entry):  # top-down: each dir is unlocked before its listing
            for name in dirs:
                below = Path(path, name)
                if stat.S_ISDIR(below.lstat().st_mode):
                    below.chmod(0o700)
        shutil.rmtree(entry)


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"the job spec ended after {len(data)} of {size} bytes")
    return data


def _write_frame(out: BinaryIO, message: object) -> None:
    data = json.dumps(message).encode()
    out.write(FRAME.pack(len(data)) + data)
    out.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
