"""Processes of this host as /proc shows them: who a process is, which Ray instance it
belongs to, and killing a set of them for certain.

A pid alone does not name a process for long: once it exits, the pid is free for the next
one. So a process is named by its pid and its start time (`ProcessId`), and a kill goes
through a pidfd opened while the start time still matched, so it can never hit a newcomer.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
RAY_TITLE = b"ray::"  # how Ray titles its worker and agent processes
SESSION_FLAG = b"--session_dir="  # on the raylet's command line
SESSION_PATH = re.compile(r"^(/.*/session_[^/]+)/")  # a file in a Ray session's directory
REAP_POLL_S = 0.01


@dataclass(frozen=True)
class ProcessId:
    host: str
    pid: int
    started: int  # clock ticks after boot (/proc/PID/stat): a reused pid has another

    @classmethod
    def here(cls) -> ProcessId:
        started = start_time(os.getpid())
        if started is None:
            raise OSError("/proc does not show this process: its start time is unknown")
        return cls(socket.gethostname(), os.getpid(), started)

    @property
    def local(self) -> bool:
        return self.host == socket.gethostname()

    def gone(self) -> bool:
        """Whether it has ended. Only its own host can tell: elsewhere the answer is False."""
        return self.local and start_time(self.pid) != self.started

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessId:
        return cls(str(data["host"]), int(data["pid"]), int(data["started"]))


def start_time(pid: int) -> int | None:
    """When the process started, or None if there is none by that pid or it is a zombie."""
    try:
        stat = (PROC / str(pid) / "stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(") ")[2].split()  # the name, in parentheses, may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])  # field 22 of proc(5); fields[0] is field 3


def child_named(name: str) -> int | None:
    """The pid of a child of this process with this command name."""
    parent = os.getpid()
    for entry in _pids():
        try:
            stat = (PROC / str(entry) / "stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        comm = stat.partition("(")[2].rpartition(")")[0]
        if comm == name and int(stat.rpartition(") ")[2].split()[1]) == parent:
            return entry
    return None


def descendants(root: int) -> list[ProcessId]:
    """Every process below `root` (its children, theirs, and so on), as they are now."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        try:
            stat = (PROC / str(pid) / "stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        children.setdefault(int(stat.rpartition(") ")[2].split()[1]), []).append(pid)
    found, below = [], list(children.get(root, []))
    host = socket.gethostname()
    while below:
        pid = below.pop()
        below += children.get(pid, [])
        started = start_time(pid)
        if started is not None:
            found.append(ProcessId(host, pid, started))
    return found


def session_dir(raylet: int) -> str | None:
    """The session directory of the Ray instance whose raylet is `raylet`."""
    try:
        argv = (PROC / str(raylet) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for argument in argv:
        if argument.startswith(SESSION_FLAG):
            return os.fsdecode(argument[len(SESSION_FLAG) :])
    return None


def ray_processes(session: str | None = None) -> list[ProcessId]:
    """This user's Ray workers and agents of the Ray instance whose session directory is
    `session`, or (None) of any instance whose raylet is gone: such a process can do no more
    work, and only holds what it held (a stopped evaluation, a sandbox).

    A Ray process is known by the log files it keeps open in its session directory: its
    title replaces its command line, and the title can overwrite its environment too."""
    live = _live_sessions() if session is None else set()
    found = []
    mine, namespace = os.getuid(), os.readlink(PROC / "self" / "ns" / "pid")
    for pid in _pids():
        folder = PROC / str(pid)
        try:
            if (
                folder.stat().st_uid != mine
                or not (folder / "cmdline").read_bytes().startswith(RAY_TITLE)
                # in another PID namespace (a container), paths and pids mean other things
                or os.readlink(folder / "ns" / "pid") != namespace
            ):
                continue
            sessions = _open_sessions(folder)
        except OSError:  # gone meanwhile, or not ours to read
            continue
        wanted = session in sessions if session is not None else bool(sessions - live)
        if wanted:
            started = start_time(pid)
            if started is not None:
                found.append(ProcessId(socket.gethostname(), pid, started))
    return found


def kill(targets: Iterable[ProcessId], wait_s: float) -> list[ProcessId]:
    """SIGKILL each process that is still the one named, and wait up to `wait_s` for them to
    end (a stopped process ends too); those still alive then are returned."""
    waiting: dict[int, ProcessId] = {}
    for target in targets:
        try:
            fd = os.pidfd_open(target.pid)
        except OSError:
            continue  # gone already
        if start_time(target.pid) != target.started:
            os.close(fd)  # the pid now names another process
            continue
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        waiting[fd] = target
    deadline = time.monotonic() + wait_s
    ended: list[ProcessId] = []
    while waiting and (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(list(waiting), [], [], left)
        for fd in ready:
            os.close(fd)
            ended.append(waiting.pop(fd))
    for fd in waiting:
        os.close(fd)
    # An ended process stays a zombie until its parent (here, mostly init) reaps it, and
    # until then a signal of 0 still finds it: wait for that too, so that whoever next asks
    # whether its owner lives (the containers' reaper) hears no.
    while any((PROC / str(p.pid)).exists() for p in ended) and time.monotonic() < deadline:
        time.sleep(REAP_POLL_S)
    return list(waiting.values())


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir(PROC) if entry.isdigit()]


def _live_sessions() -> set[str]:
    """The session directories of the raylets running here, whoever started them."""
    live = set()
    for pid in _pids():
        with contextlib.suppress(OSError):
            if (PROC / str(pid) / "comm").read_bytes().strip() == b"raylet":
                found = session_dir(pid)
                if found is not None:
                    live.add(found)
    return live


def _open_sessions(folder: Path) -> set[str]:
    """The Ray session directories in which this process holds files open."""
    sessions = set()
    for fd in os.listdir(folder / "fd"):
        with contextlib.suppress(OSError):
            match = SESSION_PATH.match(os.readlink(folder / "fd" / fd))
            if match:
                sessions.add(match.group(1))
    return sessions
