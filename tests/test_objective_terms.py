"""Results told in the objective's own words: a minimized run time never shows as a negative
score, a figure carries its unit and its direction, and the seed is told by the measurement
the referee believes, not by a flagged first score."""

from __future__ import annotations

from pathlib import Path

from evolve.engine.champion import crowned_measurement
from evolve.engine.scoring import score
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.store import CandidateRecord, Store, default_url
from evolve.task.schema import Objective
from evolve.views.figures import RunFigures
from evolve.views.objective_terms import Terms
from tests.conftest import store_record

RUN_WALL = Terms((Objective(name="run_wall_s", direction="minimize"),), "command")
SPEEDUP = Terms((Objective(name="speedup", direction="maximize"),), "c_kernel")
TWO = Terms(
    (
        Objective(name="speedup", direction="maximize"),
        Objective(name="code_bytes", direction="minimize", weight=0.5),
    ),
    "c_kernel",
)
TASK = """\
name: matmul
seed: seed.c
evaluator: {name: c_kernel, params: {}}
objectives:
  - {name: speedup, direction: maximize}
"""


def stored(terms: Terms, value: float) -> float:
    """The score the engine stores for a metric of the one objective."""
    found = score({terms.objectives[0].name: value}, terms.objectives)
    assert found is not None
    return found


def test_a_minimized_run_time_reads_as_seconds_with_its_gain_over_the_seed() -> None:
    best, seed = stored(RUN_WALL, 0.05), stored(RUN_WALL, 1.85)
    assert best < 0, "stored negated, as evolve/engine/scoring.py does"
    assert RUN_WALL.figure(best) == "run_wall_s 0.05 s"
    assert RUN_WALL.headline(best, seed) == "run_wall_s 0.05 s, seed 1.85 s: 37x faster"
    assert RUN_WALL.headline(seed, best) == "run_wall_s 1.85 s, seed 0.05 s: 37x slower"
    assert RUN_WALL.ranking() == "run_wall_s (s), lower is better"
    assert RUN_WALL.name == "run_wall_s (s)" and RUN_WALL.score_cell(best) == "0.05"
    assert RUN_WALL.gained(stored(RUN_WALL, 0.2) - stored(RUN_WALL, 0.5)) == "0.3 s"
    assert RUN_WALL.improvement == "run_wall_s cut"


def test_a_speedup_reads_as_a_ratio_of_times() -> None:
    assert SPEEDUP.headline(2.82, 0.99) == "speedup 2.82x, seed 0.99x: 2.85x faster"
    assert SPEEDUP.ranking() == "speedup, higher is better"
    assert SPEEDUP.score_cell(2.82) == "2.82x"
    assert SPEEDUP.against_seed(1.0, 1.002) == "level with the seed"


def test_sizes_and_plain_numbers_have_their_own_words() -> None:
    size = Terms((Objective(name="code_bytes", direction="minimize"),), "c_kernel")
    assert size.compare(stored(size, 4000.0), stored(size, 5000.0)) == "1.25x smaller"
    # Where a value is not positive a ratio means nothing: the difference is told.
    assert size.compare(stored(size, 0.0), stored(size, 3.0)) == "smaller by 3 B"
    rate = Terms((Objective(name="gflops", direction="maximize"),), "c_kernel")
    assert rate.compare(5.0, 4.0) == "1.25x higher"
    assert rate.compare(0.0, 3.0) == "lower by 3 GFLOP/s"
    plain = Terms((Objective(name="distance", direction="minimize"),), "synthetic")
    assert plain.headline(stored(plain, 0.0), stored(plain, 97.0)) == (
        "distance 0, seed 97: lower by 97"
    )


def test_several_objectives_rank_by_a_sum_that_is_spelled_out() -> None:
    assert TWO.single is None and TWO.figure(1.9) == "score 1.9"
    assert TWO.ranking() == (
        "score, the weighted sum of speedup (maximized) and 0.5 x code_bytes (minimized), "
        "higher is better"
    )
    assert TWO.against_seed(1.9, 0.5) == "higher than the seed's 0.5"
    assert TWO.column("code_bytes") == "code_bytes (B)" and TWO.cell("speedup", 2.0) == "2x"


