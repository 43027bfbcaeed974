"""Turns committed on a thread of their own on PostgreSQL (evolve/store/commits.py): the
engine goes on as its turn commits, and must still read everything it wrote, see its
turns committed in order, all or nothing, and hear of a failed commit. A lock held on a
table holds a turn's commit back, so each test knows what is still in flight."""

from __future__ import annotations

import _thread
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from evolve.store import Opening, Settlement, Store
from tests.helpers.stores import evaluate, new_child, opened, program, raw_engine, stored_ids

pytestmark = pytest.mark.postgres
T = TypeVar("T")
HELD_AT_MOST_S = 60  # the lock goes in any case, so that a turn that waits fails, not hangs


@contextmanager
def locked(
    url: str, table: str = "evaluations", at_most_s: float = HELD_AT_MOST_S
) -> Iterator[threading.Event]:
    """No other transaction writes to `table` until the block ends, or for `at_most_s`;
    the event is set if the lock was let go before the block ended."""
    holding, done, released = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        engine = raw_engine(url)
        with engine.begin() as connection:
            connection.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            holding.set()
            if not done.wait(at_most_s):
                released.set()
        engine.dispose()

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(HELD_AT_MOST_S)
    try:
        yield released
    finally:
        done.set()
        holder.join()


def in_another_thread(call: Callable[[], T]) -> T:
    found: list[T] = []
    thread = threading.Thread(target=lambda: found.append(call()))
    thread.start()
    thread.join(HELD_AT_MOST_S)
    assert found, "the other thread waited for the turn's commit"
    return found[0]


def test_a_turn_ends_before_it_commits_and_its_thread_reads_it_once_committed(
    postgres_url: str,
) -> None:
    store = opened(postgres_url)
    seed = store.plant_seed("run-1", program(0))
    with locked(postgres_url) as released:
        with store.turn():
            child = new_child(store, 1, seed)
            evaluate(store, child, 4.0)
        assert not released.is_set(), "the turn's end waited for its commit"
        # Other threads do not wait: they see what is committed, as another process would.
        assert in_another_thread(lambda: store.candidate(child.id)) is None
        assert not released.is_set()
    # The turn's own thread waits for the commit at its next statement, and reads it all.
    record = store.candidate(child.id)
    assert record is not None and (record.status, record.score) == ("ok", 4.0)
    assert [e.candidate_id for e in store.evaluations(child.id)] == [child.id]
    store.close()


def test_a_failed_commit_is_raised_once_in_its_thread_at_its_next_statement(
    postgres_url: str,
) -> None:
    store = opened(postgres_url)
    seed = store.plant_seed("run-1", program(0))
    ghost = replace(seed, id=10**6)  # no such row: its evaluation fails at the commit
    with locked(postgres_url):
        with store.turn():
            first = new_child(store, 1, seed)
            evaluate(store, ghost, 1.0)
        assert in_another_thread(lambda: store.count_candidates("run-1")) == 1
    with pytest.raises(IntegrityError, match="evaluations"):
        store.count_candidates("run-1")
    # Raised once: the store goes on, without the failed turn.
    assert stored_ids(postgres_url) == [seed.id]
    assert store.candidate(first.id) is None
    with store.turn():
        second = new_child(store, 2, seed)
        evaluate(store, second, 2.0)
    assert store.candidate(second.id).score == 2.0  # type: ignore[union-attr]
    assert stored_ids(postgres_url) == [seed.id, second.id]
    store.close()


def test_a_failed_commit_heard_at_the_next_turns_end_rolls_that_turn_back(
    postgres_url: str,
) -> None:
    """A turn of deferred writes runs no statement before its end; the failure before it
    is raised there, and the turn is not committed on top of it."""
    store = opened(postgres_url)
    seed = store.plant_seed("run-1", program(0))
    with store.turn():
        evaluate(store, replace(seed, id=10**6), 1.0)
    with pytest.raises(IntegrityError, match="evaluations"), store.turn():
        evaluate(store, seed, 2.0)
    assert store.evaluations(seed.id) == []
    with store.turn():
        evaluate(store, seed, 3.0)
    assert store.candidate(seed.id).score == 3.0  # type: ignore[union-attr]
    store.close()


