"""Stands in for one of the two agents a raylet starts, in a lean local instance.

A raylet starts a dashboard agent and a runtime-env agent, and waits until each has written
the ports it serves into the session directory. In Ray as evolve installs it (without the
dashboard's dependencies), the dashboard agent serves nothing a run uses and writes -1
("not served") for its ports; the runtime-env agent serves only runtime environments, which
evolve never asks for (evolve/lean_ray.py says when the real ones start instead). Each is
still a Python process that imports Ray, 80-88 MB, at every start. This program writes
"-1" for every port and then only waits, as an agent does, for its raylet to end: a raylet
whose agent exits ends too.

It imports nothing beyond the standard library's core, and runs with `-I -S`, so it starts
in milliseconds and holds about 9 MB. Run as `python -I -S ray_agent_stand_in.py FILE...`,
where each FILE is a port file the raylet waits for (evolve/lean_ray.py names them).
"""

from __future__ import annotations

import os
import sys
import time

NOT_SERVED = "-1"  # what Ray's own agents write for a port they do not serve
PARENT_POLL_S = 1.0  # how soon the stand-in notices its raylet is gone


def write_port_files(paths: list[str]) -> None:
    """Each file appears whole: the raylet may read it the moment it exists."""
    for path in paths:
        partial = f"{path}.partial"
        with open(partial, "w") as handle:
            handle.write(NOT_SERVED)
        os.replace(partial, path)


def raylet_pid() -> int:
    """The raylet names itself in its agents' environment, as Ray's own agents read it: a
    raylet killed before this process had looked would otherwise leave it waiting on the
    process that adopted it, for ever."""
    named = os.environ.get("RAY_RAYLET_PID", "")
    return int(named) if named.isdigit() else os.getppid()


def wait_for_parent_to_end(parent: int) -> None:
    """A raylet killed with SIGKILL cannot stop its agents: the stand-in sees itself
    adopted by another process and ends."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)


def main(paths: list[str]) -> None:
    parent = raylet_pid()
    if os.getppid() != parent:
        return  # its raylet is gone already
    write_port_files(paths)
    wait_for_parent_to_end(parent)


if __name__ == "__main__":
    main(sys.argv[1:])
