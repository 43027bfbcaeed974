"""Run one untrusted command under limits and report how it ended: the core of every sandbox.

Stdlib only and self-contained, because it runs in two places. The process backend imports
it on the host; the Docker backend sends this file's source into its container and runs it
there once, with `python3 -c`, as a server that takes jobs framed on stdin and frames their
reports on stdout (`serve`). Both backends therefore enforce one implementation of the limits.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import math
import os
import re
import resource
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import SimpleNamespace
from typing import Any, BinaryIO, NamedTuple, Protocol

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)  # the syscall's number
KEYCTL_JOIN_SESSION_KEYRING = 1
LINGER_S = 0.5  # after the job exits, how long its output may still drain through the pipes
MAX_NAMED = 16  # leftover processes named in a report; the rest are counted
EXECUTABLE_MAGIC = (b"\x7fELF", b"#!")
CHUNK = 64 * 1024
FRAME = struct.Struct(">Q")  # the length before each JSON frame of the container protocol
ACCEPTED = b"\x06"  # the server has read the whole job: a death after it is the job's doing
# Where a container reads its memory cgroup's count of out-of-memory kills: v2, then v1.
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")

_libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child must not load libraries

# A seccomp filter on every job, answering EPERM to:
# - the kernel's keyrings (add_key, request_key, keyctl). A keyring of the uid outlives the
#   job and is shared with the next one (and, with no namespace around the job, is its
#   user's own); no job needs one;
# - a signal aimed at its supervisor: at any of its threads by id, at its process group, or
#   at every process the job may signal (kill -1); pidfd_send_signal, whose target no filter
#   can read; and making the supervisor the owner of a descriptor's I/O signals (fcntl
#   F_SETOWN, F_SETOWN_EX, F_SETSIG; ioctl FIOSETOWN, SIOCSPGRP), which no job needs. The
#   job runs as the supervisor's uid, so the kernel would let it stop the supervisor
#   (SIGSTOP), which then could neither end the job at its limit nor report what it said;
#   the job's own processes it may still signal as it likes.
# Other ABIs of the machine (i386 through int 0x80, x32) answer EPERM to everything, so the
# numbers cannot be dodged.
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_ALLOW, SECCOMP_EPERM = 0x7FFF0000, 0x00050000 | 1
BPF_LD_ABS, BPF_JEQ, BPF_JGE, BPF_RET = 0x20, 0x15, 0x35, 0x06
ARG0_LOW, ARG1_LOW = 16, 24  # offsets of the arguments' low 32 bits in struct seccomp_data
OWNER_FCNTLS = (8, 15, 10)  # F_SETOWN, F_SETOWN_EX, F_SETSIG
OWNER_IOCTLS = (0x8901, 0x8902)  # FIOSETOWN, SIOCSPGRP


class _Abi(NamedTuple):
    audit: int
    x32: int | None  # x32's flag, None where there is no such ABI
    denied: tuple[int, ...]  # add_key, request_key, keyctl, pidfd_send_signal
    # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_open: a pid first
    aimed: tuple[int, ...]
    fcntl: int
    ioctl: int


NATIVE_ABI = {
    "x86_64": _Abi(
        0xC000003E, 0x40000000, (248, 249, 250, 424), (62, 200, 234, 129, 297, 434), 72, 16
    ),
    "aarch64": _Abi(0xC00000B7, None, (217, 218, 219, 424), (129, 130, 131, 138, 240, 434), 25, 29),
}.get(os.uname().machine)


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


_JOB_FILTERS: dict[tuple[tuple[int, ...], int], tuple[_SockFprog, ctypes.Array[ctypes.c_char]]]
_JOB_FILTERS = {}


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _refusing(argument: int, values: Sequence[int]) -> list[bytes]:
    """Load one argument's low half; EPERM where it is one of `values`, else ALLOW."""
    ops = [_bpf(BPF_LD_ABS, argument)]
    for value in values:
        ops += [_bpf(BPF_JEQ, value & 0xFFFFFFFF, 0, 1), _bpf(BPF_RET, SECCOMP_EPERM)]
    return [*ops, _bpf(BPF_RET, SECCOMP_ALLOW)]


