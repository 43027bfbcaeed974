"""A small process that outlives the driver, to clean up after it however it ends.

Killed with `kill -9`, a driver cleans up nothing. A local run's evaluation workers die with
it (evolve/executors/actor_process.py), as do a local Ray instance's head processes (Ray
asks the kernel for that), but Ray's workers die only once they notice their raylet is
gone, a worker stopped by a candidate never does, and a Docker container outlives its
worker anyway. So beside its workers the driver starts this guardian, in a session of its
own (a Ctrl-C or a hang-up aimed at the driver's terminal does not reach it) and without
the secrets in its environment. It waits on a pidfd for the driver to end, then kills every
process of the driver's Ray instance, if it had one, and removes the containers that the
workers owned (evolve/runtime/orphans.py), and exits. After a clean stop it finds nothing
left to do.

Run as `python -m evolve.runtime.guardian DRIVER_PID DRIVER_START SESSION_DIR`, SESSION_DIR
being the Ray instance's session directory, or `-` (LOCAL) for a run without Ray.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterable

from evolve.plugin.secrets import environment_without
from evolve.runtime.orphans import clean_up, reap_sandboxes
from evolve.runtime.processes import ProcessId, start_time

LOCAL = "-"  # the session of a run without Ray


def start(session: str, withhold: Iterable[str] = ()) -> subprocess.Popen[bytes]:
    """Start a guardian for this process and its Ray instance, whose session directory is
    `session` (LOCAL: a run without Ray), with neither the secrets nor `withhold` (the
    task's model keys) in its environment."""
    driver = ProcessId.here()
    arguments = (str(driver.pid), str(driver.started), session)
    return subprocess.Popen(
        [sys.executable, "-m", "evolve.runtime.guardian", *arguments],
        env=environment_without(withhold),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # never hold the driver's pipes open: readers would wait
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(pid: int, started: int) -> None:
    """Return once the process `pid` that started at `started` has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if start_time(pid) == started:
            select.select([fd], [], [])
    finally:
        os.close(fd)


def main(argv: list[str]) -> None:
    driver, started, session = argv
    wait_for(int(driver), int(started))
    if session == LOCAL:
        reap_sandboxes()
    else:
        clean_up(session)


if __name__ == "__main__":
    main(sys.argv[1:])