def test_no_figure_of_a_minimized_objective_is_negative() -> None:
    for value in (0.000123, 0.05282, 1.954, 250.0):
        told = RUN_WALL.headline(stored(RUN_WALL, value), stored(RUN_WALL, 2.0))
        assert "-" not in told, told


# -- the seed's figure is the measurement it would be crowned on ---------------------------


def _measure(store: Store, candidate: CandidateRecord, speedup: float, *, flagged: bool) -> None:
    kind = "remeasure" if store_record(store, candidate.id).measurements else "evaluate"
    metrics = {"speedup": speedup, **({"flagged": 1.0} if flagged else {})}
    feedback = "[measure] FLAGGED: the timed calls spread 60%" if flagged else ""
    store.record_evaluation(
        store_record(store, candidate.id), EvalResult("ok", metrics=metrics, feedback=feedback),
        kind=kind, score=speedup, input_seed=0, worker="w", started_at=0.0, finished_at=1.0,
    )  # fmt: skip


def _add(store: Store, n: int, parent: CandidateRecord | None) -> CandidateRecord:
    record = store.add_candidate(
        "r",
        Program({"seed.c": f"// EVOLVE-BLOCK-START\nint x = {n};\n// EVOLVE-BLOCK-END\n"}),
        parent_ids=[parent.id] if parent else [],
        island=0,
        generation=0,
        mutation={},
    )
    assert record is not None
    return record


def test_a_seed_flagged_low_once_is_told_by_its_agreeing_re_measurements(tmp_path: Path) -> None:
    with Store(default_url(tmp_path)) as store:
        store.create_run("r", task_path="task.yaml", task_yaml=TASK, seed=0, settings={})
        seed = _add(store, 0, None)
        _measure(store, seed, 0.4634, flagged=True)  # a noisy first timing on a loaded machine
        _measure(store, seed, 0.99, flagged=True)
        _measure(store, seed, 0.99, flagged=True)
        best = _add(store, 1, seed)
        _measure(store, best, 2.84, flagged=False)
        _measure(store, best, 2.82, flagged=False)
        assert store_record(store, seed.id).score == 0.4634, "the store keeps the lowest"

        evaluations = store.evaluations(seed.id)
        crowned = crowned_measurement(evaluations, agreement=0.8)
        assert crowned is not None and crowned.id != evaluations[0].id and crowned.score == 0.99
        figures = RunFigures(store, store.get_run("r"))  # type: ignore[arg-type]
        assert figures.headline(best.id) == "speedup 2.82x, seed 0.99x: 2.85x faster"
        assert figures.headline(seed.id) == "speedup 0.99x (the seed)"
        assert figures.brief(best.id) == "speedup 2.82x, 2.85x faster"


def test_a_measurement_that_failed_leaves_no_figure_and_disagreeing_ones_the_lowest(
    tmp_path: Path,
) -> None:
    with Store(default_url(tmp_path)) as store:
        store.create_run("r", task_path="task.yaml", task_yaml=TASK, seed=0, settings={})
        seed = _add(store, 0, None)
        _measure(store, seed, 5.0, flagged=True)
        _measure(store, seed, 1.0, flagged=True)  # 5 and 1 disagree: the lowest is told
        crowned = crowned_measurement(store.evaluations(seed.id), agreement=0.8)
        assert crowned is not None and crowned.score == 1.0
        store.record_evaluation(
            store_record(store, seed.id), EvalResult("timeout"), kind="remeasure", score=None,
            input_seed=0, worker="w", started_at=0.0, finished_at=1.0,
        )  # fmt: skip
        assert crowned_measurement(store.evaluations(seed.id), agreement=0.8) is None
        figures = RunFigures(store, store.get_run("r"))  # type: ignore[arg-type]
        assert figures.headline(seed.id) == "no score"
