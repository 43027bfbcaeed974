"""Search strategies: islands, MAP-Elites and Pareto, behind one protocol; each rebuilt from
the store on resume exactly as it stood."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from evolve.search import (
    IslandStrategy,
    MapElitesStrategy,
    ParetoStrategy,
    Pick,
    Scored,
    SearchStrategy,
    make_strategy,
    pareto_front,
)
from evolve.search.pareto import (
    _ranks_by_matrix,
    _ranks_of_two,
    crowding_distances,
    non_dominated_ranks,
)
from evolve.task.loading import TaskFileError, load_task
from evolve.task.schema import FeatureSpec, Objective, SearchSpec
from tests.conftest import write_synthetic_task

TWO_OBJECTIVES = [
    Objective(name="gflops", direction="maximize"),
    Objective(name="size", direction="minimize"),
]
GRID = [
    FeatureSpec(name="code_length", min=0, max=100, bins=4),
    FeatureSpec(name="memory", min=0, max=1, bins=2),
]


def spec(strategy: str = "islands", islands: int = 2, **more: object) -> SearchSpec:
    if strategy == "map_elites":
        more.setdefault("features", GRID)
    return SearchSpec(strategy=strategy, islands=islands, **more)


def strategies(islands: int = 2, seed_id: int = 1) -> dict[str, SearchStrategy]:
    return {
        name: make_strategy(spec(name, islands), TWO_OBJECTIVES, seed_id)
        for name in ("islands", "map_elites", "pareto")
    }


def member(
    candidate_id: int,
    score: float,
    island: int = 0,
    length: int = 10,
    memory: float = 0.1,
    size: float | None = None,
) -> Scored:
    """A program whose metrics fit every strategy: gflops is its score, size its length."""
    metrics = {"gflops": score, "size": float(length if size is None else size), "memory": memory}
    return Scored(candidate_id, island, score, metrics, length)


def test_make_strategy_builds_the_named_one() -> None:
    built = strategies()
    assert isinstance(built["islands"], IslandStrategy)
    assert isinstance(built["map_elites"], MapElitesStrategy)
    assert isinstance(built["pareto"], ParetoStrategy)
    with pytest.raises(ValueError, match="at least two objectives"):
        make_strategy(spec("pareto"), TWO_OBJECTIVES[:1], 1)


# -- crossover partners, every strategy ---------------------------------------------------


@pytest.mark.parametrize("name", ["islands", "map_elites", "pareto"])
def test_a_partner_is_never_the_parent_while_the_island_holds_another(name: str) -> None:
    """The run that asked for this lost 8 crossovers in 18 to a repeated draw."""
    strategy = strategies()[name]
    strategy.add(member(1, 1.0, length=5))
    for i, score in enumerate([3.0, 2.0, 0.5, 4.0], start=2):
        strategy.add(member(i, score, island=i % 2, length=10 * i, size=10 - i))
    rng = random.Random(7)
    for _ in range(300):
        pick = strategy.pick(rng)
        assert pick is not None and 0 <= pick.island < 2
        partner = strategy.partner(pick, rng)
        assert partner is not None and partner != pick.parent_id


@pytest.mark.parametrize("name", ["islands", "map_elites", "pareto"])
def test_a_lone_parent_takes_its_partner_from_another_island(name: str) -> None:
    strategy = strategies(islands=3, seed_id=99)[name]
    strategy.add(member(1, 5.0, island=0, length=5))
    rng = random.Random(0)
    assert strategy.partner(Pick(1, 0), rng) is None  # the whole population is the parent
    strategy.add(member(2, 1.0, island=2, length=90, size=1))
    assert {strategy.partner(Pick(1, 0), rng) for _ in range(20)} == {2}
    assert {strategy.partner(Pick(2, 2), rng) for _ in range(20)} == {1}


def test_an_island_partner_is_rank_biased_over_the_others() -> None:
    strategy = IslandStrategy(spec(islands=1, selection_pressure=2.0, exploration=0.0), 1)
    for i in range(1, 6):
        strategy.add(member(i, float(i)))
    rng = random.Random(1)
    drawn = Counter(strategy.partner(Pick(5, 0), rng) for _ in range(4000))
    assert set(drawn) == {1, 2, 3, 4}  # the best (5) is the parent: never drawn
    assert drawn[4] > drawn[3] > drawn[2] > drawn[1]


# -- MAP-Elites ----------------------------------------------------------------------------


def test_grid_cells_clamp_to_the_end_bins() -> None:
    strategy = MapElitesStrategy(spec("map_elites", islands=1), seed_id=0)
    cases = {
        1: (0, 0.0, (0, 0)),
        2: (24, 0.49, (0, 0)),
        3: (25, 0.5, (1, 1)),
        4: (99, 0.99, (3, 1)),
        5: (100, 1.0, (3, 1)),  # the top edge belongs to the last bin
        6: (-50, -3.0, (0, 0)),  # below min: the first bin
        7: (10_000, 42.0, (3, 1)),  # above max: the last
    }
    for candidate_id, (length, memory, _) in cases.items():
        strategy.add(member(candidate_id, float(candidate_id), length=length, memory=memory))
    for candidate_id, (_, _, cell) in cases.items():
        assert strategy.cell_of(candidate_id) == cell
    assert strategy.cells_total == 8
    assert strategy.cells_filled() == 3


def test_one_elite_per_cell_per_island_and_a_better_score_takes_the_cell() -> None:
    strategy = MapElitesStrategy(spec("map_elites"), seed_id=1)
    strategy.add(member(1, 1.0, length=10))  # the seed: on both islands
    strategy.add(member(2, 2.0, island=0, length=12))  # same cell as the seed, better
    strategy.add(member(3, 0.5, island=1, length=60))  # another cell
    assert strategy.elites(0, 10) == [2]
    assert strategy.elites(1, 10) == [1, 3]
    strategy.add(member(4, 1.5, island=0, length=15))  # worse than the cell's elite: no change
    assert strategy.elites(0, 10) == [2]
    strategy.add(member(2, 0.1, island=0, length=12))  # re-measured lower: #4 takes over
    assert strategy.elites(0, 10) == [4]
    strategy.discard(4)  # lost its score: the seed is the cell's best again
    assert strategy.elites(0, 10) == [1]
    strategy.add(member(3, 0.5, island=1, length=13))  # re-measured into the seed's cell
    assert strategy.elites(1, 10) == [1]
    assert strategy.cells_filled(0) == strategy.cells_filled(1) == 1


def test_map_elites_picks_each_occupied_cell_alike_and_never_a_beaten_program() -> None:
    strategy = MapElitesStrategy(spec("map_elites", islands=1), seed_id=1)
    strategy.add(member(1, 100.0, length=5))
    strategy.add(member(2, 1.0, length=30))
    strategy.add(member(3, 0.5, length=31))  # beaten in #2's cell
    strategy.add(member(4, 0.1, length=80, memory=0.9))
    rng = random.Random(3)
    drawn = Counter(pick.parent_id for pick in (strategy.pick(rng) for _ in range(3000)) if pick)
    assert set(drawn) == {1, 2, 4}
    assert min(drawn.values()) > 850  # uniform over cells, not by score


def test_a_program_without_a_feature_stays_out_of_the_grid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    strategy = MapElitesStrategy(spec("map_elites", islands=1), seed_id=1)
    strategy.add(member(1, 1.0))
    with caplog.at_level(logging.WARNING, logger="evolve.search.map_elites"):
        strategy.add(Scored(2, 0, 9.0, {"gflops": 9.0}, 10))
        strategy.add(Scored(3, 0, 8.0, {"memory": float("nan")}, 10))
    assert strategy.cell_of(2) is None and strategy.cell_of(3) is None
    assert strategy.elites(0, 5) == [1]
    assert len(caplog.records) == 1 and "'memory'" in caplog.records[0].getMessage()


def test_map_elites_migrates_each_islands_best_round_the_ring() -> None:
    strategy = MapElitesStrategy(spec("map_elites", islands=3, migration_interval=5), 1)
    strategy.add(member(1, 0.0))
    strategy.add(member(2, 5.0, island=0, length=40))
    strategy.add(member(3, 4.0, island=1, length=90))
    assert strategy.migrations_due(4) == []
    assert strategy.migrations_due(5) == [(2, 1), (3, 2)]  # the seed is on island 0
    assert strategy.elites(1, 5) == [2, 3, 1]
    assert strategy.elites(2, 5) == [3, 1]


@pytest.mark.parametrize("name", ["islands", "map_elites", "pareto"])
def test_restore_from_the_store_equals_the_state_built_one_result_at_a_time(name: str) -> None:
    """The store keeps each candidate's latest score and every migration; resuming from them
    must pick the same parents as the run that went on."""
    live = strategies(islands=3)[name]
    rng = random.Random(11)
    latest: dict[int, Scored] = {}
    migrations: list[tuple[int, int]] = []
    for evaluated in range(1, 400):
        if evaluated > 5 and rng.random() < 0.1:  # a re-measurement failed or moved
            candidate_id = rng.choice(sorted(latest))
            if rng.random() < 0.5 and candidate_id != 1:
                live.discard(candidate_id)
                del latest[candidate_id]
                continue
            scored = latest[candidate_id]
            scored = member(candidate_id, rng.random() * 10, scored.island, rng.randrange(120))
        else:
            scored = member(evaluated, rng.random() * 10, rng.randrange(3), rng.randrange(120),
                            rng.random(), size=rng.randrange(50))  # fmt: skip
        live.add(scored)
        latest[scored.id] = scored
        migrations += live.migrations_due(evaluated)
    resumed = strategies(islands=3)[name]
    resumed.restore([latest[i] for i in sorted(latest)], migrations)
    for island in range(3):
        assert resumed.elites(island, 1000) == live.elites(island, 1000)
    a, b = random.Random(5), random.Random(5)
    assert [resumed.pick(a) for _ in range(50)] == [live.pick(b) for _ in range(50)]


# -- Pareto --------------------------------------------------------------------------------


def test_pareto_front_follows_each_objectives_direction() -> None:
    points = {1: (10.0, 5.0), 2: (8.0, 2.0), 3: (6.0, 6.0), 4: (10.0, 5.0), 5: (1.0, 1.0)}
    assert pareto_front(points, ["maximize", "minimize"]) == {1, 2, 4, 5}  # 3 loses to 1
    assert pareto_front(points, ["maximize", "maximize"]) == {1, 3, 4}
    assert pareto_front(points, ["minimize", "minimize"]) == {5}
    assert pareto_front({}, ["maximize", "minimize"]) == set()


def test_non_dominated_sorting_and_crowding_on_hand_made_points() -> None:
    # Maximised on both: a front of four, a second of two, a third of one.
    points = np.array(
        [[0, 10], [4, 7], [6, 6], [10, 0], [3, 5], [5, 3], [1, 1]], dtype=float
    )  # fmt: skip
    assert non_dominated_ranks(points).tolist() == [0, 0, 0, 0, 1, 1, 2]
    front = points[:4]
    distance = crowding_distances(front)
    assert np.isinf(distance[0]) and np.isinf(distance[3])
    # Neighbours of (4, 7) are (0, 10) and (6, 6): 6/10 + 4/10; of (6, 6): 6/10 + 7/10.
    assert distance[1] == pytest.approx(1.0) and distance[2] == pytest.approx(1.3)
    assert np.isinf(crowding_distances(points[4:6])).all()


def test_two_objective_sorting_agrees_with_the_domination_matrix_ties_included() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        points = rng.integers(0, rng.integers(1, 8), size=(rng.integers(0, 60), 2)).astype(float)
        assert (_ranks_of_two(points) == _ranks_by_matrix(points)).all(), points.tolist()
    three = np.array([[1, 2, 3], [1, 2, 3], [0, 2, 3], [3, 0, 0], [0, 0, 0]], dtype=float)
    assert non_dominated_ranks(three).tolist() == [0, 0, 1, 0, 2]


def test_pareto_tournament_prefers_the_front_then_the_less_crowded() -> None:
    strategy = ParetoStrategy(spec("pareto", islands=2), TWO_OBJECTIVES)
    # gflops up, size down: 1, 2, 3 and 4 form the front; 5 is dominated by 3.
    for candidate_id, gflops, size in [(1, 1, 1), (2, 5, 4), (3, 6, 6), (4, 10, 20), (5, 5, 7)]:
        strategy.add(member(candidate_id, gflops, size=size))
    assert strategy.front() == {1, 2, 3, 4}
    assert strategy.rank_of(5) == 1 and strategy.rank_of(99) is None
    rng = random.Random(2)
    picks = [strategy.pick(rng) for _ in range(4000)]
    drawn = Counter(p.parent_id for p in picks if p)
    assert {p.island for p in picks if p} == {0, 1}
    # 5 wins only against itself, never drawn twice: it never wins.
    assert 5 not in drawn
    # The ends (1, 4) have infinite crowding and beat the middle ones (2, 3).
    assert min(drawn[1], drawn[4]) > max(drawn[2], drawn[3])
    assert strategy.elites(0, 10) == [4, 3, 2, 1, 5] == strategy.elites(1, 10)


def test_pareto_keeps_a_program_without_an_objective_off_the_front() -> None:
    strategy = ParetoStrategy(spec("pareto"), TWO_OBJECTIVES)
    strategy.add(Scored(1, 0, 3.0, {"gflops": 3.0}, 10))
    assert strategy.pick(random.Random(0)) is None
    strategy.add(member(2, 1.0))
    strategy.add(member(1, 3.0))  # measured again, completely this time
    assert strategy.front() == {1}
    strategy.discard(1)
    assert strategy.front() == {2}


# -- the task file -------------------------------------------------------------------------


@pytest.mark.system
def test_pareto_with_one_objective_fails_at_load_on_the_strategy_line(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    text = task.read_text().replace("search:\n", "search:\n  strategy: pareto\n")
    task.write_text(text)
    line = text.splitlines().index("  strategy: pareto") + 1
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert (caught.value.line, caught.value.field) == (line, "search.strategy")
    assert "this task has 1: add another objective" in caught.value.message
    done = subprocess.run(
        [sys.executable, "-m", "evolve", "run", str(task)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"task.yaml:{line}: search.strategy: pareto trades objectives off" in done.stderr


def test_pareto_with_two_objectives_and_a_grid_of_known_features_load(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    second = "  - name: knob_sum\n    direction: maximize\nsearch:\n  strategy: pareto\n"
    task.write_text(task.read_text().replace("search:\n", second))
    assert load_task(task).spec.search.strategy == "pareto"
    grid = "search:\n  strategy: map_elites\n  features:\n" + (
        "    - {name: code_length, min: 0, max: 500}\n    - {name: knob_sum, min: 0, max: 50}\n"
    )
    task = write_synthetic_task(tmp_path / "grid")
    task.write_text(task.read_text().replace("search:\n", grid))
    assert [f.name for f in load_task(task).spec.search.features] == ["code_length", "knob_sum"]


def test_a_feature_named_twice_fails_at_load_on_its_line(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    grid = "search:\n  strategy: map_elites\n  features:\n" + (
        "    - {name: knob_sum, min: 0, max: 5}\n    - {name: knob_sum, min: 0, max: 9}\n"
    )
    text = task.read_text().replace("search:\n", grid)
    task.write_text(text)
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    line = text.splitlines().index("    - {name: knob_sum, min: 0, max: 9}") + 1
    assert (caught.value.line, caught.value.field) == (line, "search.features[1].name")
    assert "already search.features[0]" in caught.value.message
