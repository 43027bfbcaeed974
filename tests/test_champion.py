"""The champion policy: the referee against a real SQLite store, then the real engine with
the synthetic evaluator's suspects, which claim a near perfect distance and a
hundredfold speedup."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from evolve.engine import champion
from evolve.engine.champion import Referee, agree, is_flagged
from evolve.engine.loop import Engine
from evolve.evaluators.synthetic import SUSPECT_DISTANCE
from evolve.executors.local import LocalExecutor
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.store import CandidateRecord, Store, default_url
from evolve.task.loading import load_task, make_evaluator
from evolve.task.schema import ChampionSpec
from evolve.ui.tables import candidate_view, leaderboard
from tests.conftest import store_record, write_synthetic_task
from tests.helpers.engine_runs import Recorder, run_engine

RUN = "r1"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store(default_url(tmp_path))
    opened.create_run(RUN, task_path="task.yaml", task_yaml="", seed=1, settings={})
    return opened


def add(store: Store, n: int, parent: CandidateRecord | None = None) -> CandidateRecord:
    record = store.add_candidate(
        RUN,
        Program({"p.py": f"# EVOLVE-BLOCK-START\nX = {n}\n# EVOLVE-BLOCK-END\n"}),
        parent_ids=[parent.id] if parent else [],
        island=0,
        generation=0,
        mutation={},
    )
    assert record is not None
    return record


def measure(
    store: Store,
    candidate: CandidateRecord,
    score: float,
    *,
    flagged: bool = False,
    **metrics: float,
) -> CandidateRecord:
    kind = "remeasure" if candidate.measurements else "evaluate"
    result = EvalResult(
        "ok",
        metrics={"score": score, **({"flagged": 1.0} if flagged else {}), **metrics},
        feedback="[time] FLAGGED: beats the roofline" if flagged else "[time] fine",
    )
    return store.record_evaluation(
        store_record(store, candidate.id),
        result,
        kind=kind,
        score=score,
        input_seed=candidate.measurements,
        worker="w",
        started_at=0.0,
        finished_at=1.0,
    )


def test_scores_agree_by_ratio_when_positive_and_by_distance_otherwise() -> None:
    assert agree(10.0, 8.0, 0.8) and not agree(10.0, 7.9, 0.8)
    assert agree(-10.0, -8.0, 0.8) and not agree(-10.0, -7.9, 0.8)
    assert not agree(1.0, -1.0, 0.8) and agree(0.0, 0.0, 0.8)
    assert agree(5.0, 5.0, 1.0) and not agree(5.0, 4.99, 1.0)


def test_a_flagged_leader_is_crowned_only_when_its_latest_measurements_agree(
    store: Store,
) -> None:
    referee = Referee(ChampionSpec(agreement=0.8), store)
    ordinary = measure(store, measure(store, add(store, 1), 10.0), 2.0)
    assert referee.judge(ordinary).event == "best"  # unflagged: two measurements, the lower
    suspect = add(store, 2)
    suspect = measure(store, suspect, 100.0, flagged=True)
    assert referee.judge(suspect).event == "remeasure"
    suspect = measure(store, suspect, 40.0)
    assert referee.judge(suspect).event == "remeasure"
    suspect = measure(store, suspect, 45.0)
    decision = referee.judge(suspect)
    assert decision.event == "best" and "flagged; 40 and 45 agree" in decision.text
    assert suspect.score == 40.0

    liar = add(store, 3)
    for score in (100.0, 10.0, 100.0, 10.0):
        liar = measure(store, liar, score, flagged=score > 50)
    decision = referee.judge(liar)
    assert decision.event == "warning" and "4 measurements never agreed" in decision.text


def test_a_big_step_flags_its_result_and_every_later_measurement(store: Store) -> None:
    referee = Referee(ChampionSpec(max_step_speedup=50.0), store)
    parent = measure(store, add(store, 1), 1.0, speedup=2.0)
    modest, leap = add(store, 2, parent), add(store, 3, parent)

    result = EvalResult("ok", metrics={"speedup": 90.0}, feedback="[time] 1 ms")
    assert referee.review("evaluate", modest, result) is None
    assert result.feedback == "[time] 1 ms" and "flagged" not in result.metrics

    result = EvalResult("ok", metrics={"speedup": 150.0}, feedback="[time] 1 ms")
    reason = referee.review("evaluate", leap, result)
    assert (
        reason == f"step speedup 75.0x over parent #{parent.id} is more than max_step_speedup 50x"
    )
    assert result.metrics["flagged"] == 1.0
    assert result.feedback == f"[time] 1 ms\n\nFLAGGED: {reason}"
    store.record_evaluation(
        store_record(store, leap.id), result, kind="evaluate", score=1.0, input_seed=0,
        worker="w", started_at=0.0, finished_at=1.0,
    )  # fmt: skip
    first = store.evaluations(leap.id)[0].id

    again = EvalResult("ok", metrics={"speedup": 3.0})
    assert referee.review("remeasure", leap, again) is None
    assert again.metrics["flagged"] == 1.0
    assert (
        again.feedback
        == f"FLAGGED: measured again because evaluation {first} was flagged: {reason}"
    )

    plain = EvalResult("ok", metrics={"speedup": 3.0})
    referee.review("remeasure", parent, plain)
    assert plain.feedback == "" and "flagged" not in plain.metrics


def test_a_suspects_child_is_measured_from_the_nearest_ancestor_believed(store: Store) -> None:
    """A child of a flagged candidate claims no step over it; over the grandparent it
    claims the same leap, and is as suspect. A flagged parent whose measurements came to
    agree is believed, and is the baseline again."""
    referee = Referee(ChampionSpec(max_step_speedup=50.0), store)
    grandparent = measure(store, add(store, 1), 1.0, speedup=2.0)
    suspect = measure(store, add(store, 2, grandparent), 9.0, flagged=True, speedup=200.0)
    child = add(store, 3, suspect)
    result = EvalResult("ok", metrics={"speedup": 200.0})
    assert referee.review("evaluate", child, result) == (
        f"step speedup 100.0x over ancestor #{grandparent.id} (parent #{suspect.id} is "
        "flagged, not yet believed) is more than max_step_speedup 50x"
    )
    assert result.metrics["flagged"] == 1.0
    honest = add(store, 4, suspect)  # as fast as its flagged parent's grandparent: no step
    assert referee.review("evaluate", honest, EvalResult("ok", metrics={"speedup": 3.0})) is None
    confirmed = measure(store, suspect, 9.5, flagged=True, speedup=200.0)  # agrees with 9.0
    later = EvalResult("ok", metrics={"speedup": 300.0})
    assert referee.review("evaluate", add(store, 5, confirmed), later) is None


def test_resume_passes_over_refused_candidates_and_remeasures_unverified_ones(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(champion, "RESUME_PAGE", 1)  # the ranking is read a page at a time
    seed = measure(store, measure(store, add(store, 0), -97.0), -97.0)
    refused = add(store, 1)
    for score in (-1.0, -2.0, -4.0, -8.0):
        refused = measure(store, refused, score, flagged=True)
    waiting = measure(store, measure(store, add(store, 2), -1.0, flagged=True), -3.0)
    unverified = measure(store, add(store, 3), -5.0)
    measure(store, add(store, 4), -99.0)  # below the champion: never looked at

    best, remeasure = Referee(ChampionSpec(), store).restore(RUN)
    assert best is not None and best.id == seed.id
    assert [c.id for c in remeasure] == [waiting.id, unverified.id]
    assert refused.id not in {c.id for c in remeasure}


def test_resume_ends_when_a_page_of_the_ranking_comes_back_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ranking that pages back to where it was (scores rounded on the way, as a server
    sending 15 digits did) ends the search with no champion instead of reading for ever."""
    monkeypatch.setattr(champion, "RESUME_PAGE", 1)
    refused = add(store, 1)
    for score in (-1.0, -2.0, -4.0, -8.0):
        refused = measure(store, refused, score, flagged=True)
    pages: list[int | None] = []

    def top_ignoring_after(
        run_name: str, k: int, *, after: CandidateRecord | None = None
    ) -> list[CandidateRecord]:
        pages.append(after.id if after else None)
        if len(pages) > 10:
            raise AssertionError("the search read the same page for ever")
        return Store.top(store, run_name, k)

    monkeypatch.setattr(store, "top", top_ignoring_after)
    assert Referee(ChampionSpec(), store).restore(RUN) == (None, [])
    assert pages == [None, refused.id]


