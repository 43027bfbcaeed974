"""The trusted timer of c_kernel's measure stage, run in the sandbox beside the kernels.

Why a separate process: a kernel linked into a timing harness shares that harness's address
space, so it can rewrite the clock, the recorded times, or the file they are written to.
Here the clock lives in this process, which the kernels cannot reach:

- it makes itself non-dumpable, so a same-uid kernel can neither trace it nor open its
  memory or file descriptors through /proc;
- each kernel process runs under a seccomp filter that forbids creating processes (threads
  are allowed), tracing, signalling or re-prioritising any process but itself, asking
  for signals on I/O (F_SETOWN), and what no kernel needs but opens a way around the
  filter's view or the arena's size: io_uring (I/O done by the kernel's own threads),
  fallocate and userfaultfd;
- a kernel process is stopped (SIGSTOP, confirmed by waitid) whenever it is not inside its
  own timed call, so it can do nothing while the timer writes its next inputs, while
  another program is timed, or while its output is copied out;
- the inputs of every call are fresh (no set is used twice), held in this process until the
  call starts, and the input file is deleted before any kernel starts;
- a call's time runs from just before the kernel is let go to its answer, on this process's
  monotonic clock, and its output is copied while the kernel is stopped and hashed; the
  evaluator checks every output outside the sandbox.

The reference program (the task's seed) and the candidate are timed in the same job, in the
schedule the evaluator gives (pairs in random order), so a speedup compares calls made
seconds apart under the same load.

Stdlib only, run as `python3 -I -S timer.py`. In: timing.json and inputs.bin in the work
dir. Out: one JSON report on stdout (the kernels never hold this stdout), and outputs.bin
with every call's output in schedule order.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import mmap
import os
import select
import signal
import stat
import struct
import sys
import time

PAGE = 4096
SHARED_FD, GO_FD, DONE_FD = 3, 4, 5  # as driver.c expects them
LOG_TAIL = 2000
QUIT_GRACE_S = 2.0
# Watched for changes with the work dir where they are the job's own (Docker's, bubblewrap's).
SCRATCH = ("/tmp", "/dev/shm")
WATCH_CAP = 10_000  # entries a snapshot lists at most
MAX_CHANGES_NAMED = 8

PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 4, 38, 22, 2
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # classic BPF opcodes
KILL_PROCESS, ALLOW = 0x80000000, 0x7FFF0000
EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | errno
ENOSYS = 0x00050000 | 38
CLONE_THREAD = 0x10000
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15

# Per architecture: its audit id, then syscall numbers (Linux's unistd tables).
ARCHES = {
    "x86_64": {
        "audit": 0xC000003E,
        # fork vfork ptrace process_vm_readv/writev kcmp pidfd_send_signal pidfd_open
        # pidfd_getfd process_madvise; io_uring_setup/enter/register, fallocate, userfaultfd
        "deny": (57, 58, 101, 310, 311, 312, 424, 434, 438, 440, 425, 426, 427, 285, 323),
        "clone": 56,
        "clone3": 435,
        "fcntl": 72,
        # syscall -> (which argument names a process, whether 0 means "myself")
        "self_only": {
            62: (0, False),  # kill
            200: (0, False),  # tkill
            234: (0, False),  # tgkill
            129: (0, False),  # rt_sigqueueinfo
            297: (0, False),  # rt_tgsigqueueinfo
            141: (1, True),  # setpriority
            142: (0, True),  # sched_setparam
            144: (0, True),  # sched_setscheduler
            203: (0, True),  # sched_setaffinity
            314: (0, True),  # sched_setattr
            251: (1, True),  # ioprio_set
            302: (0, True),  # prlimit64
        },
        "x32_bit": 0x40000000,
    },
    "aarch64": {
        "audit": 0xC00000B7,
        "deny": (117, 270, 271, 272, 424, 434, 438, 440, 425, 426, 427, 47, 282),
        "clone": 220,
        "clone3": 435,
        "fcntl": 25,
        "self_only": {
            129: (0, False),
            130: (0, False),
            131: (0, False),
            138: (0, False),
            240: (0, False),
            140: (1, True),
            118: (0, True),
            119: (0, True),
            122: (0, True),
            274: (0, True),
            30: (1, True),
            261: (0, True),
        },
        "x32_bit": None,
    },
}

_libc = ctypes.CDLL(None, use_errno=True)


class SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _arg(index: int, high: bool = False) -> int:
    """Offset of an argument's 32-bit half in struct seccomp_data (little-endian)."""
    return 16 + 8 * index + (4 if high else 0)


