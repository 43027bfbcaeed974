"""Pid 1 of a process-backend job's PID namespace: run the job, and when it exits, name what
it left, kill it, and report how the job ended.

Stdlib only, with as few imports as can be, because it starts once per job (bubblewrap runs
it with this Python, `-I -S`): every module imported here is paid on every job. As init it
ignores every signal the job can send, inherits every orphan, and takes the namespace down
with it when it exits, so nothing the job starts outlives it. Its report goes to a pipe that
the job never holds, as JSON: {exit_code, signal, left_behind} or {errno, error}.

Usage: python3 -I -S namespace_init.py REPORT_FD -- ARGV...
"""

import ctypes
import json
import os
import signal
import sys

PR_SET_DUMPABLE = 4
MAX_NAMED = 16  # as evolve/sandboxes/supervise.py: leftovers named in a report; the rest counted


def main(report_fd: int, argv: list[str]) -> None:
    if os.getpid() != 1:  # anywhere else, the sweep's kill(-1) would reach the whole host
        raise SystemExit("namespace_init runs only as pid 1 of a fresh PID namespace")
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace, no /proc/1/fd for the job
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python's handler would let the job stop us
    os.set_inheritable(report_fd, False)
    try:
        job = os.posix_spawnp(  # with the signal dispositions a shell would give it
            argv[0],
            argv,
            os.environ,
            setsigdef=signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP},
            setsigmask=(),
        )
    except OSError as exc:
        report(report_fd, {"errno": exc.errno, "error": f"{exc.strerror}: {argv[0]!r}"})
        return
    while True:
        pid, status = os.wait()  # orphans are reaped too, as they die
        if pid == job:
            break
    left = survivors()
    try:  # noqa: SIM105 -- contextlib would be one more import on every job
        os.kill(-1, signal.SIGKILL)  # from init: exactly the rest of the namespace
    except ProcessLookupError:
        pass
    code = os.waitstatus_to_exitcode(status)
    if len(left) > MAX_NAMED:
        left = [*left[:MAX_NAMED], f"and {len(left) - MAX_NAMED} more"]
    report(
        report_fd,
        {
            "exit_code": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
            "left_behind": left,
        },
    )


def survivors() -> list[str]:
    """Every live process of the namespace but init, as "PID (name)"; zombies are dead."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == "1":
            continue
        try:
            with open(f"/proc/{entry}/stat", errors="replace") as handle:  # names are any bytes
                name, _, rest = handle.read().partition(" (")[2].rpartition(") ")
        except OSError:  # it exited while we looked
            continue
        if rest[:1] not in ("Z", "X") or _threads_live(entry):
            found.append(f"{entry} ({name})")
    return found


def _threads_live(pid: str) -> bool:
    """A leader that exited while its threads run on looks dead (state Z); it is not."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def report(fd: int, message: object) -> None:
    os.write(fd, json.dumps(message).encode())
    os.close(fd)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[3:])