def _job_filter() -> _SockFprog | None:
    """The filter for the jobs of this process, for its threads as they are now (built
    before the fork, and kept with the buffer that must live as long as it); None on a
    machine whose ABI it does not know."""
    if NATIVE_ABI is None:
        return None
    threads = tuple(sorted(int(tid) for tid in os.listdir("/proc/self/task")))
    group = os.getpgid(0)
    if (threads, group) not in _JOB_FILTERS:
        abi = NATIVE_ABI
        ops = [_bpf(BPF_LD_ABS, 4), _bpf(BPF_JEQ, abi.audit, 1, 0), _bpf(BPF_RET, SECCOMP_EPERM)]
        ops.append(_bpf(BPF_LD_ABS, 0))
        if abi.x32 is not None:
            ops += [_bpf(BPF_JGE, abi.x32, 0, 1), _bpf(BPF_RET, SECCOMP_EPERM)]
        for number in abi.denied:
            ops += [_bpf(BPF_JEQ, number, 0, 1), _bpf(BPF_RET, SECCOMP_EPERM)]
        # Each checked call jumps to its block of argument checks, past one ALLOW; the
        # longest block (a thread each) comes last, so that every jump fits in a byte.
        blocks = [
            ((abi.fcntl,), _refusing(ARG1_LOW, OWNER_FCNTLS)),
            ((abi.ioctl,), _refusing(ARG1_LOW, OWNER_IOCTLS)),
            (abi.aimed, _refusing(ARG0_LOW, (*threads, -1, -group))),
        ]
        jumps = [(number, at) for at, (numbers, _) in enumerate(blocks) for number in numbers]
        starts = [sum(len(block) for _, block in blocks[:at]) for at in range(len(blocks))]
        for index, (number, at) in enumerate(jumps):
            ops.append(_bpf(BPF_JEQ, number, len(jumps) - index + starts[at], 0))
        ops.append(_bpf(BPF_RET, SECCOMP_ALLOW))
        for _, block in blocks:
            ops += block
        code = ctypes.create_string_buffer(b"".join(ops))
        _JOB_FILTERS[threads, group] = (_SockFprog(len(ops), ctypes.addressof(code)), code)
    return _JOB_FILTERS[threads, group][0]


class JobLimits(Protocol):
    """What the supervisor needs of evolve.plugin.sandbox.Limits, which a container cannot
    import."""

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
    left_behind: list[str]  # processes of the job still alive when it exited, since killed
    cpu_s: float  # CPU time of the job's process and of the processes it waited for
    # The limit that stopped the job where this supervisor knows it did, by its field in
    # evolve.plugin.limits.Limits (see `limit_met`); None otherwise.
    limit: str | None
    oom_kills: int  # processes of the job that the cgroup's out-of-memory killer killed