def test_one_turn_is_in_flight_at_most(postgres_url: str) -> None:
    """While a commit is held up, the next turn's end waits for it, rather than the turns
    piling up, each holding one of the pool's connections (the pool held 15: a run of
    turns behind a slow commit failed, out of connections)."""
    store = opened(postgres_url)
    seed = store.plant_seed("run-1", program(0))
    with locked(postgres_url, at_most_s=3.0) as released:
        with store.turn():
            evaluate(store, seed, 1.0)
        assert not released.is_set()
        with store.turn():
            evaluate(store, seed, 2.0)
        assert released.is_set(), "the second turn ended with the first still in flight"
    store.close()


def test_turns_commit_in_the_order_they_ended(postgres_url: str) -> None:
    """Each turn evaluates the child the turn before added: were they committed out of
    order, an evaluation would name a candidate not yet there and fail."""
    store = opened(postgres_url)
    parent = store.plant_seed("run-1", program(0))
    for n in range(1, 60):
        with store.turn():
            evaluate(store, parent, float(n))
            parent = new_child(store, n, parent)
    assert store.count_candidates("run-1") == 60
    assert len(store.run_evaluations("run-1")) == 59
    store.close()


def test_closing_the_store_lets_its_turns_commit_first(postgres_url: str) -> None:
    store = opened(postgres_url)
    seed = store.plant_seed("run-1", program(0))
    with locked(postgres_url):
        with store.turn():
            evaluate(store, seed, 1.0)
        closing = threading.Thread(target=store.close)
        closing.start()
    closing.join(HELD_AT_MOST_S)
    with Store(postgres_url) as again:
        assert again.candidate(seed.id).score == 1.0  # type: ignore[union-attr]


def test_a_read_in_the_middle_of_a_turn_waits_for_the_turn_before(postgres_url: str) -> None:
    """The turn's writes that a read sends early follow the last turn's commit: sent
    before it, they would take ids (and row locks) ahead of the turn before. The turn
    before is held up at its proposal's row, ahead of its evaluation."""
    # Were they sent first, the turn before would wait for this turn's row lock and this
    # turn for its commit: the lock timeout makes that a failure instead of a hang.
    options = make_url(postgres_url).query["options"]
    store = opened(
        make_url(postgres_url)
        .update_query_dict({"options": f"{options} -clock_timeout=5s"})
        .render_as_string(hide_password=False)
    )
    seed = store.plant_seed("run-1", program(0))
    opening = Opening("run-1", "autotune", (seed.id,), 0)
    with locked(postgres_url, "proposals", at_most_s=3.0) as released:
        with store.turn():
            store.settle_proposal(Settlement(opening, "duplicate", detail="again"))
            evaluate(store, seed, 1.0)
        with store.turn():
            evaluate(store, seed, 2.0)
            assert store.evaluations(seed.id) != []  # a read: the turn's writes go first
            assert released.is_set()
    scores = [evaluation.score for evaluation in store.evaluations(seed.id)]
    assert scores == [1.0, 2.0]  # in the order of their ids
    store.close()


def test_a_wait_for_a_commit_hears_the_lease_stopping_the_driver(postgres_url: str) -> None:
    """The heartbeat stops a driver that lost its run with `interrupt_main`, which a wait
    without end would only hear once the commit came back (evolve/runtime/lease.py)."""
    store = opened(postgres_url)
    seed = store.plant_seed("run-1", program(0))
    with locked(postgres_url, at_most_s=10.0) as released:
        with store.turn():
            evaluate(store, seed, 1.0)
        # Started inside the block and cancelled after it: an interrupt that comes late, or
        # to a read that did not wait, must not end the whole session.
        timer = threading.Timer(0.2, _thread.interrupt_main)
        try:
            with pytest.raises(KeyboardInterrupt):
                timer.start()
                store.count_candidates("run-1")
        finally:
            timer.cancel()
        assert not released.is_set(), "the interrupt was heard only once the commit was back"
    assert store.candidate(seed.id).score == 1.0  # type: ignore[union-attr]
    store.close()
