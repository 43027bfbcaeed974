"""Slots handed out in the order they were asked for.

A proposal worker's waiting proposals take model slots as replies free them. With a plain
semaphore, a proposal that arrived just as a slot was freed could take it ahead of one
that had waited a whole reply already, which then waited another: its parent and prompt,
chosen when it was sent, grew older still. Here a freed slot goes to the longest waiter.
"""

from __future__ import annotations

import threading
from collections import deque
from types import TracebackType


class FairSlots:
    """`with slots:` holds one of `count` slots for the block."""

    def __init__(self, count: int) -> None:
        self.free = count
        self.waiting: deque[threading.Lock] = deque()
        self.lock = threading.Lock()

    def __enter__(self) -> None:
        with self.lock:
            if self.free and not self.waiting:
                self.free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self.waiting.append(turn)
        turn.acquire()  # released by the holder that hands this waiter its slot

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self.lock:
            if self.waiting:
                self.waiting.popleft().release()  # the slot passes on, never freed
            else:
                self.free += 1