class Sweep(NamedTuple):
    """Where a job's leftover processes are found and how they are killed, which depends on
    where the supervisor runs: GROUP_SWEEP on a plain host, UID_SWEEP in a container. (In the
    process backend's namespaces, evolve/sandboxes/namespace_init.py sweeps from inside.)"""

    find: Callable[[int], list[str]]  # given the job's pid: "PID (name)" of each one alive
    kill: Callable[[int], None]


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
    argv: Sequence[str],
    workdir: Path,
    limits: JobLimits,
    *,
    limit_processes: bool = True,
    sweep: Sweep | None = None,
    pass_fds: Sequence[int] = (),
    as_user: int | None = None,
    call: Callable[[], int] | None = None,
    filter_job: bool = True,
    oom_kills: Callable[[], int | None] | None = None,
) -> Outcome:
    """Run argv in workdir under `limits`, timed from out here; the whole group dies after it.

    The stage ends when argv's process exits: whatever it left running is named (`sweep`,
    by default its process group), killed, and given LINGER_S to let the pipes drain, so a
    daemon holding stdout open neither extends the stage nor goes unnoticed.
    `limit_processes=False` leaves RLIMIT_NPROC unset, for hosts where a pids cgroup bounds
    the processes instead: the rlimit counts every process of the uid on the whole machine.
    `as_user` runs argv as that uid and gid, with no supplementary groups (root only).
    `call`, where given, runs instead of argv in a forked child of this process (see
    `_fork_call`), which exits with what it returns; argv then only names the job (and
    `as_user` and `pass_fds` are not for it). `filter_job=False` leaves out the job's seccomp
    filter (see `_job_filter`), for an argv that is bubblewrap: the filter's
    no-new-privileges would stop a setuid bwrap, and bwrap's namespaces give the job
    keyrings of its own and no sight of this process. `oom_kills`, where given, counts the
    out-of-memory kills of the cgroup the job runs in (`cgroup_oom_kills`): one more after
    the job than before is what ended it.
    """
    if call is not None and (as_user is not None or pass_fds):
        raise ValueError("a forked call runs as this process's user, with no passed fds")
    parent = os.getpid()
    seccomp = _job_filter() if filter_job else None
    oom_before = oom_kills() if oom_kills is not None else None
    started = time.monotonic()
    proc: subprocess.Popen[bytes] | _Forked
    if call is not None:
        proc = _fork_call(call, workdir, limits, parent, limit_processes, seccomp)
    else:
        proc = subprocess.Popen(
            list(argv),
            cwd=workdir,
            env=minimal_env(workdir),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            user=as_user,
            group=as_user,
            extra_groups=None if as_user is None else [],
            preexec_fn=lambda: _limit_child(limits, parent, limit_processes, seccomp),
        )
    left: list[str] = []

    def ended() -> None:
        left.extend(capped((sweep or GROUP_SWEEP).find(proc.pid)))
        (sweep or GROUP_SWEEP).kill(proc.pid)

    try:
        stdout, stderr, timed_out, truncated = _pump(
            proc, limits, started + limits.timeout_s, ended
        )
    finally:
        _kill_group(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.monotonic() - started
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    oom_after = oom_kills() if oom_kills is not None else None
    killed = oom_after - oom_before if oom_after is not None and oom_before is not None else 0
    cpu_s = usage.ru_utime + usage.ru_stime
    killed_by = -code if code < 0 else None
    limit = limit_met(limits, killed_by, timed_out, cpu_s, killed > 0)
    return Outcome(
        exit_code=code if code >= 0 else None,
        signal=killed_by,
        stdout=stdout,
        stderr=stderr,
        wall_s=wall_s,
        peak_memory_bytes=usage.ru_maxrss * 1024,
        timed_out=limit in ("timeout_s", "cpu_s"),
        output_truncated=truncated,
        left_behind=left,
        cpu_s=cpu_s,
        limit=limit,
        oom_kills=killed,
    )


def cpu_limit_s(limits: JobLimits) -> int:
    """RLIMIT_CPU's soft limit for a job: SIGXCPU there, SIGKILL a second later."""
    return math.ceil(limits.cpu_s if limits.cpu_s is not None else limits.timeout_s) + 1


def limit_met(
    limits: JobLimits,
    killed_by: int | None,
    timer_fired: bool,
    cpu_s: float,
    out_of_memory: bool = False,
) -> str | None:
    """The limit that stopped a job, by its field in Limits, where how it ended shows it for
    certain: the timer's kill; SIGXCPU, or SIGKILL once its CPU time passed the soft limit
    (a job that ignores SIGXCPU meets the hard one); SIGXFSZ, which only RLIMIT_FSIZE
    sends; a SIGKILL that the cgroup counted as an out-of-memory kill. None otherwise."""
    if timer_fired:
        return "timeout_s"
    if killed_by == signal.SIGXCPU or (
        killed_by == signal.SIGKILL and cpu_s >= cpu_limit_s(limits)
    ):
        return "cpu_s"
    if killed_by == signal.SIGXFSZ:
        return "max_file_bytes"
    if killed_by == signal.SIGKILL and out_of_memory:
        return "memory_bytes"
    return None


def cgroup_oom_kills() -> int | None:
    """How many processes the out-of-memory killer has killed in this process's memory
    cgroup, as a container sees its own (cgroup v2, then v1); None where it cannot be read."""
    for path in OOM_COUNTERS:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    return None


class _Forked:
    """A job forked from this process rather than exec'd: what `supervise` needs of a Popen."""

    def __init__(self, pid: int, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self.pid, self.stdout, self.stderr = pid, stdout, stderr
        self.returncode: int | None = None


def _fork_call(
    call: Callable[[], int],
    workdir: Path,
    limits: JobLimits,
    parent: int,
    limit_processes: bool,
    seccomp: _SockFprog | None,
) -> _Forked:
    """Fork a child that becomes a job as an exec'd argv would: its own session, stdin from
    /dev/null and stdout and stderr into fresh pipes, no other descriptor of ours (the
    server's protocol streams above all), the job's environment, work dir and limits, and
    dumpable again as after an exec. Then it runs `call` and exits with what that returns,
    skipping this process's exit handlers. Nothing it does reaches this process's memory:
    the child's pages are its own copies."""
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: it never returns
        code = 1
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDONLY)
            for source, target in ((null, 0), (out_write, 1), (err_write, 2)):
                os.dup2(source, target)
            os.closerange(3, _descriptor_ceiling())
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 -- the job's for its whole life
            sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
            _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
            os.chdir(workdir)
            os.environ.clear()
            os.environ.update(minimal_env(workdir))
            _limit_child(limits, parent, limit_processes, seccomp)
            code = call()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # whatever the call let through: the job's stderr says what
            with contextlib.suppress(BaseException):
                sys.stderr.write(_traceback_text())
        finally:
            with contextlib.suppress(BaseException):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code & 0xFF if isinstance(code, int) else 1)
    os.close(out_write)
    os.close(err_write)
    return _Forked(pid, open(out_read, "rb"), open(err_read, "rb"))