def seccomp_program(arch: dict, self_pid: int) -> bytes:
    """A classic-BPF filter: every jump below lands inside its own block or just past it."""
    ops = [_op(LD_ABS, 4), _op(JEQ, arch["audit"], 1, 0), _op(RET, KILL_PROCESS), _op(LD_ABS, 0)]
    if arch["x32_bit"] is not None:
        ops += [_op(JGE, arch["x32_bit"], 0, 1), _op(RET, EPERM)]
    for number in arch["deny"]:
        ops += [_op(JEQ, number, 0, 1), _op(RET, EPERM)]
    ops += [_op(JEQ, arch["clone3"], 0, 1), _op(RET, ENOSYS)]  # glibc falls back to clone
    ops += [
        _op(JEQ, arch["clone"], 0, 4),
        _op(LD_ABS, _arg(0)),
        _op(JSET, CLONE_THREAD, 0, 1),
        _op(RET, ALLOW),
        _op(RET, EPERM),
    ]
    ops += [
        _op(JEQ, arch["fcntl"], 0, 6),
        _op(LD_ABS, _arg(1)),
        _op(JEQ, F_SETOWN, 3, 0),
        _op(JEQ, F_SETSIG, 2, 0),
        _op(JEQ, F_SETOWN_EX, 1, 0),
        _op(RET, ALLOW),
        _op(RET, EPERM),
    ]
    for number, (index, zero_is_self) in arch["self_only"].items():
        ops += [
            _op(JEQ, number, 0, 7),
            _op(LD_ABS, _arg(index, high=True)),
            _op(JEQ, 0, 0, 4),
            _op(LD_ABS, _arg(index)),
            _op(JEQ, self_pid, 1, 0),
            _op(JEQ, 0 if zero_is_self else self_pid, 0, 1),
            _op(RET, ALLOW),
            _op(RET, EPERM),
        ]
    ops.append(_op(RET, ALLOW))
    return b"".join(ops)


def confine() -> None:
    """Runs in each kernel's process between fork and exec: its own process group, and the
    seccomp filter (inherited by every thread, kept across exec)."""
    os.setpgid(0, 0)
    arch = ARCHES.get(os.uname().machine)
    if arch is None:
        return
    code = seccomp_program(arch, os.getpid())
    buffer = ctypes.create_string_buffer(code, len(code))
    program = SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the seccomp filter")


