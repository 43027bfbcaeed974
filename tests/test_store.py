"""The lineage store against real databases: a SQLite file always, PostgreSQL when
EVOLVE_TEST_POSTGRES_URL names a server (`.ci/postgres.sh` starts one and prints the URL)."""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from evolve.engine.candidate_cache import CandidateCache
from evolve.plugin.program import Program
from evolve.plugin.results import Counter, EvalResult, StageResult
from evolve.store import CandidateRecord, Opening, Settlement, Store, cursor_statements, default_url
from evolve.store.database import SCHEMA_HEAD
from evolve.store.schema import Base
from evolve.store.upgrade import MIGRATIONS
from tests.conftest import postgres_schema, store_record
from tests.helpers.stores import raw_engine

RUN = "run-1"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database. For PostgreSQL: a schema of its own, dropped afterwards, and a
    plain `postgresql://` URL, so every test also checks that the store maps it to psycopg."""
    if request.param == "sqlite":
        yield default_url(tmp_path / "results")
        return
    with postgres_schema() as url:
        yield url


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store(url) as opened:
        opened.create_run(RUN, task_path="task.yaml", task_yaml="seed: 1\n", seed=1, settings={})
        yield opened


def program(n: int) -> Program:
    return Program(
        {"kernel.c": f"int a;\n// EVOLVE-BLOCK-START\nint x = {n};\n// EVOLVE-BLOCK-END\n"}
    )


def add(store: Store, n: int, parents: list[int] | None = None, run: str = RUN) -> CandidateRecord:
    record = store.add_candidate(
        run, program(n), parent_ids=parents or [], island=n % 2, generation=0, mutation={"n": n}
    )
    assert record is not None
    return record


PASSED = EvalResult.from_stages(
    [StageResult("build", True, 0.5), StageResult("measure", True, 1.5, metrics={"ns": 10.0})],
    counters={"cycles": Counter(1e6, "perf")},
)
CHECK_FAILED = EvalResult.from_stages(
    [StageResult("build", True, 0.5), StageResult("check", False, 0.1, feedback="x[3] differs")]
)


def evaluate(
    store: Store,
    candidate: CandidateRecord | int,
    result: EvalResult,
    score: float | None,
    kind: str = "evaluate",
) -> None:
    """`candidate` as a record, or by id (then read from the store as it stands)."""
    store.record_evaluation(
        candidate if isinstance(candidate, CandidateRecord) else store_record(store, candidate),
        result,
        kind=kind,
        score=score,
        input_seed=2**62 + 1,
        worker="worker-0",
        started_at=100.0,
        finished_at=101.5,
    )


@contextmanager
def another_database(url: str, folder: Path) -> Iterator[str]:
    """A second fresh, empty database on the backend of `url`."""
    if make_url(url).get_backend_name() == "sqlite":
        folder.mkdir(parents=True)
        yield default_url(folder)
        return
    with postgres_schema() as other:
        yield other


def schema_of(engine: Engine) -> dict[str, Any]:
    """Every table's columns, keys, indexes and constraints, as the database reports them;
    columns by name (a migration that adds one puts it last)."""
    with engine.connect() as connection:
        inspector = inspect(connection)
        return {
            table: {
                "columns": sorted(
                    (c["name"], str(c["type"]), c["nullable"], c.get("default"))
                    for c in inspector.get_columns(table)
                ),
                "primary": inspector.get_pk_constraint(table)["constrained_columns"],
                "foreign": sorted(
                    (tuple(f["constrained_columns"]), f["referred_table"])
                    for f in inspector.get_foreign_keys(table)
                ),
                "indexes": sorted(
                    (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                    for i in inspector.get_indexes(table)
                ),
                "unique": sorted(
                    tuple(u["column_names"]) for u in inspector.get_unique_constraints(table)
                ),
            }
            for table in sorted(inspector.get_table_names())
        }


def test_a_new_store_has_exactly_the_schema_the_migrations_make(url: str, tmp_path: Path) -> None:
    """A new database gets the models' tables at once, stamped at head, without Alembic
    (evolve/store/new_schema.py); the migrations run from scratch must make the same."""
    Store(url).close()
    Store(url).close()  # a second open finds the schema at head and changes nothing
    created = raw_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with another_database(url, tmp_path / "migrated") as other:
        migrated = raw_engine(other)
        with migrated.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        for engine in (created, migrated):
            with engine.connect() as connection:
                assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
                assert connection.execute(
                    text("SELECT version_num FROM alembic_version")
                ).all() == [(SCHEMA_HEAD,)]
        assert schema_of(created) == schema_of(migrated)
        migrated.dispose()
    created.dispose()


def test_a_new_store_is_made_without_loading_alembic(url: str) -> None:
    probe = (
        "import sys; from evolve.store import Store; Store(sys.argv[1]).close(); "
        "print(sorted(m for m in ('alembic', 'mako') if m in sys.modules))"
    )
    made = subprocess.run(
        [sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == "[]"
    engine = raw_engine(url)
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    engine.dispose()


def _open_at_once(url: str, start: Any, said: Any) -> None:
    """One of several processes that open the same new store at the same moment."""
    start.wait()
    try:
        Store(url).close()
        said.put("opened")
    except Exception as error:  # reported to the test, which names it
        said.put(f"{type(error).__name__}: {error}")


def test_processes_that_open_one_new_store_at_once_all_open_it(url: str) -> None:
    """The first makes the tables; the others wait for it (SQLite's write lock, a
    PostgreSQL advisory lock) and find them. On SQLite, the switch to WAL of a new file
    failed "database is locked" for one of two processes in a fifth to a half of tries."""
    context = multiprocessing.get_context("spawn")
    start, said = context.Barrier(3), context.Queue()
    openers = [context.Process(target=_open_at_once, args=(url, start, said)) for _ in range(3)]
    for opener in openers:
        opener.start()
    for opener in openers:
        opener.join(timeout=120)
    assert sorted(said.get(timeout=5) for _ in openers) == ["opened"] * 3
    engine = raw_engine(url)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).all() == [
            (SCHEMA_HEAD,)
        ]
    engine.dispose()


def test_a_database_with_tables_but_no_version_is_left_to_alembic(url: str) -> None:
    """Tables without Alembic's version table are no new database: they are not taken as the
    schema (Alembic's first migration then fails on them, saying so)."""
    Path(make_url(url).database or ".").parent.mkdir(parents=True, exist_ok=True)
    engine = raw_engine(url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE runs (name VARCHAR(10) PRIMARY KEY)"))
    with pytest.raises(Exception, match="runs"):
        Store(url)
    assert not inspect(engine).has_table("candidates")
    engine.dispose()


def test_the_head_a_store_trusts_is_the_newest_migration_and_a_behind_one_is_upgraded(
    url: str,
) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_heads() == [SCHEMA_HEAD]
    Store(url).close()
    engine = raw_engine(url)
    with engine.begin() as connection:  # as a store from before the last migration left it
        config.attributes["connection"] = connection
        command.downgrade(config, "-1")
        columns = {column["name"] for column in inspect(connection).get_columns("llm_calls")}
        assert "charged_tokens" not in columns
    Store(url).close()
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
        assert connection.execute(text("SELECT version_num FROM alembic_version")).all() == [
            (SCHEMA_HEAD,)
        ]
    engine.dispose()


def test_runs(url: str) -> None:
    with Store(url) as store:
        assert store.latest_run() is None
        first = store.create_run("a", task_path="t.yaml", task_yaml="x: 1\n", seed=7, settings={})
        store.create_run("b", task_path="t.yaml", task_yaml="x: 2\n", seed=8, settings={"w": 4})
        with pytest.raises(ValueError, match="already exists"):
            store.create_run("a", task_path="t.yaml", task_yaml="", seed=0, settings={})
        assert first.status == "running" and first.wall_s_used == 0.0
        assert [run.name for run in store.list_runs()] == ["a", "b"]
        latest = store.latest_run()
        assert latest is not None and latest.name == "b" and latest.settings == {"w": 4}
        store.set_run_status("a", "stopped")
        store.add_wall_time("a", 1.5)
        store.add_wall_time("a", 2.0)
        again = store.get_run("a")
        assert again is not None and again.status == "stopped" and again.wall_s_used == 3.5
        assert again.task_yaml == "x: 1\n" and again.seed == 7
        assert store.get_run("nope") is None
        with pytest.raises(ValueError):
            store.set_run_status("a", "paused")
        with pytest.raises(KeyError):
            store.add_wall_time("nope", 1.0)


def test_duplicate_code_is_refused_and_nothing_is_written(store: Store) -> None:
    seed = add(store, 1)
    spaced = Program(  # the same C code up to trailing blanks and blank lines
        {"kernel.c": "int a;  \n\n// EVOLVE-BLOCK-START\nint x = 1;\t\n\n// EVOLVE-BLOCK-END"}
    )
    again = store.add_candidate(RUN, spaced, parent_ids=[], island=1, generation=3, mutation={})
    assert again is None
    assert store.count_candidates(RUN) == 1
    assert store.candidate(seed.id) == seed
    store.create_run("run-2", task_path="t.yaml", task_yaml="", seed=0, settings={})
    elsewhere = add(store, 1, run="run-2")  # the rule is per run
    assert elsewhere.id != seed.id and elsewhere.code_hash == seed.code_hash


def test_a_candidate_needs_an_existing_run(store: Store) -> None:
    with pytest.raises(IntegrityError):
        add(store, 1, run="no-such-run")


def test_racing_writers_add_each_program_once(store: Store, url: str) -> None:
    winners: list[list[int]] = [[], []]
    start = threading.Barrier(2, timeout=30)

    def write(slot: int) -> None:
        with Store(url) as own:
            start.wait()
            for n in range(40):
                if own.add_candidate(
                    RUN, program(n), parent_ids=[], island=0, generation=0, mutation={}
                ):
                    winners[slot].append(n)

    threads = [threading.Thread(target=write, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(winners[0] + winners[1]) == list(range(40))
    assert store.count_candidates(RUN) == 40


def test_first_evaluation_sets_status_score_and_round_trips(store: Store) -> None:
    candidate = add(store, 1)
    assert candidate.status == "pending" and candidate.measurements == 0
    evaluate(store, candidate.id, PASSED, 2.5)
    after = store.candidate(candidate.id)
    assert after is not None
    assert (after.status, after.score, after.measurements) == ("ok", 2.5, 1)
    assert after.program == program(1) and after.mutation == {"n": 1}
    [evaluation] = store.evaluations(candidate.id)
    assert evaluation.stages == tuple(PASSED.stages)
    assert evaluation.counters == {"cycles": Counter(1e6, "perf")}
    assert evaluation.metrics == {"ns": 10.0} and evaluation.input_seed == 2**62 + 1
    assert (evaluation.kind, evaluation.run_name, evaluation.worker) == (
        "evaluate",
        RUN,
        "worker-0",
    )
    assert (evaluation.started_at, evaluation.finished_at) == (100.0, 101.5)


def test_a_first_failure_keeps_its_status_and_no_score(store: Store) -> None:
    candidate = add(store, 1)
    evaluate(store, candidate.id, CHECK_FAILED, None)
    after = store.candidate(candidate.id)
    assert after is not None
    assert (after.status, after.score, after.measurements) == ("check_failed", None, 0)
    assert store.evaluations(candidate.id)[0].feedback == "[check] x[3] differs"
    assert store.pending_candidates(RUN) == []


def test_score_is_the_minimum_over_ok_measurements(store: Store) -> None:
    candidate = add(store, 1)
    evaluate(store, candidate.id, PASSED, 3.0)
    evaluate(store, candidate.id, PASSED, 2.0, kind="remeasure")
    evaluate(store, candidate.id, PASSED, 4.0, kind="remeasure")
    after = store.candidate(candidate.id)
    assert after is not None
    assert (after.status, after.score, after.measurements) == ("ok", 2.0, 3)
    assert [e.kind for e in store.evaluations(candidate.id)] == [
        "evaluate",
        "remeasure",
        "remeasure",
    ]


def test_a_failed_remeasure_takes_the_score_away_for_good(store: Store) -> None:
    candidate = add(store, 1)
    evaluate(store, candidate.id, PASSED, 3.0)
    evaluate(store, candidate.id, CHECK_FAILED, None, kind="remeasure")
    evaluate(store, candidate.id, PASSED, 5.0, kind="remeasure")
    after = store.candidate(candidate.id)
    assert after is not None
    assert (after.status, after.score, after.measurements) == ("check_failed", None, 2)
    assert store.scored(RUN) == [] and store.best(RUN) is None


STANDING_SEQUENCES = [  # (status, score) of each evaluation, in order
    [("ok", 3.0), ("ok", 1.0), ("ok", 2.0)],
    [("ok", 2.0), ("check_failed", None), ("ok", 0.5)],
    [("timeout", None), ("ok", 1.0), ("runtime_error", None)],
    [("ok", None), ("ok", 4.0), ("ok", None)],
    [("check_failed", None)],
]


@pytest.mark.parametrize("sequence", STANDING_SEQUENCES)
def test_each_evaluation_sets_the_standing_its_whole_history_gives(
    store: Store, sequence: list[tuple[str, float | None]]
) -> None:
    """Ok only while every evaluation is, then scored by the lowest ok one; a failure's
    status for good. What `record_evaluation` returns is what it stored, and the stored row
    is right even when the caller hands it a record from before the last evaluations (the
    writes are deferred in a turn, worked out from the row itself)."""
    chained, stale = add(store, 1), add(store, 2)
    first_stale = stale
    for step, (status, score) in enumerate(sequence):
        kind = "evaluate" if step == 0 else "remeasure"
        with store.turn():
            chained = store.record_evaluation(
                chained, EvalResult(status=status), kind=kind, score=score, input_seed=step,
                worker="w", started_at=0.0, finished_at=1.0,
            )  # fmt: skip
            store.record_evaluation(
                first_stale, EvalResult(status=status), kind=kind, score=score, input_seed=step,
                worker="w", started_at=0.0, finished_at=1.0,
            )  # fmt: skip
        assert store_record(store, chained.id) == chained
    failures = [status for status, _ in sequence if status != "ok"]
    scores = [score for status, score in sequence if status == "ok" and score is not None]
    expected = (
        failures[-1] if failures else "ok",
        None if failures or not scores else min(scores),
        sum(status == "ok" for status, _ in sequence),
    )
    assert (chained.status, chained.score, chained.measurements) == expected
    stale = store_record(store, stale.id)
    assert (stale.status, stale.score, stale.measurements) == expected


def test_evaluation_arguments_are_checked(store: Store) -> None:
    candidate = add(store, 1)
    with pytest.raises(IntegrityError):  # no candidate #12345 for the evaluation to be of
        evaluate(store, replace(candidate, id=12345), PASSED, 1.0)
    with pytest.raises(ValueError):
        evaluate(store, candidate.id, PASSED, 1.0, kind="guess")
    assert store.evaluations(candidate.id) == []


def test_pending_candidates_are_those_never_evaluated(store: Store) -> None:
    done, waiting, failing = add(store, 1), add(store, 2), add(store, 3)
    evaluate(store, done.id, PASSED, 1.0)
    evaluate(store, failing.id, CHECK_FAILED, None)
    assert [c.id for c in store.pending_candidates(RUN)] == [waiting.id]
    assert store.status_counts(RUN) == {"ok": 1, "pending": 1, "check_failed": 1}
    assert store.count_candidates(RUN) == 3


def test_lineage_follows_first_parents_to_the_seed(store: Store) -> None:
    seed, other = add(store, 1), add(store, 2)
    child = add(store, 3, parents=[seed.id])
    crossed = add(store, 4, parents=[child.id, other.id])
    assert [c.id for c in store.lineage(crossed.id)] == [crossed.id, child.id, seed.id]
    assert store.lineage(seed.id) == [seed]
    assert store.lineage(999_999) == []
    assert crossed.parent_ids == (child.id, other.id)


def test_scored_and_top_order(store: Store) -> None:
    scores = [2.0, None, 5.0, 2.0, 1.0]
    ids = []
    for n, score in enumerate(scores):
        candidate = add(store, n)
        evaluate(store, candidate.id, PASSED if score is not None else CHECK_FAILED, score)
        ids.append(candidate.id)
    assert store.scored(RUN) == [
        (ids[n], n % 2, score) for n, score in enumerate(scores) if score is not None
    ]
    assert [c.id for c in store.top(RUN, 3)] == [ids[2], ids[0], ids[3]]
    assert [c.score for c in store.top(RUN, 10)] == [5.0, 2.0, 2.0, 1.0]
    # Page by page: a page starts after the last of the one before, ties broken by age.
    first_page = store.top(RUN, 2)
    assert [c.id for c in store.top(RUN, 2, after=first_page[-1])] == [ids[3], ids[4]]
    assert [c.id for c in store.top(RUN, 1, after=store.top(RUN, 3)[-1])] == [ids[4]]
    assert store.top(RUN, 5, after=store.top(RUN, 4)[-1]) == []
    best = store.best(RUN)
    assert best is not None and best.id == ids[2]


def test_island_migrations_in_order(store: Store) -> None:
    a, b = add(store, 1), add(store, 2)
    store.add_migration(RUN, b.id, 0)
    store.add_migration(RUN, a.id, 1)
    store.add_migration(RUN, b.id, 1)
    assert store.migrations(RUN) == [(b.id, 0), (a.id, 1), (b.id, 1)]
    assert store.migrations("other") == []


def test_a_store_refuses_to_be_pickled(store: Store) -> None:
    with pytest.raises(TypeError, match="driver"):
        pickle.dumps(store)


def test_sqlite_file_settings(tmp_path: Path) -> None:
    url = default_url(tmp_path / "not" / "yet")
    with Store(url) as store, store._engine.connect() as connection:
        pragma = {
            name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }
    assert pragma == {
        "journal_mode": "wal",
        "synchronous": 1,
        "foreign_keys": 1,
        "busy_timeout": 30000,
    }
    assert (tmp_path / "not" / "yet" / "evolve.db").is_file()


WRITER = """
import sys
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.store import Store

store = Store(sys.argv[1])
store.create_run("crash", task_path="task.yaml", task_yaml="", seed=0, settings={})
for n in range(10**6):
    code = Program({"k.c": f"// EVOLVE-BLOCK-START\\nint x = {n};\\n// EVOLVE-BLOCK-END\\n"})
    c = store.add_candidate("crash", code, parent_ids=[], island=0, generation=0, mutation={})
    remeasure = ("remeasure", "ok" if n % 2 else "check_failed")
    for kind, status in [("evaluate", "ok")] + [remeasure] * (n % 3):
        score = float(n % 7) if status == "ok" else None
        store.record_evaluation(c, EvalResult(status=status), kind=kind, score=score,
                                input_seed=n, worker="w", started_at=0.0, finished_at=1.0)
    print(c.id, n, flush=True)
"""


def test_a_killed_writer_leaves_a_consistent_store(url: str) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, url], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None
    reported = [writer.stdout.readline() for _ in range(150)]
    writer.send_signal(signal.SIGKILL)
    reported += writer.stdout.readlines()
    assert writer.wait() == -signal.SIGKILL
    finished = dict(tuple(map(int, line.split())) for line in reported if line.strip())

    with Store(url) as store:
        if url.startswith("sqlite"):
            with sqlite3.connect(make_url(url).database or "") as db:
                assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        engine = raw_engine(url)
        with engine.connect() as connection:
            ids = list(connection.execute(text("SELECT id FROM candidates")).scalars())
        engine.dispose()
        assert set(finished) <= set(ids) and len(ids) - len(finished) <= 1
        for candidate_id in ids:
            candidate = store.candidate(candidate_id)
            assert candidate is not None
            evaluations = store.evaluations(candidate_id)
            if candidate.status == "pending":
                assert evaluations == [] and candidate_id not in finished
                continue
            passed = [e.score for e in evaluations if e.status == "ok"]
            all_ok = len(passed) == len(evaluations)
            assert candidate.measurements == len(passed)
            assert candidate.status == ("ok" if all_ok else "check_failed")
            assert candidate.score == (min(passed) if all_ok else None)
            if candidate_id in finished:
                assert len(evaluations) == 1 + finished[candidate_id] % 3


def test_bandit_arms_count_pulls_spend_and_rewards_with_what_they_count(store: Store) -> None:
    from evolve.llm.client import LLMCall

    def paid(usd: float) -> LLMCall:
        return LLMCall("openai", "m", "p", "r", 10, 5, usd, 0.1, "ok")

    arm = "diff @ openai:m"
    made = store.open_proposal(RUN, operator="diff", parent_ids=[], island=0, arm=arm)
    child = store.add_candidate(
        RUN, program(1), parent_ids=[], island=0, generation=1,
        mutation={"operator": "diff", "arm": arm},
        settlement=Settlement(made, "candidate", [paid(0.25)]),
    )  # fmt: skip
    assert child is not None
    dropped = store.open_proposal(RUN, operator="diff", parent_ids=[], island=0, arm=arm)
    store.settle_proposal(Settlement(dropped, "empty", [paid(0.5), paid(0.5)]))
    again = store.open_proposal(RUN, operator="diff", parent_ids=[], island=0, arm=arm)
    duplicate = store.add_candidate(
        RUN, program(1), parent_ids=[], island=0, generation=1, mutation={},
        settlement=Settlement(again, "candidate", []),
    )  # fmt: skip
    assert duplicate is None  # nothing written, the pull included
    assert store.proposals(RUN)[-1].outcome is None
    assert store.bandit_arms(RUN) == {arm: (2, 0.0, 1.25)}
    store.record_evaluation(
        child, PASSED, kind="evaluate", score=2.0, input_seed=1, worker="w",
        started_at=1.0, finished_at=2.0, reward=(arm, 0.75),
    )  # fmt: skip
    assert store.bandit_arms(RUN) == {arm: (2, 0.75, 1.25)}
    assert store.bandit_arms("another run") == {}


def test_the_score_and_the_metrics_shown_beside_it_come_from_one_measurement(
    store: Store,
) -> None:
    """A re-measurement that comes out higher leaves the score at the lower one; the board
    and `evolve show` must then show that measurement's metrics, not the latest."""
    from rich.console import Console

    from evolve.store.evaluations import scoring_evaluation
    from evolve.ui.tables import candidate_view, leaderboard

    candidate = add(store, 1)
    lower = EvalResult.from_stages([StageResult("measure", True, 1.0, metrics={"gflops": 0.16})])
    higher = EvalResult.from_stages([StageResult("measure", True, 1.0, metrics={"gflops": 0.17})])
    evaluate(store, candidate.id, lower, 0.16)
    evaluate(store, candidate.id, higher, 0.17, kind="remeasure")
    shown = scoring_evaluation(store.evaluations(candidate.id))
    assert shown is not None and shown.metrics == {"gflops": 0.16}
    assert store.scoring_metrics(RUN) == {candidate.id: {"gflops": 0.16}}

    console = Console(record=True, width=200)
    run = store.get_run(RUN)
    assert run is not None
    console.print(leaderboard(store, run))
    board = console.export_text()
    row = next(line for line in board.splitlines() if f"#{candidate.id}" in line)
    assert "0.16" in row and "0.17" not in row, board
    console.print(candidate_view(store, store.candidate(candidate.id)))
    assert "gives the score" in console.export_text()


LEASE_A = {"host": "node-a", "pid": 11, "started": 5, "user": "ann"}
LEASE_B = {"host": "node-b", "pid": 22, "started": 7, "user": "bob"}


def _bare_run(store: Store, name: str, **settings: str) -> None:
    store.create_run(name, task_path="t.yaml", task_yaml="", seed=0, settings=settings)


def test_a_live_lease_refuses_another_driver_and_a_quiet_one_is_taken_over(store: Store) -> None:
    _bare_run(store, "r")
    assert store.take_lease("r", LEASE_A, ttl_s=60) is None
    held = store.take_lease("r", LEASE_B, ttl_s=60)
    assert held is not None and held["host"] == "node-a" and held["user"] == "ann"
    assert store.take_lease("r", LEASE_A, ttl_s=60) is None  # the holder itself may take it again
    assert store.renew_lease("r", LEASE_A) and not store.renew_lease("r", LEASE_B)

    assert store.take_lease("r", LEASE_B, ttl_s=0) is None  # A's heartbeat is older than 0 s
    assert not store.renew_lease("r", LEASE_A)  # A learns at its next heartbeat that it lost
    assert not store.end_lease("r", LEASE_A, "stopped")  # and leaves the run to B
    record = store.get_run("r")
    assert record is not None and record.status == "running" and record.driver["pid"] == 22

    assert store.end_lease("r", LEASE_B, "finished")
    record = store.get_run("r")
    assert record is not None and record.status == "finished" and record.driver is None
    assert store.take_lease("r", LEASE_A, ttl_s=60) is None  # a finished run is anyone's to resume


def test_a_bare_resume_means_the_newest_run_of_this_user_on_this_host(store: Store) -> None:
    # RUN, made by the fixture, records no host or user, as runs from before leases: anyone's
    _bare_run(store, "ann-a", host="node-a", user="ann")
    _bare_run(store, "bob-a", host="node-a", user="bob")
    _bare_run(store, "ann-b", host="node-b", user="ann")
    assert store.latest_run(host="node-a", user="ann").name == "ann-a"
    assert store.latest_run(host="node-b", user="bob").name == RUN
    assert store.latest_run().name == "ann-b"


def test_a_turn_is_one_transaction_that_sees_its_own_writes(store: Store, url: str) -> None:
    seed = add(store, 1)
    outside = raw_engine(url)
    with store.turn():
        child = add(store, 2, parents=[seed.id])
        assert store.add_candidate(RUN, program(2), parent_ids=[], island=0, generation=1,
                                   mutation={}) is None  # fmt: skip
        evaluate(store, child.id, PASSED, 3.0)
        # Inside the turn the store reads what the turn wrote ...
        inside = store.candidate(child.id)
        assert inside is not None and inside.score == 3.0
        # ... and nobody else does before it commits.
        with outside.connect() as connection:
            seen = connection.execute(text("SELECT count(*) FROM candidates")).scalar()
        assert seen == 1
    store.wait_for_commits()  # on a server the turn commits on a thread of its own
    with outside.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM candidates")).scalar() == 2
    outside.dispose()


def test_a_turn_that_fails_writes_nothing(store: Store) -> None:
    seed = add(store, 1)
    with pytest.raises(IntegrityError):
        with store.turn():
            add(store, 2, parents=[seed.id])
            evaluate(store, replace(seed, id=12345), PASSED, 1.0)  # no such candidate
        store.wait_for_commits()
    assert store.count_candidates(RUN) == 1
    with store.turn():  # the store is usable afterwards
        add(store, 3, parents=[seed.id])
    assert store.count_candidates(RUN) == 2


def test_a_proposal_made_in_the_driver_is_written_settled_in_one_row(store: Store) -> None:
    seed = add(store, 1)
    arm = "diff|fake:m"
    opening = Opening(RUN, "autotune", (seed.id,), 0, arm)
    child = store.add_candidate(
        RUN, program(2), parent_ids=[seed.id], island=0, generation=1, mutation={},
        settlement=Settlement(opening, "candidate", summary="x 1 -> 2"),
    )  # fmt: skip
    assert child is not None
    store.settle_proposal(Settlement(opening, "duplicate", detail="the same program as #1"))
    made, dropped = store.proposals(RUN)
    assert (made.outcome, made.candidate_id, made.summary) == ("candidate", child.id, "x 1 -> 2")
    assert (made.operator, made.parent_ids, made.calls) == ("autotune", (seed.id,), 0)
    assert (dropped.outcome, dropped.candidate_id, dropped.detail) == (
        "duplicate",
        None,
        "the same program as #1",
    )
    assert store.proposal_outcomes(RUN) == {"candidate": 1, "duplicate": 1}
    assert store.bandit_arms(RUN) == {arm: (2, 0.0, 0.0)}


def test_a_ranking_paged_on_a_server_sending_15_digits_has_every_tie_once(
    postgres_url: str,
) -> None:
    """Paging starts after the last score read, so scores must come back exact even where
    a server, a role or a database sends 15 digits by default (extra_float_digits=0): 2/3
    rounded up had the page repeat its candidate for ever, 1/3 rounded down skipped its
    tie."""
    options = make_url(postgres_url).query["options"]
    rounding = make_url(postgres_url).update_query_dict(
        {"options": f"{options} -cextra_float_digits=0"}
    )
    with Store(rounding.render_as_string(hide_password=False)) as store:
        store.create_run(RUN, task_path="t", task_yaml="", seed=1, settings={})
        for n, value in enumerate([2 / 3, 2 / 3, 1 / 3, 1 / 3]):
            evaluate(store, add(store, n), PASSED, score=value)
        ranking = store.top(RUN, 10)
        assert [c.score for c in ranking] == [2 / 3, 2 / 3, 1 / 3, 1 / 3]
        paged: list[int] = []
        last = None
        while (page := store.top(RUN, 1, after=last)) and len(paged) < 10:
            paged.append(page[0].id)
            last = page[0]
        assert paged == [c.id for c in ranking]


def test_the_engines_cache_reads_a_candidate_it_lacks_without_writing_the_turn_early(
    store: Store,
) -> None:
    """A candidate the cache lacks has no deferred write in the turn: its read goes alone,
    and the turn's writes still go out together, once, at its end."""
    old, parent = add(store, 1), add(store, 2)
    cache = CandidateCache(store, size=2)
    opening = Opening(RUN, "autotune", (parent.id,), 0)
    with statements_sent(store) as sent:
        with store.turn():
            store.settle_proposal(Settlement(opening, "duplicate", detail="again"))
            sent.clear()
            assert cache.get(old.id).program == old.program
            assert sent == ["SELECT"]
            store.settle_proposal(Settlement(opening, "duplicate", detail="again"))
            sent.clear()
        store.wait_for_commits()  # on a server the turn's end runs on the commit thread
        assert sent.count("INSERT") == 1  # both rows, in one executemany at the turn's end
    assert store.proposal_outcomes(RUN) == {"duplicate": 2}


def test_the_engines_cache_keeps_the_candidates_used_most_lately(store: Store) -> None:
    first, second, third = add(store, 1), add(store, 2), add(store, 3)
    cache = CandidateCache(store, size=2)
    cache.remember(first)
    cache.remember(second)
    cache.get(first.id)  # a parent picked again outlives one remembered after it
    cache.remember(third)
    with statements_sent(store) as sent:
        assert cache.get(first.id) == first and cache.get(third.id) == third
        assert sent == []
        assert cache.get(second.id) == second
        assert [word for word in sent if word != "BEGIN"] == ["SELECT"]


def test_the_engines_cache_starts_with_the_best_and_keeps_them_longest(store: Store) -> None:
    """A resumed run's cache is warmed best first: what does not fit is the worst, and what
    gives way first to a new candidate is the worst of the rest."""
    for n in (1, 2, 3):
        evaluate(store, add(store, n), PASSED, score=float(n))
    best, second, third = store.top(RUN, 3)
    cache = CandidateCache(store, size=2)
    cache.warm([best, second, third])
    cache.remember(add(store, 4))
    with statements_sent(store) as sent:
        assert cache.get(best.id) == best
        assert sent == []
        assert cache.get(second.id) == second and cache.get(third.id) == third
        assert [word for word in sent if word != "BEGIN"] == ["SELECT", "SELECT"]


@contextmanager
def statements_sent(store: Store) -> Iterator[list[str]]:
    """The first word of each SQL statement the store sends while the block runs, through
    SQLAlchemy or straight on the cursor (evolve/store/cursor_statements.py; an executemany
    there is one)."""
    sent: list[str] = []

    def note(conn: object, cursor: object, statement: str, *rest: object) -> None:
        sent.append(statement.split()[0].upper())

    on_cursor = cursor_statements._cursor

    def noted(connection: Connection, sql: str, parameters: object, given: Any = None) -> Any:
        sent.append(sql.split()[0].upper())
        return on_cursor(connection, sql, parameters, given)

    event.listen(store._engine, "before_cursor_execute", note)
    cursor_statements._cursor = noted
    try:
        yield sent
    finally:
        event.remove(store._engine, "before_cursor_execute", note)
        cursor_statements._cursor = on_cursor


def test_settled_proposals_written_late_in_a_turn_are_read_back_and_kept(store: Store) -> None:
    """A settled proposal's row waits for the turn's next read or its commit (one
    executemany for all of them); a read inside the turn must still see it."""
    seed = add(store, 1)
    opening = Opening(RUN, "autotune", (seed.id,), 0)
    with store.turn():
        for _ in range(3):
            store.settle_proposal(Settlement(opening, "duplicate", detail="again"))
        assert store.proposal_outcomes(RUN) == {"duplicate": 3}
        store.settle_proposal(Settlement(opening, "failed", detail="crashed"))
        store.settle_proposal(Settlement(opening, "failed", detail="crashed"))
    assert store.proposal_outcomes(RUN) == {"duplicate": 3, "failed": 2}
    with pytest.raises(IntegrityError):
        with store.turn():
            store.settle_proposal(Settlement(opening, "failed", detail="lost with its turn"))
            evaluate(store, replace(seed, id=12345), PASSED, 1.0)
        store.wait_for_commits()
    assert store.proposal_outcomes(RUN) == {"duplicate": 3, "failed": 2}