def _descriptor_ceiling() -> int:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def _traceback_text() -> str:
    import traceback  # only a failing call pays for it

    return traceback.format_exc()


def processes(keep: Callable[[int, int, int], bool]) -> list[str]:
    """Each live process but this one that keep(pid, pgid, uid) accepts, as "PID (name)".

    Read from /proc, which in a container or a PID namespace shows only its own processes.
    Zombies are dead already and are not listed, nor is pid 1, the init of the container or
    namespace, which no job can be.
    """
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (me, 1):
            continue
        try:
            stat_line = Path("/proc", entry, "stat").read_bytes().decode(errors="replace")
            owner = os.stat(Path("/proc", entry)).st_uid
            threads = len(os.listdir(Path("/proc", entry, "task")))
        except OSError:  # it exited while we looked
            continue
        name, _, rest = stat_line.partition(" (")[2].rpartition(") ")
        state, _, pgid = rest.split()[:3]
        # A leader that exited while its threads run on shows as a zombie; it is not dead.
        alive = state not in ("Z", "X") or threads > 1
        if alive and keep(int(entry), int(pgid), owner):
            found.append(f"{entry} ({name})")
    return found


def capped(names: list[str]) -> list[str]:
    """At most MAX_NAMED names and a count of the rest: a fork bomb's report stays small."""
    if len(names) <= MAX_NAMED:
        return names
    return [*names[:MAX_NAMED], f"and {len(names) - MAX_NAMED} more"]


def _group_find(pid: int) -> list[str]:
    return processes(lambda other, pgid, _: pgid == pid and other != pid)


def _uid_find(pid: int) -> list[str]:
    mine = os.getuid()
    return processes(lambda other, _, owner: owner == mine and other != pid)


GROUP_SWEEP = Sweep(_group_find, lambda pid: _kill_group(pid))
# A server alone with its jobs' uid (a container, a PID namespace): everything else is the job's.
UID_SWEEP = Sweep(_uid_find, lambda _: _kill_all_of_this_uid())


def _limit_child(
    limits: JobLimits, parent: int, limit_processes: bool, seccomp: _SockFprog | None
) -> None:
    """Runs in the forked child before exec: keep only async-signal-safe-ish work here."""
    cpu = cpu_limit_s(limits)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, SIGKILL a second later
    space = (
        limits.memory_bytes if limits.address_space_bytes is None else limits.address_space_bytes
    )
    if space <= 0:  # a sanitizer's shadow memory: see evolve.plugin.sandbox.Limits
        space = resource.RLIM_INFINITY
    resource.setrlimit(resource.RLIMIT_AS, (space, space))
    if limit_processes:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # The job first, should its machine or cgroup run out of memory: never its supervisor,
    # which then could not say how the job ended, nor another process of the host.
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as score:
        score.write("1000")
    if KEYCTL is not None:  # a fresh session keyring: the caller's may hold its user's keys
        _libc.syscall(KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None)
    if seccomp is not None:  # a kernel without seccomp: as is
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(seccomp), 0, 0)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os._exit(1)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _pump(
    proc: subprocess.Popen[bytes] | _Forked,
    limits: JobLimits,
    deadline: float,
    ended: Callable[[], None],
) -> tuple[bytes, bytes, bool, bool]:
    """Read both pipes up to the cap until the child exits or the deadline passes.

    When the child exits, `ended` names and kills what it left, and the pipes get LINGER_S
    more to deliver what was written before: a straggler that escaped the kill and holds them
    open is not waited for. Bytes beyond the cap are read and dropped, so a flood never blocks
    the child nor fills our memory.
    """
    if proc.stdout is None or proc.stderr is None:
        raise RuntimeError("the job's stdout and stderr are not pipes despite PIPE")
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
                    ended()
                    deadline = min(deadline, time.monotonic() + LINGER_S)
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
# file and IPC object it owns.

