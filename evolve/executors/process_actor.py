"""An actor in a child process of the driver: how the local executor runs an evaluation
worker (evolve/executors/local.py).

The child is a fresh interpreter (`python -m evolve.executors.actor_process`), started with
the secrets out of its environment (evolve/plugin/secrets.py), in a session of its own (a Ctrl-C
at the terminal is the driver's to handle, not every worker's), and it dies with the driver
(evolve/executors/actor_process.py). The two speak over a socket pair through
multiprocessing's Connection: the first message is the driver's module path, the second
builds the actor (its class and arguments, pickled by cloudpickle), each later one is a
call, answered in the order it was sent. A reader thread in the driver settles each
call's future with its answer; when the child ends (killed, crashed, or lost to the
kernel's OOM killer) every call it had not answered ends WorkerLost, which says where what
the child printed is kept.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Collection
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import cloudpickle

from evolve.executors import Actor, WorkerLost
from evolve.plugin.secrets import environment_without

log = logging.getLogger("evolve.executors")

ACTOR_PROCESS = "evolve.executors.actor_process"


class ProcessActor(Actor):
    def __init__(
        self,
        name: str,
        cls: type,
        args: tuple[Any, ...],
        log_file: Path,
        withhold: Collection[str] = (),
    ) -> None:
        """An instance of `cls` built from `args` in a new child process, which prints to
        `log_file` and whose environment has neither the secrets nor `withhold`."""
        self.name, self.log_file = name, log_file
        ours, theirs = socket.socketpair()
        with open(log_file, "ab") as printed:
            self.process = subprocess.Popen(
                [sys.executable, "-m", ACTOR_PROCESS, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                env=environment_without(withhold),
                stdin=subprocess.DEVNULL,
                stdout=printed,
                stderr=printed,
                start_new_session=True,
            )
        theirs.close()
        self.connection = Connection(ours.detach())
        self.calls: dict[int, Future[Any]] = {}
        self.numbers = itertools.count()
        self.lock = threading.Lock()
        self.gone: str | None = None  # why, once the child has ended
        self.killed = False
        # Where the driver finds modules first: the actor's class and arguments may come
        # from one that the child's own path lacks (a test's, a folder added at run time).
        # A child that died at once: the reader thread says so.
        with contextlib.suppress(OSError):
            self.connection.send_bytes(cloudpickle.dumps(list(sys.path)))
            self.connection.send_bytes(cloudpickle.dumps((cls, args)))
        threading.Thread(target=self._answers, name=f"{name}-answers", daemon=True).start()

    def call(self, method: str, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self.lock:
            if self.gone is not None:
                future.set_exception(WorkerLost(self.gone))
                return future
            number = next(self.numbers)
            self.calls[number] = future
            # A child that is gone already: the reader thread settles the call.
            with contextlib.suppress(OSError):
                self.connection.send_bytes(cloudpickle.dumps((number, method, args)))
        return future

    def kill(self) -> None:
        self.killed = True
        self.process.kill()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _answers(self) -> None:
        while True:
            try:
                number, ok, value = cloudpickle.loads(self.connection.recv_bytes())
            except (EOFError, OSError):
                break
            with self.lock:
                future = self.calls.pop(number)
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        code = self.process.wait()
        why = f"{self.name} was stopped"
        if not self.killed:
            why = f"{self.name} ended (exit code {code}; what it printed: {self.log_file})"
        log.log(logging.INFO if self.killed else logging.WARNING, "%s", why)
        with self.lock:
            self.gone = why
            unanswered, self.calls = self.calls, {}
        self.connection.close()
        for future in unanswered.values():
            future.set_exception(WorkerLost(why))