class CallFailed(Exception):
    """A kernel did not complete a call: it died, broke the protocol or ran past the limit."""

    def __init__(self, kind: str, program: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.program = kind, program


class Arena:
    """The one shared memory file every kernel computes in, inputs first, then the output.

    One for all, so the candidate and the seed read and write the same physical pages: a
    kernel whose speed depends on where its data lands in the caches (the textbook matmul
    does) is not timed faster or slower for the pages it happened to get. Sharing it is safe
    because a kernel only runs while every other is stopped, and the timer rewrites the
    inputs and poisons the output before every call.
    """

    def __init__(self, input_bytes: int, output_bytes: int) -> None:
        self.input_bytes, self.output_bytes = input_bytes, output_bytes
        self.output_at = (input_bytes + PAGE - 1) // PAGE * PAGE
        size = self.output_at + output_bytes
        self.fd = os.memfd_create("evolve-arena", os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, size)
        # A kernel holds this fd: sealed, it cannot shrink the file under the timer's or the
        # seed's mapping (a SIGBUS there would be blamed on them).
        fcntl.fcntl(
            self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        )
        self.memory = mmap.mmap(self.fd, size)
        self.poison = b"\xff" * output_bytes  # NaN in float32 and float64

    def load(self, data: bytes) -> None:
        self.memory[: self.input_bytes] = data
        self.memory[self.output_at : self.output_at + self.output_bytes] = self.poison

    def output(self) -> bytes:
        return self.memory[self.output_at : self.output_at + self.output_bytes]


class Kernel:
    """One kernel process, stopped whenever it is not inside its own call."""

    @staticmethod
    def log_name(name: str) -> str:
        """The file in the work dir that holds the kernel's stderr."""
        return f"kernel-{name}.log"

    def __init__(self, name: str, argv: list[str], arena: Arena) -> None:
        self.name = name
        self.arena = arena
        go_read, self.go = os.pipe()
        self.done, done_write = os.pipe()
        self.log_path = self.log_name(name)
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.pid = os.fork()
        if self.pid == 0:
            self._exec(argv, go_read, done_write, log)
        for fd in (go_read, done_write, log):
            os.close(fd)
        self.clock = _cpu_clock(self.pid)
        try:
            self._await_answer(b"r", None, "start-up")
        except CallFailed as failure:  # the run never lists this kernel: keep its last words
            raise CallFailed(
                failure.kind, self.name, f"{failure}\n{self.log_tail()}".strip()
            ) from None
        self._stop()

    def _exec(self, argv: list[str], go_read: int, done_write: int, log: int) -> None:
        """The child: fds 3-5 as the driver expects, the log as stdout and stderr, confined."""
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            # Above every target first, so that no dup2 below closes a source still needed.
            moved = [
                fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (self.arena.fd, go_read, done_write)
            ]
            for target, fd in zip((SHARED_FD, GO_FD, DONE_FD), moved, strict=True):
                os.dup2(fd, target)
            os.closerange(DONE_FD + 1, 1 << 16)
            confine()
            os.execv(argv[0], argv)
        except BaseException as exc:  # nothing may return into the timer's code
            os.write(2, f"timer: cannot start {argv[0]}: {exc}\n".encode())
        os._exit(127)

    def call(self, data: bytes, limit_s: float | None) -> tuple[float, float, bytes]:
        """Wall seconds and CPU seconds for one call on `data`, and its output copied while
        the kernel is stopped. The CPU time is Linux's account of every thread of the
        kernel's process, read while it is stopped, so it holds exactly this call."""
        self.arena.load(data)
        cpu_before = time.clock_gettime_ns(self.clock)
        started = time.perf_counter_ns()
        os.kill(self.pid, signal.SIGCONT)
        os.write(self.go, b"c")
        self._await_answer(b"d", None if limit_s is None else started / 1e9 + limit_s, "a call")
        seconds = (time.perf_counter_ns() - started) / 1e9
        self._stop()
        cpu_seconds = (time.clock_gettime_ns(self.clock) - cpu_before) / 1e9
        return seconds, cpu_seconds, self.arena.output()

    def _await_answer(self, expected: bytes, deadline: float | None, doing: str) -> None:
        while True:
            timeout = None if deadline is None else deadline - time.perf_counter()
            if timeout is not None and timeout <= 0:
                self.kill()
                raise CallFailed("gave_up", self.name, f"{self.name}: {doing} ran past its limit")
            ready, _, _ = select.select([self.done], [], [], timeout)
            if ready:
                break
        byte = os.read(self.done, 1)
        if byte == expected:
            return
        if not byte:
            raise CallFailed("died", self.name, f"{self.name} died during {doing}: {self.kill()}")
        self.kill()
        raise CallFailed(
            "protocol",
            self.name,
            f"{self.name} answered {byte!r} instead of {expected!r} during {doing} "
            "(did the kernel process re-execute itself or write to the driver's pipe?)",
        )

    def _stop(self) -> None:
        """Stop every thread of the kernel, and wait until the kernel says it is stopped."""
        os.kill(self.pid, signal.SIGSTOP)
        info = os.waitid(os.P_PID, self.pid, os.WSTOPPED | os.WEXITED)
        if info is None or info.si_code != os.CLD_STOPPED:
            raise CallFailed("died", self.name, f"{self.name} died when stopped: {_how(info)}")

    def quit(self) -> None:
        """Let the kernel exit as a program does (its atexit handlers run, so whatever they
        write is seen by the file check), killing it if it lingers."""
        if self.pid <= 0:
            return
        with contextlib.suppress(OSError):
            watch = os.pidfd_open(self.pid)
            os.kill(self.pid, signal.SIGCONT)
            os.write(self.go, b"q")
            select.select([watch], [], [], QUIT_GRACE_S)
            os.close(watch)
        self.kill()

    def kill(self) -> str:
        """Kill and reap the kernel; how it ended, for the report."""
        if self.pid <= 0:
            return "already reaped"
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        info = os.waitid(os.P_PID, self.pid, os.WEXITED)
        self.pid = -1
        return _how(info)

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - LOG_TAIL))
                return log.read().decode(errors="replace")
        except OSError:
            return ""


def _cpu_clock(pid: int) -> int:
    """The clock of a process's CPU time, all its threads summed, kept by the kernel."""
    clock = ctypes.c_int()
    error = _libc.clock_getcpuclockid(pid, ctypes.byref(clock))
    if error:
        raise OSError(error, f"clock_getcpuclockid({pid})")
    return clock.value