DEATH_WAIT_S = 5.0  # how long the killed processes of a job may take to die
IPC_RMID, MSG_INFO, SHM_INFO, SEM_INFO = 0, 12, 14, 19
MQUEUE = "/dev/mqueue"  # where Docker mounts the container's POSIX message queues
IOPRIO_WHO_PROCESS = 1
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}  # syscall numbers: glibc does not wrap ioprio_get
IPC_REMOVERS: dict[str, Callable[[int], int]] = {  # /proc/sysvipc/TABLE: remove one by its id
    "shm": lambda ident: _libc.shmctl(ident, IPC_RMID, None),
    "sem": lambda ident: _libc.semctl(ident, 0, IPC_RMID),
    "msg": lambda ident: _libc.msgctl(ident, IPC_RMID, None),
}


def serve(
    stdin: BinaryIO,
    stdout: BinaryIO,
    scratch: Sequence[str] = ("/work", "/dev/shm"),
    *,
    limit_processes: bool = False,
) -> None:
    """Run the jobs framed on stdin one by one, each in a fresh dir under scratch[0], until EOF.

    In:  FRAME + JSON {argv, limits, collect, files: [[name, size], ...], warm?}, then the
         files' bytes. `warm` ({key, module, setup, args, files}) lets the job run as a call of
         a trusted module's main(args) in a child forked from this server, which imports the
         module once (see `_Preloaded`); argv is what runs where it cannot.
    Out: ACCEPTED once the job is read, then FRAME + JSON {outcome fields, stdout: size, stderr:
         size, files: [[name, size], ...]} and those bytes in that order; or FRAME + JSON
         {errno, error} if argv cannot start or its files cannot be written.
    Every process of this uid but the server dies and every scratch dir is emptied before the
    report goes out, so a report vouches for a clean slate; if emptying fails, the server dies
    instead and the host fails that job. The same happens first thing, for a predecessor that
    a job killed mid-job. The server's own code lives in memory only (it came with -c).
    A job of the same uid can lower the server's rlimits, nice value, CPU affinity, scheduling
    and I/O priority from outside, and every later job would inherit them; a lowered hard limit
    cannot even be raised back. So a job that changed any of them fails: the server exits
    instead of reporting, and the host starts a fresh server for the next job.
    `limit_processes` sets RLIMIT_NPROC on each job, where no pids cgroup bounds them.
    """
    if os.getuid() == 0:  # its sweep, kill(-1), would reach every process of the machine
        raise SystemExit("the sandbox server runs only as the container's unprivileged job user")
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # the job (same uid) cannot open our /proc/PID/*
    _scrub(scratch)
    while _serve_one(stdin, stdout, scratch, limit_processes):
        pass


def _serve_one(
    stdin: BinaryIO, stdout: BinaryIO, scratch: Sequence[str], limit_processes: bool
) -> bool:
    """One job, start to report; False once the host has closed our stdin."""
    head = stdin.read(FRAME.size)
    if not head:
        return False
    spec = json.loads(_read_exact(stdin, FRAME.unpack(head)[0]))
    files = {name: _read_exact(stdin, size) for name, size in spec["files"]}
    stdout.write(ACCEPTED)
    stdout.flush()
    limits = SimpleNamespace(**spec["limits"])
    call = _preloaded.call(spec.get("warm"), files, scratch, limits.timeout_s)
    # A warm job runs where its module was imported, so that paths the module keeps (its
    # __file__, its folder on sys.path) name the job's own copies of its files.
    job = WARM_DIR if call is not None else f"job-{os.urandom(6).hex()}"  # not tempfile: 3 ms
    workdir = Path(scratch[0], job)
    own = _own_settings()  # no process of this uid runs now: whatever differs later, the job did
    outcome: Outcome | OSError
    try:
        workdir.mkdir(mode=0o700)
        write_files(workdir, files)
        outcome = supervise(
            spec["argv"],
            workdir,
            limits,
            limit_processes=limit_processes,
            sweep=UID_SWEEP,
            call=call,
            oom_kills=cgroup_oom_kills,
        )
    except OSError as exc:  # reported as ProcessSandbox raises it; the job may have run, though
        outcome = exc
    _insist_unchanged(own)  # now too: a server whose limits were cut may fail at what follows
    _kill_all_of_this_uid()  # before reading back, so that nothing rewrites what is collected
    collected = open_collected(workdir, spec["collect"]) if isinstance(outcome, Outcome) else {}
    _scrub(scratch)  # the open files outlive their names
    _insist_unchanged(own)  # and after the sweep, when nothing of the job is left to change them
    if isinstance(outcome, OSError):
        _write_frame(stdout, {"errno": outcome.errno, "error": str(outcome)})
    else:
        _send_report(stdout, outcome, collected, limits)
    return True


