"""A new candidate inside a turn (evolve/store/candidate_ids.py, evolve/store/pipeline.py):
on PostgreSQL its id is taken ahead and its row waits for the turn's end, where the turn's
writes, its BEGIN and its COMMIT go out together. Whatever waits, the store must read and
refer to the candidate as if it were written at once, keep a turn all or nothing, and
leave its connection as it found it after a failure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError, OperationalError

from evolve.engine.candidate_cache import CandidateCache
from evolve.llm.client import LLMCall
from evolve.store import (
    Opening,
    Settlement,
    cursor_statements,
    default_url,
)
from tests.conftest import postgres_schema
from tests.helpers.stores import (
    RUN,
    evaluate,
    new_child,
    opened,
    program,
    raw_engine,
    stored_ids,
)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield default_url(tmp_path)
        return
    with postgres_schema() as url:
        yield url


def test_a_new_childs_row_waits_for_the_turns_end_and_is_written_before_rows_naming_it(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL nothing goes to the server while the turn adds children and settles
    their proposals: everything goes at its end, the children's rows first, since the
    proposals' rows name them."""
    store = opened(postgres_url)
    seed = store.plant_seed(RUN, program(0))
    opening = Opening(RUN, "autotune", (seed.id,), 0)
    sent: list[str] = []
    real = cursor_statements._cursor

    def noted(connection: Connection, sql: str, parameters: object, given: object = None) -> object:
        sent.append(sql.split()[0].upper() + " " + sql.split()[2])
        return real(connection, sql, parameters, given)

    monkeypatch.setattr(cursor_statements, "_cursor", noted)
    with store.turn():
        store.settle_proposal(Settlement(opening, "duplicate", detail="again"))
        children = [
            new_child(store, n, seed, Settlement(opening, "candidate", summary=f"x -> {n}"))
            for n in (1, 2, 3)
        ]
        assert sent == []
    store.wait_for_commits()  # the turn's end was handed to the store's commit thread
    assert sent == ["INSERT candidates", "INSERT proposals"]  # one executemany each
    assert [child.id for child in children] == sorted(child.id for child in children)
    assert stored_ids(postgres_url) == [seed.id, *(child.id for child in children)]
    assert store.proposal_outcomes(RUN) == {"duplicate": 1, "candidate": 3}
    linked = [proposal.candidate_id for proposal in store.proposals(RUN)]
    assert linked == [None, *(child.id for child in children)]
    store.close()


def test_a_waiting_child_is_there_for_every_read_and_every_row_that_names_it(url: str) -> None:
    """Before any statement SQLAlchemy runs inside the turn, the children waiting are
    written: a model's proposal closed with its child's id, the cache's read that skips
    the turn's other writes, an evaluation of the child in the same turn."""
    store = opened(url)
    seed = store.plant_seed(RUN, program(0))
    made = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    call = LLMCall("openai", "m", "prompt", "reply", 10, 5, 0.01, 0.1, "ok")
    cache = CandidateCache(store)
    with store.turn():
        child = new_child(store, 1, seed, Settlement(made, "candidate", [call]))
        other = new_child(store, 2, seed)
        assert cache.get(other.id) == other  # read without writing the turn's other rows
        evaluate(store, other, 5.0)
        assert store.candidate(other.id).score == 5.0  # type: ignore[union-attr]
    (proposal,) = store.proposals(RUN)
    assert (proposal.outcome, proposal.candidate_id, proposal.calls) == ("candidate", child.id, 1)
    assert [record.candidate_id for record in store.llm_calls_of_run(RUN)] == [child.id]
    assert store.candidate(other.id).status == "ok"  # type: ignore[union-attr]
    store.close()


def test_a_candidate_added_the_usual_way_sees_the_children_waiting_in_its_turn(url: str) -> None:
    """Its INSERT ... ON CONFLICT goes on the cursor, past SQLAlchemy's listener: the
    waiting children go first, so that a program among them is refused, not doubled."""
    store = opened(url)
    seed = store.plant_seed(RUN, program(0))
    with store.turn():
        waiting = new_child(store, 1, seed)
        again = store.add_candidate(
            RUN, program(1), parent_ids=[seed.id], island=0, generation=1, mutation={}
        )
        assert again is None
        other = store.add_candidate(
            RUN, program(2), parent_ids=[seed.id], island=0, generation=1, mutation={}
        )
    assert other is not None
    store.wait_for_commits()  # another connection reads: on a server the turn ends on a thread
    assert stored_ids(url) == [seed.id, waiting.id, other.id]
    store.close()


