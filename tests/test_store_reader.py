"""What the agent's `top_candidates` and `show_candidate` read from a real SQLite store:
the crowned champion and the scores that stand, not a first measurement that did not."""

from __future__ import annotations

from pathlib import Path

from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.propose.store_reader import standings
from evolve.store import CandidateRecord, Store, default_url
from tests.conftest import store_record

RUN = "reader"


def add(store: Store, n: int) -> CandidateRecord:
    record = store.add_candidate(
        RUN,
        Program({"p.py": f"# EVOLVE-BLOCK-START\nX = {n}\n# EVOLVE-BLOCK-END\n"}),
        parent_ids=[],
        island=0,
        generation=0,
        mutation={"operator": "diff"},
    )
    assert record is not None
    return record


def measure(store: Store, candidate: CandidateRecord, score: float, **metrics: float) -> None:
    kind = "remeasure" if store_record(store, candidate.id).measurements else "evaluate"
    store.record_evaluation(
        store_record(store, candidate.id),
        EvalResult("ok", metrics={"score": score, **metrics}, feedback=""),
        kind=kind, score=score, input_seed=0, worker="w", started_at=0.0, finished_at=1.0,
    )  # fmt: skip


def test_the_crowned_champion_leads_and_an_unconfirmed_score_says_so(tmp_path: Path) -> None:
    store = Store(default_url(tmp_path))
    store.create_run(RUN, task_path="task.yaml", task_yaml="", seed=1, settings={})
    champion, lucky, plain = add(store, 1), add(store, 2), add(store, 3)
    measure(store, champion, 17.0)
    measure(store, champion, 15.0)  # the re-measurement: the lower one stands
    measure(store, lucky, 40.0, flagged=1.0)  # too good, waiting to be measured again
    measure(store, plain, 4.0)

    shown = standings(store, RUN, 3)
    assert [(c.id, c.score) for c, _ in shown] == [(champion.id, 15.0), (lucky.id, 40.0),
                                                    (plain.id, 4.0)]  # fmt: skip
    assert shown[0][1] == "crowned; the lowest of 2 measurements"
    assert shown[1][1] == "not crowned, its score not yet confirmed; measured once"
    assert shown[2][1] == "measured once"
    assert [c.id for c, _ in standings(store, RUN, 1)] == [champion.id]


def test_with_nothing_crowned_the_best_are_listed_as_measured(tmp_path: Path) -> None:
    store = Store(default_url(tmp_path))
    store.create_run(RUN, task_path="task.yaml", task_yaml="", seed=1, settings={})
    first, second = add(store, 1), add(store, 2)
    measure(store, first, 2.0)
    measure(store, second, 3.0)
    shown = standings(store, RUN, 5)
    assert [(c.id, note) for c, note in shown] == [
        (second.id, "measured once"), (first.id, "measured once"),
    ]  # fmt: skip