def _how(info: os.waitid_result | None) -> str:
    if info is None:
        return "no status"
    if info.si_code == os.CLD_EXITED:
        return f"exited with code {info.si_status}"
    try:
        name = signal.Signals(info.si_status).name
    except ValueError:
        name = "?"
    return f"killed by signal {info.si_status} ({name})"


def _snapshot(roots: list[str], skip: set[str]) -> dict[str, tuple[int, ...]]:
    """Every entry under `roots`, links not followed, by path: its inode, mode, size,
    modification time and change time (which no process can set back, as it can the
    modification time); at most about WATCH_CAP entries, a cap no honest kernel meets."""
    seen: dict[str, tuple[int, ...]] = {}
    folders = list(roots)
    while folders and len(seen) < WATCH_CAP:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.path in skip:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            seen[entry.path] = (
                st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns
            )  # fmt: skip
            if stat.S_ISDIR(st.st_mode):
                folders.append(entry.path)
    return seen


def _changes(before: dict, after: dict) -> list[str]:
    """What differs between two snapshots, as "created PATH", "removed PATH", "changed PATH"."""
    created = [f"created {path}" for path in sorted(after.keys() - before.keys())]
    removed = [f"removed {path}" for path in sorted(before.keys() - after.keys())]
    changed = [
        f"changed {path}" for path in sorted(before.keys() & after.keys())
        if before[path] != after[path]
    ]  # fmt: skip
    return created + removed + changed


def _watch_files(watched: list[str], skip: set[str], before: dict, when: str, program: str) -> None:
    """CallFailed naming the files a kernel created, removed or changed, if it did."""
    changes = _changes(before, _snapshot(watched, skip))
    if changes:
        shown = ", ".join(changes[:MAX_CHANGES_NAMED])
        if len(changes) > MAX_CHANGES_NAMED:
            shown += f" and {len(changes) - MAX_CHANGES_NAMED} more"
        raise CallFailed("files", program, f"{when} the files changed: {shown}")


def run(spec: dict, inputs: bytes) -> dict:
    size_in, size_out = spec["input_bytes"], spec["output_bytes"]
    kernels: dict[str, Kernel] = {}
    calls: list[dict] = []
    outputs: list[bytes] = []
    report: dict = {"calls": calls, "failure": None, "confined": os.uname().machine in ARCHES}
    watched = [".", *SCRATCH] if spec["watch_scratch"] else ["."]
    logs = {os.path.join(".", Kernel.log_name(name)) for name in spec["start_order"]}
    skipped = {*logs, os.path.realpath(".")}  # the work dir, seen again from /tmp: once is enough
    try:
        arena = Arena(size_in, size_out)
        before = _snapshot(watched, skipped)  # before any kernel runs: constructors run at start
        for name in spec["start_order"]:
            kernels[name] = Kernel(name, spec["programs"][name], arena)
        _watch_files(watched, skipped, before, "as the kernels started,", "candidate")
        limit_s = None
        for program, index, pair in spec["schedule"]:
            data = inputs[index * size_in : (index + 1) * size_in]
            limit = limit_s if program == "candidate" else None
            seconds, cpu_seconds, output = kernels[program].call(data, limit)
            _watch_files(watched, skipped, before, f"during {program}'s timed call,", program)
            calls.append(
                {
                    "program": program,
                    "set": index,
                    "pair": pair,
                    "seconds": seconds,
                    "cpu_seconds": cpu_seconds,
                    "sha256": hashlib.sha256(output).hexdigest(),
                }
            )
            outputs.append(output)
            if program == "reference" and pair is None and spec["give_up"]:
                limit_s = max(spec["give_up"]["floor_s"], spec["give_up"]["factor"] * seconds)
                report["limit_s"] = limit_s
        for kernel in kernels.values():
            kernel.quit()
        _watch_files(watched, skipped, before, "as the kernels ended,", "candidate")
    except CallFailed as failure:
        report["failure"] = {
            "kind": failure.kind,
            "program": failure.program,
            "message": str(failure),
            "call": len(calls),
        }
    finally:
        for kernel in kernels.values():
            kernel.kill()
    report["logs"] = {name: kernel.log_tail() for name, kernel in kernels.items()}
    with open("outputs.bin", "wb") as out:
        for output in outputs:
            out.write(output)
    return report


def main() -> None:
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    with open("timing.json", "rb") as f:
        spec = json.load(f)
    with open("inputs.bin", "rb") as f:
        inputs = f.read()
    os.unlink("inputs.bin")  # no kernel may read a later call's inputs ahead of time
    os.unlink("timing.json")
    json.dump(run(spec, inputs), sys.stdout)


if __name__ == "__main__":
    main()