def run_with_suspects(
    tmp_path: Path, suspects: str
) -> tuple[Path, Store, Recorder, CandidateRecord | None]:
    """Knob sums above 12 are suspects. The target is out of reach (the knobs sum to 148 at
    most), so no honest candidate comes near a suspect's distance. One worker, because a
    suspect's drift is counted on the worker that measures it."""
    params = f"{{target: 200, suspect_above: 12, {suspects}}}"
    task_file = write_synthetic_task(tmp_path / "task", candidates=30, params=params)
    outcome, store, recorder = run_engine(tmp_path, task_file, workers=1)
    return task_file, store, recorder, outcome.best


def crowned(recorder: Recorder) -> set[int | None]:
    return {e.candidate_id for e in recorder.events if e.kind == "best"}


@pytest.mark.system
def test_a_hundredfold_step_is_remeasured_flagged_and_never_crowned_while_it_disagrees(
    tmp_path: Path,
) -> None:
    # Suspects claim 100x their ordinary parent's speedup, and their distance doubles each
    # time they are measured again: a lucky first measurement.
    _, store, recorder, best = run_with_suspects(tmp_path, "suspect_drift: 2")
    stepped = sorted(
        (c for c in store.top(RUN, 100) if "step speedup" in store.evaluations(c.id)[0].feedback),
        key=lambda c: c.id,
    )
    assert stepped, "no suspect was ever made from an ordinary parent"
    for candidate in stepped:
        evaluations = store.evaluations(candidate.id)
        assert [e.kind for e in evaluations[:2]] == ["evaluate", "remeasure"]
        assert all(e.metrics["flagged"] == 1.0 for e in evaluations)
        assert "FLAGGED: step speedup 100.0x over " in evaluations[0].feedback
        assert (
            f"FLAGGED: measured again because evaluation {evaluations[0].id} was flagged: "
            "step speedup 100.0x" in evaluations[1].feedback
        )
        assert candidate.id not in crowned(recorder)
        assert best is not None and best.id != candidate.id
    first = stepped[0]  # the first suspect of all, so it led the run
    assert len(store.evaluations(first.id)) == 4
    # Refused after its fourth measurement. The run says so only if it still led then: a
    # later suspect, measured once, may have passed it (its score is its worst measurement),
    # which depends on what the one worker ran between its measurements.
    verdict = Referee(ChampionSpec(), store).judge(store_record(store, first.id))
    assert verdict.event == "warning" and "never agreed: not crowned" in verdict.text
    refusals = [e for e in recorder.events if e.kind == "warning" and e.candidate_id == first.id]
    assert all(e.text == verdict.text for e in refusals)
    judged = [e.candidate_id for e in recorder.events if e.kind in ("remeasure", "warning")]
    assert refusals or any(other.id in judged for other in stepped[1:]), judged
    # No suspect is ever crowned, a suspect's child included: honest distances are above 50.
    assert all(store_record(store, i).score < -1.0 for i in crowned(recorder))  # type: ignore[arg-type, operator]


