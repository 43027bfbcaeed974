"""Model slots in a proposal worker go to waiting proposals in the order they came."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from evolve.engine.fair_slots import FairSlots, SlotsClosed


def _wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_at_most_count_hold_slots_and_a_freed_slot_goes_to_the_longest_waiter() -> None:
    slots = FairSlots(2)
    order: list[str] = []
    holding = 0
    most = 0
    lock = threading.Lock()
    release = {name: threading.Event() for name in "abcde"}

    def work(name: str) -> None:
        nonlocal holding, most
        with slots:
            with lock:
                order.append(name)
                holding += 1
                most = max(most, holding)
            release[name].wait(10)
            with lock:
                holding -= 1

    threads = {}
    started = {"a": (1, 0), "b": (2, 0), "c": (2, 1), "d": (2, 2)}  # holding, waiting
    for name, (held, waiting) in started.items():  # a and b take the slots; c, then d, wait
        threads[name] = threading.Thread(target=work, args=(name,))
        threads[name].start()
        _wait_until(lambda h=held, w=waiting: (len(order), len(slots.waiting)) == (h, w))
    assert order == ["a", "b"]
    release["a"].set()
    threads["a"].join(10)
    # A newcomer arriving now finds the freed slot already handed to c, and queues behind d.
    threads["e"] = threading.Thread(target=work, args=("e",))
    threads["e"].start()
    _wait_until(lambda: len(order) == 3 and len(slots.waiting) == 2)
    assert order == ["a", "b", "c"]
    release["b"].set()
    _wait_until(lambda: len(order) == 4)
    for name in "cde":
        release[name].set()
    for thread in threads.values():
        thread.join(10)
    assert order == ["a", "b", "c", "d", "e"]
    assert most == 2
    assert slots.free == 2 and not slots.waiting


def test_a_slot_is_given_back_when_its_holder_raises() -> None:
    slots = FairSlots(1)
    try:
        with slots:
            raise RuntimeError("the proposal failed")
    except RuntimeError:
        pass
    got = threading.Event()

    def take() -> None:
        with slots:
            got.set()

    threading.Thread(target=take).start()
    assert got.wait(10)


def test_closing_turns_away_the_waiting_and_the_later_but_not_the_holders() -> None:
    slots = FairSlots(1)
    outcomes: list[str] = []

    def wait_for_a_slot() -> None:
        try:
            with slots:
                outcomes.append("ran")
        except SlotsClosed:
            outcomes.append("turned away")

    with slots:  # the holder keeps its slot through the close
        waiters = [threading.Thread(target=wait_for_a_slot) for _ in range(2)]
        for waiter in waiters:
            waiter.start()
        _wait_until(lambda: len(slots.waiting) == 2)
        slots.close()
        for waiter in waiters:
            waiter.join(10)
        assert outcomes == ["turned away", "turned away"]
    with pytest.raises(SlotsClosed), slots:
        pass
    assert slots.free == 1 and not slots.waiting
