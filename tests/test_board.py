"""The live board at 80 and 120 columns: it gives up whole columns, never part of a number;
its bars keep a usable width; its budget text and the run's state are never cut mid-word;
and every figure is told in the objective's terms, a minimized run time never as a negative
score."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from evolve.engine.events import Event, Snapshot
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.store import Store, default_url
from evolve.ui import dashboard
from evolve.ui.budget_lines import BAR_MIN, packed
from evolve.ui.dashboard import Dashboard, PlainLog
from evolve.ui.tables import leaderboard
from tests.conftest import store_record

RUN = "command_wordfreq-20240101-120000"  # as long as a generated name
TASK = """\
name: command_wordfreq
seed: [wordfreq.sh]
evaluator: {name: command, params: {run: sh wordfreq.sh}}
objectives:
  - {name: run_wall_s, direction: minimize}
"""
TIMES = [1.954, 1.2, 0.9, 0.31, 0.25, 0.2, 0.083421, 0.07, 0.06, 0.05282, 0.051, 0.3]
OUTAGE = "provider openai paused until 12:04:31 (rate limited)"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A run of a minimized run time, its seed 1.954 s and its leaders down to 0.051 s, with
    the long metric names and spread of figures that crowded the board."""
    opened = Store(default_url(tmp_path))
    opened.create_run(RUN, task_path="task.yaml", task_yaml=TASK, seed=0, settings={})
    parent: int | None = None
    for n, seconds in enumerate(TIMES):
        program = Program({"wordfreq.sh": f"# EVOLVE-BLOCK-START\necho {n}\n# EVOLVE-BLOCK-END\n"})
        child = opened.add_candidate(
            RUN, program, parent_ids=[parent] if parent else [], island=n % 3, generation=n,
            mutation={"operator": "autotuner"},
        )  # fmt: skip
        assert child is not None
        metrics = {
            "run_wall_s": seconds,
            "top_lines_written": 20.0,
            "bytes_read_total": 5_242_880.0,
            "peak_rss_bytes": 123_456_789.0,
        }
        for kind in ("evaluate", "remeasure") if n in (0, 9) else ("evaluate",):
            opened.record_evaluation(
                store_record(opened, child.id),
                EvalResult.from_stages([StageResult("run", True, 0.1, metrics=metrics)]),
                kind=kind, score=-seconds, input_seed=0, worker="w", started_at=0.0,
                finished_at=1.0,
            )  # fmt: skip
        parent = child.id
    return opened


def snapshot(**changes: object) -> Snapshot:
    fields: dict[str, object] = dict(
        run_name=RUN, candidates=12, budget_candidates=200, elapsed_s=61.0, budget_wall_s=180.0,
        evaluated=12, failed=3, in_flight=1, best_id=10, best_score=-0.05282,
        spend="models $0.0123 of $5, 10,234 tokens", search="islands 5, 4, 3", outage=OUTAGE,
        workers="1 of 2 workers ready", leaders=1,
    )  # fmt: skip
    fields.update(changes)
    return Snapshot(**fields)  # type: ignore[arg-type]


def board(store: Store, width: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The board's picture at `width` columns, as a terminal of that width shows it."""
    monkeypatch.setattr(dashboard, "REFRESH_S", 0.0)
    console = Console(file=io.StringIO(), force_terminal=True, width=width)
    with Dashboard(store, RUN, console) as live:
        live.event(Event("best", "new best #10: run_wall_s 0.05282 s", 10))
        live.tick(snapshot())
        picture = live.live.renderable
    screen = Console(record=True, file=io.StringIO(), force_terminal=True, width=width)
    screen.print(picture)
    return screen.export_text()


@pytest.mark.parametrize("width", [80, 120])
def test_the_board_fits_its_width_and_cuts_no_number(
    store: Store, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = board(store, width, monkeypatch)
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= width, shown
    assert "…" not in shown, shown
    for seconds in sorted(TIMES)[:10]:  # the top 10
        assert re.search(rf"│ +{seconds:.4g} │", shown), (seconds, shown)
    assert "run_wall_s (s)" in shown and "-0.0" not in shown, "no sign flip reaches a person"
    assert "best #10: run_wall_s 0.05282 s, seed 1.954 s: 37x faster" in shown
    candidates = next(line for line in lines if line.startswith("candidates "))
    wall = next(line for line in lines if line.startswith("wall time "))
    assert candidates.rstrip().endswith(" 12/200") and wall.rstrip().endswith(" 61s of 180s")
    for line in (candidates, wall):
        bar = re.search(r"[━╸╺]+", line)
        assert bar is not None and len(bar.group()) >= BAR_MIN, line
    flat = " ".join(shown.split())
    for phrase in ("12 evaluated, 3 failed, 1 running", "models $0.0123 of $5, 10,234 tokens",
                   OUTAGE, "1 of 2 workers ready"):  # fmt: skip
        assert phrase in flat, phrase
        assert any(phrase in line for line in lines), f"{phrase!r} split across lines"


def columns(picture: str) -> list[str]:
    header = next(line for line in picture.splitlines() if line.startswith("┃"))
    return [cell.strip() for cell in header.strip("┃ ").split("┃")]


def left_out(picture: str) -> list[str]:
    said = re.search(r"not shown at this width: (.+?) recent events", " ".join(picture.split()))
    return said.group(1).split(", ") if said else []


def test_narrower_boards_leave_whole_columns_out_and_say_which(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    every = columns(board(store, 400, monkeypatch))
    assert len(every) == 11 and not left_out(board(store, 400, monkeypatch))
    kept: dict[int, list[str]] = {}
    for width in (80, 120):
        picture = board(store, width, monkeypatch)
        kept[width] = columns(picture)
        assert kept[width][:3] == ["rank", "id", "run_wall_s (s)"], kept[width]
        assert sorted(kept[width] + left_out(picture)) == sorted(every), picture
    assert set(kept[80]) < set(kept[120]), "a wider board shows more"
    assert "island" in left_out(board(store, 80, monkeypatch))


def test_a_budget_phrase_is_never_split_and_a_narrow_bar_goes_whole() -> None:
    phrases = [Text("12 evaluated, 3 failed, 1 running"), Text("wall 61s of 180s"), Text(OUTAGE)]
    lines = packed(phrases, 40)
    assert [line.plain for line in lines] == [phrase.plain for phrase in phrases]
    assert [line.plain for line in packed(phrases, 200)] == ["; ".join(p.plain for p in phrases)]


def test_the_plain_log_names_the_best_in_the_objectives_terms(store: Store) -> None:
    from evolve.views.figures import RunFigures

    run = store.get_run(RUN)
    assert run is not None
    out = io.StringIO()
    log = PlainLog(Console(file=out, width=80), terms=RunFigures(store, run).terms)
    log.tick(snapshot())
    assert "best #10 run_wall_s 0.05282 s" in out.getvalue(), out.getvalue()


def test_the_leaderboard_command_keeps_every_column_when_there_is_room(store: Store) -> None:
    run = store.get_run(RUN)
    assert run is not None
    console = Console(record=True, width=200)
    console.print(leaderboard(store, run))
    shown = console.export_text()
    for column in ("rank", "vs seed", "peak_rss_bytes (B)", "island", "gen", "parent", "measured"):
        assert column in shown, column
    assert "by run_wall_s (s), lower is better" in shown
    assert "37x faster" in shown and "not shown" not in shown