class _Preloaded:
    """The one trusted module this server keeps imported for warm jobs.

    The module is imported, and its `warm(*setup)` called, in this process, in the warm dir
    holding only the files the host names for it (never a candidate's), under a deadline,
    with nothing it prints reaching the host's stream. Each warm job is then a child forked from
    here that calls its `main(args)`: the imports are paid once per server, not per job.
    An import that leaves a descriptor open or a shared mapping is not used: each child
    would share that file or memory with the next one, so the jobs run their argv instead.
    The folders the import put on sys.path (the warm dir, which each job fills anew) are
    taken off it here and put back in each child, so that nothing this process imports
    later (a thread the import started, say) can come from a job's files.
    One import per server: a job naming another module, or one whose import raised, ran
    out of time or was not used, runs its argv, which reports whatever goes wrong there as
    the job's own failure.
    """

    def __init__(self) -> None:
        self.tried = False
        self.key: str | None = None  # of the module imported, once it is usable
        self.main: Callable[[list[str]], int] | None = None
        self.paths: list[str] = []  # what the import added to sys.path, for each child

    def call(
        self,
        warm: Mapping[str, Any] | None,
        files: Mapping[str, bytes],
        scratch: Sequence[str],
        timeout_s: float,
    ) -> Callable[[], int] | None:
        """What a forked child runs for this job, or None to run its argv."""
        if warm is None:
            return None
        key = str(warm["key"])
        if not self.tried:
            self.tried = True
            self._import(key, warm, files, scratch, timeout_s)
        if key != self.key or self.main is None:
            return None
        main, paths, args = self.main, self.paths, [str(arg) for arg in warm["args"]]

        def job() -> int:
            sys.path[:0] = paths
            numpy_random = sys.modules.get("numpy.random")
            if numpy_random is not None:  # a fresh draw per job, as a fresh import would give
                numpy_random.seed()
            return main(args)

        return job

    def _import(
        self,
        key: str,
        warm: Mapping[str, Any],
        files: Mapping[str, bytes],
        scratch: Sequence[str],
        timeout_s: float,
    ) -> None:
        workdir = Path(scratch[0], WARM_DIR)
        before, mapped = _open_fds(), _shared_mappings()
        try:
            workdir.mkdir(mode=0o700)
            write_files(workdir, {name: files[name] for name in warm["files"]})
            os.chdir(workdir)
            with _alarm(timeout_s):
                main = _import_module(workdir / checked_path(str(warm["module"])), warm["setup"])
        except BaseException:  # SystemExit from its top level too: the cold run reports it
            return
        finally:
            os.chdir("/")
            sys.stdout.flush()
            # Whatever happened, this process never imports from a dir a job can fill again
            # (a thread the import started may import later); a warm child puts them back.
            self.paths = _unsearch(scratch[0])
            _scrub(scratch)  # whatever the import started or wrote goes before any job runs
        if _open_fds() - before or _shared_mappings() - mapped:
            return
        self.key, self.main = key, main
        gc.freeze()  # a child's collections then leave the import's objects, and pages, alone


_preloaded = _Preloaded()
WARM_DIR = "warm"  # a warm job's work dir under scratch[0]: where its module was imported


def _unsearch(root: str) -> list[str]:
    """Take the entries under `root` off sys.path, and their cached finders with them; the
    entries, in their order."""
    inside = [path for path in sys.path if path == root or path.startswith(root + "/")]
    sys.path[:] = [path for path in sys.path if path not in inside]
    for path in [p for p in sys.path_importer_cache if p == root or p.startswith(root + "/")]:
        del sys.path_importer_cache[path]
    return inside


