"""Slots handed out in the order they were asked for, until the run stops.

A proposal worker's waiting proposals take model slots as replies free them. With a plain
semaphore, a proposal that arrived just as a slot was freed could take it ahead of one
that had waited a whole reply already, which then waited another: its parent and prompt,
chosen when it was sent, grew older still. Here a freed slot goes to the longest waiter.
Once the run stops (`close`), no waiting proposal takes a slot: each would make a model
call that is paid for and then thrown away, and hold the run's end up by a reply.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class SlotsClosed(Exception):
    """The run stopped before this proposal had a slot."""


class _Waiter:
    def __init__(self) -> None:
        self.turn = threading.Lock()
        self.turn.acquire()
        self.granted = False


class FairSlots:
    """`with slots:` holds one of `count` slots for the block, or raises SlotsClosed."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.waiting: deque[_Waiter] = deque()
        self.closed = False
        self.lock = threading.Lock()

    def __enter__(self) -> None:
        with self.lock:
            if self.closed:
                raise SlotsClosed
            if self.free and not self.waiting:
                self.free -= 1
                return
            waiter = _Waiter()
            self.waiting.append(waiter)
        waiter.turn.acquire()  # released by a holder handing its slot on, or by `close`
        if not waiter.granted:
            raise SlotsClosed

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self.lock:
            if self.waiting:
                waiter = self.waiting.popleft()
                waiter.granted = True  # the slot passes on, never freed
                waiter.turn.release()
            else:
                self.free += 1

    def close(self) -> None:
        """Turn away every proposal waiting for a slot, and every later one."""
        with self.lock:
            self.closed = True
            while self.waiting:
                self.waiting.popleft().turn.release()