def test_ids_follow_the_order_candidates_were_made_in_within_each_run(url: str) -> None:
    """One store, two runs: the second run's seed, numbered by the database after the
    first run took a block of ids, is still its run's lowest id, and so its seed."""
    store = opened(url, ("a", "b"))
    first = store.plant_seed("a", program(0))
    with store.turn():
        made = [new_child(store, 1, first)]
    second = store.plant_seed("b", program(0))
    for n in (1, 2):
        for seed in (first, second):
            with store.turn():
                made.append(new_child(store, n + 1, seed))
    assert store.seed_candidate("b") == second
    assert store.plant_seed("b", program(9)) == second
    for run, seed in (("a", first), ("b", second)):
        ids = [seed.id, *(child.id for child in made if child.run_name == run)]
        assert ids == sorted(ids)
        assert [pending.id for pending in store.pending_candidates(run)] == ids
    store.close()


def test_a_duplicate_said_to_be_new_fails_its_whole_turn_on_postgresql(
    postgres_url: str,
) -> None:
    """Only a second writer of the run could make the admission's check wrong; the unique
    constraint then fails the turn, and nothing of it is kept."""
    store = opened(postgres_url)
    seed = store.plant_seed(RUN, program(0))
    kept = new_child(store, 1, seed)  # outside a turn: written at once
    with pytest.raises(IntegrityError):
        with store.turn():
            evaluate(store, kept, 3.0)
            new_child(store, 2, seed)
            new_child(store, 1, seed)  # the program of `kept`
        store.wait_for_commits()
    assert stored_ids(postgres_url) == [seed.id, kept.id]
    assert store.evaluations(kept.id) == []
    store.close()


def test_on_sqlite_a_duplicate_said_to_be_new_is_still_refused_alone(tmp_path: Path) -> None:
    store = opened(default_url(tmp_path))
    seed = store.plant_seed(RUN, program(0))
    with store.turn():
        new_child(store, 1, seed)
        again = store.add_candidate(
            RUN, program(1), parent_ids=[seed.id], island=0, generation=1, mutation={},
            known_new=True,
        )  # fmt: skip
        assert again is None
    assert store.count_candidates(RUN) == 2
    store.close()


@pytest.mark.parametrize("read_first", [False, True], ids=["writes only", "a read first"])
def test_a_turn_that_fails_leaves_its_connection_as_it_was(url: str, read_first: bool) -> None:
    """A turn whose writes fail is rolled back, and its connection goes on in transactions
    (on PostgreSQL a turn's end may put it in autocommit for an explicit BEGIN): rows
    written in the middle of the next turns, to be read, are rolled back with them."""
    store = opened(url)
    seed = store.plant_seed(RUN, program(0))
    ghost = replace(seed, id=10**6)  # no such row
    kept = [seed.id]
    for attempt in range(3):
        with pytest.raises(IntegrityError):
            with store.turn():
                if read_first:
                    assert store.candidate(seed.id) is not None
                child = new_child(store, 10 + attempt, seed)
                assert store.candidate(child.id) == child  # written now, in the turn
                evaluate(store, ghost, 1.0)
            store.wait_for_commits()
        assert stored_ids(url) == kept
        with store.turn():
            if read_first:
                store.candidate(seed.id)
            child = new_child(store, 20 + attempt, seed)
            evaluate(store, child, 2.0)
        kept.append(child.id)
        store.wait_for_commits()
        assert stored_ids(url) == kept
        assert store.candidate(child.id).score == 2.0  # type: ignore[union-attr]
    store.close()


def test_stores_sharing_a_database_never_hand_out_the_same_id(postgres_url: str) -> None:
    """Each takes a block of ids from the column's sequence; their turns interleave."""
    first, second = opened(postgres_url, ("a", "b")), opened(postgres_url)
    seeds = [first.plant_seed("a", program(0)), second.plant_seed("b", program(0))]
    made: dict[str, list[int]] = {"a": [], "b": []}
    for n in range(1, 151):
        for store, seed in zip((first, second), seeds, strict=True):
            with store.turn():
                made[seed.run_name].append(new_child(store, n, seed).id)
    assert made["a"] == sorted(made["a"]) and made["b"] == sorted(made["b"])
    first.wait_for_commits()
    second.wait_for_commits()
    assert len(set(made["a"]) | set(made["b"])) == 300
    assert sorted(stored_ids(postgres_url)) == sorted([s.id for s in seeds] + made["a"] + made["b"])
    first.close()
    second.close()


def test_a_connection_lost_at_the_turns_end_loses_the_turn_and_the_next_one_works(
    postgres_url: str,
) -> None:
    store = opened(postgres_url)
    seed = store.plant_seed(RUN, program(0))
    admin = raw_engine(postgres_url)
    with pytest.raises(OperationalError, match="server closed the connection"):
        with store.turn():
            new_child(store, 1, seed)
            turn = store._turn[1].connection.driver_connection  # type: ignore[index, union-attr]
            with admin.begin() as connection:
                stop = text("SELECT pg_terminate_backend(:pid)")
                connection.execute(stop, {"pid": turn.info.backend_pid})
        store.wait_for_commits()
    admin.dispose()
    with store.turn():
        child = new_child(store, 2, seed)
    store.wait_for_commits()
    assert stored_ids(postgres_url) == [seed.id, child.id]
    store.close()