@pytest.mark.system
def test_a_flagged_candidate_whose_measurements_agree_is_crowned_and_shown_flagged(
    tmp_path: Path,
) -> None:
    _, store, recorder, best = run_with_suspects(tmp_path, "suspect_flagged: true")
    assert best is not None and best.score == -SUSPECT_DISTANCE
    assert is_flagged(store.evaluations(best.id)) and best.measurements == 2
    crowning = [e for e in recorder.events if e.kind == "best" and e.candidate_id == best.id]
    assert len(crowning) == 1 and "(flagged;" in crowning[0].text

    console = Console(record=True, width=240)
    console.print(leaderboard(store, store.get_run(RUN)))
    board = console.export_text()
    assert f"#{best.id}!" in board and "2x flagged" in board and "! flagged:" in board
    console.print(candidate_view(store, best))
    shown = console.export_text()
    assert "FLAGGED in evaluation" in shown and "is above 12.0: too good to be true" in shown


@pytest.mark.system
@pytest.mark.parametrize("timeouts", [1, 5])
def test_a_re_measurement_that_times_out_is_tried_again_never_failing_the_candidate(
    tmp_path: Path, timeouts: int
) -> None:
    """Each re-measurement of a program times out the first `timeouts` times, as on a
    loaded node. A timed-out re-measurement is tried again, up to three times, and never
    recorded: no candidate fails for it. Within three, flagged suspects whose measurements
    agree are crowned as usual; past three, a candidate keeps its first measurement and is
    not crowned on it alone."""
    _, store, recorder, best = run_with_suspects(
        tmp_path, f"suspect_flagged: true, flaky_again: {timeouts}"
    )
    assert store.status_counts(RUN) == {"ok": 30}
    said = [e.text for e in recorder.events if e.kind == "warning"]
    assert any("'s re-measurement timed out on worker-0@" in text for text in said)
    crowned_ids = {i for i in crowned(recorder) if i is not None}
    if timeouts == 1:
        assert not any("timed out 3 times" in text for text in said)
        assert best is not None and best.score == -SUSPECT_DISTANCE
        kinds = [e.kind for e in store.evaluations(best.id)]
        assert kinds == ["evaluate", "remeasure"]
    else:
        given_up = {e.candidate_id for e in recorder.events if "timed out 3 times" in e.text}
        assert given_up and not given_up & crowned_ids
        assert all(
            [e.kind for e in store.evaluations(i)] == ["evaluate"]  # type: ignore[arg-type]
            for i in given_up
        )


@pytest.mark.system
def test_resume_keeps_a_flagged_candidate_that_disagrees_uncrowned(tmp_path: Path) -> None:
    task_file, store, _, best = run_with_suspects(
        tmp_path, "suspect_flagged: true, suspect_drift: 2"
    )
    assert best is not None and not is_flagged(store.evaluations(best.id))
    above = [c for c in store.top(RUN, 100) if c.score > best.score]  # type: ignore[operator]
    assert above and all(is_flagged(store.evaluations(c.id)) for c in above)
    measured = len(store.run_evaluations(RUN))

    task, recorder = load_task(task_file), Recorder()
    run = store.get_run(RUN)
    assert run is not None
    resumed = Engine(
        task,
        store,
        run,
        make_evaluator(task),
        LocalExecutor(tmp_path),
        workers=1,
        results_dir=tmp_path / "results",
        observer=recorder,
    ).run()
    assert resumed.best is not None and resumed.best.id == best.id
    assert len(store.run_evaluations(RUN)) == measured
    assert not crowned(recorder)
