"""The child's side of evolve/executors/process_actor.py: take the driver's module path from
the first message and build the actor from the second, then answer each call in turn,
until the driver closes its end or dies.

Run as `python -m evolve.executors.actor_process FD DRIVER_PID`, FD being the child's end
of the socket pair. The kernel kills the child when the driver dies (PR_SET_PDEATHSIG;
strictly, when the driver's thread that started it ends: the thread that runs the loop),
so that a driver killed with SIGKILL leaves no worker behind; what a worker's sandbox
leaves (a container) is removed by the guardian (evolve/runtime/guardian.py).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection

import cloudpickle

PR_SET_PDEATHSIG = 1


def serve(connection: Connection) -> None:
    driver_path = cloudpickle.loads(connection.recv_bytes())
    sys.path[:0] = [entry for entry in driver_path if entry not in sys.path]
    cls, args = cloudpickle.loads(connection.recv_bytes())
    actor = cls(*args)
    while True:
        try:
            number, method, call_args = cloudpickle.loads(connection.recv_bytes())
        except EOFError:
            return
        try:
            answer = (number, True, getattr(actor, method)(*call_args))
        except Exception as exc:  # the caller's to judge, as a Ray actor's would be
            exc.add_note(traceback.format_exc())
            answer = (number, False, exc)
        try:
            message = cloudpickle.dumps(answer)
        except Exception as exc:
            message = cloudpickle.dumps((number, False, RuntimeError(f"unpicklable answer: {exc}")))
        connection.send_bytes(message)


def main(argv: list[str]) -> None:
    fd, driver = (int(arg) for arg in argv)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != driver:  # the driver died before prctl took effect
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    serve(Connection(fd))


if __name__ == "__main__":
    main(sys.argv[1:])