def _import_module(path: Path, setup: Sequence[str]) -> Callable[[list[str]], int]:
    """Import the module at `path` as a job's Python would see it (site-packages included,
    no bytecode written) and call its warm(*setup); its main."""
    import importlib.util  # only a server that warms pays for these
    import site

    sys.dont_write_bytecode = True
    if sys.flags.no_site:  # this server started with -S; a job's `python3 -I` has site-packages
        site.main()
    spec = importlib.util.spec_from_file_location("__evolve_warm__", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import registers it: dataclasses look it up
    spec.loader.exec_module(module)
    module.warm(*setup)
    return module.main


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in this thread if the body runs past `seconds`."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"past {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if signal.getsignal(signal.SIGALRM) is expire:  # else the body set one of its own
            signal.signal(signal.SIGALRM, previous)


def _open_fds() -> set[int]:
    """This process's open descriptors (less the one that listed them)."""
    listed = [int(name) for name in os.listdir("/proc/self/fd")]
    open_now = set()
    for fd in listed:
        try:
            os.fstat(fd)
        except OSError:
            continue
        open_now.add(fd)
    return open_now


def _shared_mappings() -> set[str]:
    """This process's shared memory mappings, as /proc/self/maps lists them."""
    with open("/proc/self/maps") as maps:
        return {line.strip() for line in maps if line.split(maxsplit=2)[1][3:4] == "s"}


def _protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """The host's stdin and stdout, moved off descriptors 0 and 1, which get /dev/null: what
    an imported module or a thread it started prints can never reach the framed protocol."""
    stdin = os.fdopen(os.dup(0), "rb")
    stdout = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    # On 0 and 1 themselves, which a forked job keeps (as its /dev/null and its stdout):
    # what an import keeps of sys.stdout stays usable in the job.
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 -- for this process's whole life
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    return stdin, stdout


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
    mounts = _mount_points()
    for root in scratch:
        _empty(Path(root), mounts)
    _remove_ipc()


def _mount_points() -> frozenset[str]:
    """Where this process's mount namespace has something mounted (octal escapes undone)."""
    points = set()
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            fields = line.split(b" ")
            if len(fields) > 4:
                raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
                points.add(os.fsdecode(raw))
    return frozenset(points)


def _kill_all_of_this_uid() -> None:
    """SIGKILL every process this uid may signal but us (the kernel spares the caller's thread
    group): stragglers that left the job's group too. Then wait until each is dead: one killed
    inside a system call completes it first, and a prlimit() on the server or an shmget() that
    landed after the checks and the scrub which follow this would outlast the job.

    One call suffices even against a fork bomb: the kernel walks the task list under the lock
    that fork needs to add a child, and a fork whose parent already has SIGKILL pending fails.
    The call repeats while we wait all the same. If they do not die, the server does.
    """
    deadline = time.monotonic() + DEATH_WAIT_S
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not _any_signallable_alive():
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"processes of the job outlived SIGKILL by {DEATH_WAIT_S:g}s")
        time.sleep(0.001)


def _any_signallable_alive() -> bool:
    """Whether any process but us that this uid may signal still runs: kill(pid, 0) asks just
    what kill(-1) reached, less pid 1, which kill(-1) never reaches (in the process backend's
    namespace, its init runs as the job's uid). A zombie counts while a thread of it still
    runs."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (me, 1):
            continue
        try:
            os.kill(int(entry), 0)
            state = Path("/proc", entry, "stat").read_bytes().rpartition(b") ")[2][:1]
            if state not in (b"Z", b"X") or len(os.listdir(Path("/proc", entry, "task"))) > 1:
                return True
        except OSError:  # another uid's, or gone
            continue
    return False


def _remove_ipc() -> None:
    """Remove this uid's SysV shared memory segments, semaphore sets and message queues, and
    its POSIX message queues: kernel objects that outlive their processes as files do, which a
    job could leave for the next one to read. Docker gives each container an IPC namespace of
    its own, so only its jobs made them."""
    if _any_sysv_ipc():
        _remove_sysv_ipc()
    try:
        queues = os.listdir(MQUEUE)
    except FileNotFoundError:  # not mounted (Docker mounts it), so they cannot be listed
        queues = []
    if queues:
        _empty(Path(MQUEUE))


def _remove_sysv_ipc() -> None:
    """Each SysV object this uid owns or created: one whose owner a job reassigned to another
    uid is still ours to remove, as its creator."""
    mine = os.getuid()
    for table, remove in IPC_REMOVERS.items():
        lines = Path("/proc/sysvipc", table).read_text().splitlines()
        columns = lines[0].split()
        owner, creator = columns.index("uid"), columns.index("cuid")
        for line in lines[1:]:
            fields = line.split()
            if mine in (int(fields[owner]), int(fields[creator])) and remove(int(fields[1])):
                code = ctypes.get_errno()
                raise OSError(code, f"cannot remove SysV {table} {fields[1]}: {os.strerror(code)}")


def _any_sysv_ipc() -> bool:
    """Whether the IPC namespace holds any SysV object at all, asked in three system calls:
    reading its three tables in /proc after every job would cost a hundred times more."""
    asked = (  # each call, its arguments before the buffer, and the count's index in it
        (_libc.shmctl, (0, SHM_INFO), 0),  # shm_info.used_ids
        (_libc.msgctl, (0, MSG_INFO), 0),  # msginfo.msgpool
        (_libc.semctl, (0, 0, SEM_INFO), 7),  # seminfo.semusz
    )
    for call, arguments, count in asked:
        info = (ctypes.c_int * 16)()  # room for a struct shm_info, msginfo or seminfo
        if call(*arguments, info) < 0 or info[count] > 0:
            return True
    return False


def _own_settings() -> dict[str, object]:
    """What this process passes on to each job it forks that a job of its uid can change from
    outside: rlimits (prlimit), nice value (setpriority), CPUs (sched_setaffinity), scheduling
    (sched_setscheduler) and I/O priority (ioprio_set). Its umask and cwd it cannot."""
    numbers = {getattr(resource, n): n for n in dir(resource) if n.startswith("RLIMIT_")}
    numbers[resource.RLIMIT_NOFILE] = "RLIMIT_NOFILE"  # not its alias RLIMIT_OFILE
    own: dict[str, object] = {name: resource.getrlimit(n) for n, name in numbers.items()}
    own["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    own["CPU affinity"] = sorted(os.sched_getaffinity(0))
    own["scheduler"] = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
    ioprio_get = IOPRIO_GET.get(os.uname().machine)
    if ioprio_get is not None:  # elsewhere it goes unchecked
        own["io priority"] = _libc.syscall(ioprio_get, IOPRIO_WHO_PROCESS, 0)
    return own


def _insist_unchanged(own: dict[str, object]) -> None:
    """Exit, failing the job, if it changed what the server passes on since `own` was taken.
    A lowered hard limit cannot be raised again: a fresh server, which the host starts for the
    next job, is the only sure repair."""
    now = _own_settings()
    changed = [f"{name} from {was} to {now[name]}" for name, was in own.items() if now[name] != was]
    if changed:
        raise SystemExit(
            f"the job changed the sandbox server's own {', '.join(changed)}, which every later "
            "job would inherit: this server stops, and a fresh one takes the next job"
        )


def _empty(root: Path, mounts: frozenset[str] = frozenset()) -> None:
    """Remove everything under root that this uid owns, first unlocking dirs a job chmod-ed.
    Mount points under root, and the dirs on the way to them, stay, emptied of the rest: the
    process backend binds host folders (its work root, a task's Python environment) inside
    the namespace's /tmp, and no job can mount."""
    mine = os.getuid()
    if root.stat().st_uid == mine:
        root.chmod(0o700)
    for entry in root.iterdir():
        status = entry.lstat()
        if status.st_uid != mine:  # another uid's, in a shared dir like /dev/shm
            continue
        where = os.fspath(entry)
        if where in mounts:
            continue
        if stat.S_ISDIR(status.st_mode) and any(m.startswith(where + "/") for m in mounts):
            _empty(entry, mounts)
            continue
        if not stat.S_ISDIR(status.st_mode):
            entry.unlink()
            continue
        try:
            entry.chmod(0o700)
            for path, dirs, _ in os.walk(entry):  # top-down: unlock each dir before listing it
                for name in dirs:
                    below = Path(path, name)
                    if stat.S_ISDIR(below.lstat().st_mode):
                        below.chmod(0o700)
            shutil.rmtree(entry)
        except RecursionError:  # a tree deeper than Python's stack: coreutils walk iteratively
            subprocess.run(["chmod", "-R", "u+rwx", "--", str(entry)], capture_output=True)
            subprocess.run(["rm", "-rf", "--", str(entry)], capture_output=True, check=True)


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"the job spec ended after {len(data)} of {size} bytes")
    return data


def _write_frame(out: BinaryIO, message: object) -> None:
    data = json.dumps(message).encode()
    out.write(FRAME.pack(len(data)) + data)
    out.flush()


if __name__ == "__main__":  # as `python3 -I -S -c SOURCE [OPTIONS]`, OPTIONS serve's, as JSON
    options = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    serve(*_protocol_streams(), **options)
