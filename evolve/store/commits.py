"""Turns committed on a thread of their own, in the order they ended (on a database server).

A turn's writes and COMMIT go to the server in one round trip (evolve/store/pipeline.py),
but the server's work on them and the trip back are a large share of a turn's end, with
the driver idle if it waits. Handed to this thread, the commit goes on while the engine
takes the next results.

What the engine sees does not change:
- Turns commit one at a time, in the order they ended, each all or nothing: a turn's rows
  may name the one before's. One is in flight at most: a turn's end waits for the one
  before it, so a slow server holds the engine up, instead of piling up turns that each
  hold a connection.
- The thread that ended the turns waits for the commit in flight before its connection
  runs any statement, in a turn or outside one (`wait`), so it reads everything it wrote.
  Until then nothing waits: a turn's deferred writes (evolve/store/deferred.py) need no
  statement.
- Other threads never wait: to them the driver's turns are another process's, visible once
  committed. (A thread waiting here while its own transaction held a row that the commit
  needed would wait for ever.) Other processes that must find a turn's rows (the model
  calls a proposal's workers write under its row) are sent their work once it is committed:
  the engine calls `wait` first.
- A commit that fails is raised in the thread that ended the turn, once: at its next
  statement, or at the end of its next turn, which is then rolled back. The store holds
  every turn before the failure, as after a crash, and `--resume` redoes the rest.

A crash (kill -9) can lose the turn whose commit had not reached the server yet, as well
as the turn in progress; `--resume` redoes both. A COMMIT that has reached the server goes
through even if the driver dies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

log = logging.getLogger(__name__)
INTERRUPTIBLE_S = 0.1  # how long a wait for a commit may not hear an interrupt


class Commits:
    """The commits of one store's turns, on a thread of their own, started with the first."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._last: Future[None] | None = None
        self._owner: int | None = None  # the thread that hands turns over, and is told
        self._failure: Exception | None = None  # not yet raised in the owner

    def hand_over(self, commit: Callable[[], None]) -> None:
        """The turn's end, done on the committing thread; the caller has waited for the one
        before (`wait`)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="evolve-commit")
        self._owner = threading.get_ident()
        self._last = self._executor.submit(self._end, commit)

    def wait(self) -> None:
        """In the owner's thread: once the turn it handed over is committed, or raise the
        error its commit failed with (once). Anywhere else, at once."""
        if self._last is None or threading.get_ident() != self._owner:
            return
        while not self._last.done():
            # In slices: the lease's heartbeat stops a driver that lost its run with
            # `interrupt_main`, which reaches the thread only between slices.
            wait([self._last], timeout=INTERRUPTIBLE_S)
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def close(self) -> None:
        """The commit in flight goes through first (its failure is raised in the owner), and
        the thread ends; a store used after `close` (as a disposed engine may be) starts
        another."""
        executor, self._executor = self._executor, None
        try:
            self.wait()
        finally:
            if executor is not None:
                executor.shutdown(wait=True)

    def _end(self, commit: Callable[[], None]) -> None:
        try:
            commit()
        except Exception as error:
            log.error("a turn's commit failed", exc_info=True)
            self._failure = error
