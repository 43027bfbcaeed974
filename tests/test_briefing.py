"""What a proposal is shown besides its parent, chosen from a real SQLite store: the
inspirations and the crossover partner, and the metric names whose legend goes into the
system prompt."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from evolve.engine.budgets import Budgets
from evolve.engine.candidate_cache import CandidateCache
from evolve.mutators.prompt import PromptContext, build_prompt
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.propose.briefing import Briefing
from evolve.propose.recent_attempts import RecentAttempts
from evolve.search.novelty import NoveltyIndex
from evolve.search.strategy import IslandStrategy, Pick, Scored
from evolve.store import CandidateRecord, Store, default_url
from evolve.task.loading import load_task
from tests.conftest import store_record, write_matmul_task

RUN = "brief"
MODEL = {"model": "scripted", "base_url": "http://127.0.0.1:9/v1"}
CONTEXT = PromptContext("Make f fast.", (("speedup", "maximize"),), language="c")
SEED = """\
int fixed(void) { return 0; }
// EVOLVE-BLOCK-START
int f(int x) {
  int y = x;
  y = y + 1;
  y = y + 2;
  y = y + 3;
  return y;
}
// EVOLVE-BLOCK-END
"""


class Population:
    """A run's store with scored programs on one island, and a briefing over it."""

    def __init__(self, tmp_path: Path, inspirations: int = 3) -> None:
        task = load_task(write_matmul_task(tmp_path, MODEL, mutator="diff"))
        spec = task.spec.model_copy(
            update={
                "search": task.spec.search.model_copy(
                    update={"inspirations": inspirations, "islands": 1}
                )
            }
        )
        self.store = Store(default_url(tmp_path))
        self.store.create_run(RUN, task_path="task.yaml", task_yaml="", seed=1, settings={})
        self.candidates = CandidateCache(self.store)
        self.novelty = NoveltyIndex(None)
        self.seed = self.add(SEED, 1.0, parent=None)
        self.strategy = IslandStrategy(spec.search, self.seed.id)
        self.strategy.add(Scored(self.seed.id, 0, 1.0))
        self.briefing = Briefing(
            spec,
            self.store,
            RUN,
            strategy=self.strategy,
            candidates=self.candidates,
            novelty=self.novelty,
            budgets=Budgets(spec.budget, self.store, RUN, wall_used_s=0.0),
            recent=RecentAttempts(self.store, self.candidates, 5),
        )

    def add(self, code: str, score: float, parent: CandidateRecord | None) -> CandidateRecord:
        record = self.store.add_candidate(
            RUN,
            Program({"k.c": code}),
            parent_ids=[parent.id] if parent else [],
            island=0,
            generation=0 if parent is None else 1,
            mutation={},
        )
        assert record is not None
        result = EvalResult("ok", metrics={"speedup": score, "time_s": 0.1 / score})
        scored = self.store.record_evaluation(
            store_record(self.store, record.id), result, kind="evaluate", score=score,
            input_seed=0, worker="w", started_at=0.0, finished_at=1.0,
        )  # fmt: skip
        self.novelty.add(scored.id, scored.program)
        self.candidates.remember(scored)
        if parent is not None:
            self.strategy.add(Scored(scored.id, 0, score))
        return scored

    def child(self, line: str, score: float) -> CandidateRecord:
        return self.add(SEED.replace("  y = y + 2;\n", f"  {line}\n"), score, self.seed)


def test_inspirations_beat_the_parent_or_are_labelled_and_the_seed_is_left_out(
    tmp_path: Path,
) -> None:
    population = Population(tmp_path)
    low = population.child("y = y * 3;", 3.0)
    parent = population.child("y <<= 1;", 8.0)
    best = population.child("y = y + y;", 12.0)
    middle = population.child("y -= 2;", 5.0)

    others = population.briefing.others(Pick(parent.id, 0), None)
    ids = [other.id for other in others]
    assert ids[0] == best.id, "the island's best, which beats the parent, comes first"
    assert population.seed.id not in ids, "the seed was offered to a parent 8x better"
    assert set(ids) == {best.id, low.id, middle.id}

    shown = population.briefing.parent(parent)
    _, user = build_prompt("diff", CONTEXT, shown, others)
    section = user.split("## Other programs, best first", 1)[1].split("\n## ", 1)[0]
    assert section.index(f"#{best.id} ") < section.index("scoring below the current one")
    assert section.index("scoring below") < section.index(f"#{middle.id} ")
    assert section.index(f"#{middle.id} ") < section.index(f"#{low.id} "), "not best first"

    # For the best program nothing beats it: every inspiration is there for diversity.
    top = [o.id for o in population.briefing.others(Pick(best.id, 0), None)]
    assert set(top) == {parent.id, middle.id, low.id}
    # For the seed, the seed is the parent and not an inspiration, and the best leads.
    assert population.briefing.others(Pick(population.seed.id, 0), None)[0].id == best.id


def test_crossover_pairs_a_champion_with_the_seed_only_when_nothing_better_exists(
    tmp_path: Path,
) -> None:
    population = Population(tmp_path)
    champion = population.child("y = y + y;", 17.0)
    rng = random.Random(3)
    lone = {population.briefing.partner(Pick(champion.id, 0), rng) for _ in range(20)}
    assert lone == {population.seed.id}, "with only the seed there, it is the partner"

    better = [population.child(f"y = y * {k};", 2.0 + k) for k in range(2, 5)]
    drawn = {population.briefing.partner(Pick(champion.id, 0), rng) for _ in range(200)}
    assert population.seed.id not in drawn
    assert drawn <= {b.id for b in better}
    assert len(drawn) > 1, "the partner is still drawn, not always the same one"


def test_the_legend_names_are_fixed_by_the_first_evaluation_shown(tmp_path: Path) -> None:
    population = Population(tmp_path)
    assert population.briefing.metric_names == ()
    population.briefing.parent(population.seed)
    assert population.briefing.metric_names == ("speedup", "time_s")


def test_what_the_engine_recorded_is_shown_as_the_store_would_show_it(tmp_path: Path) -> None:
    """A program's metrics and feedback, kept from the evaluations the engine recorded, are
    those of the evaluation the store says gave its score (the lowest ok one, the latest of
    equals; else the latest), through re-measurements up and down, a tie and a failure."""
    population = Population(tmp_path)
    briefing, store = population.briefing, population.store
    fresh = Population(tmp_path / "elsewhere").briefing  # reads everything from the store
    fresh.store = store
    record = store.add_candidate(
        RUN, Program({"k.c": SEED + "// new\n"}), parent_ids=[population.seed.id], island=0,
        generation=1, mutation={},
    )  # fmt: skip
    assert record is not None
    steps = [
        ("evaluate", "ok", 2.0, "first"),
        ("remeasure", "ok", 3.0, "higher"),
        ("remeasure", "ok", 1.5, "lower"),
        ("remeasure", "ok", 1.5, "tie, later"),
        ("remeasure", "timeout", None, "failed"),
    ]
    read = store.evaluations

    def unread(candidate_id: int) -> list[Any]:
        raise AssertionError(f"#{candidate_id}'s evaluations were read from the store")

    before = store_record(store, record.id)
    for kind, status, score, said in steps:
        metrics = {"speedup": score} if score is not None else {}
        result = EvalResult(status, metrics=metrics, feedback=said)
        after = store.record_evaluation(
            before, result, kind=kind, score=score, input_seed=0, worker="w",
            started_at=0.0, finished_at=1.0,
        )  # fmt: skip
        briefing.measured(before, after, result, score)
        store.evaluations = unread  # type: ignore[method-assign]
        shown = briefing.parent(after)
        store.evaluations = read  # type: ignore[method-assign]
        expected = fresh.parent(after)
        assert (shown.metrics, shown.feedback, shown.score) == (
            expected.metrics,
            expected.feedback,
            expected.score,
        ), kind
        before = after
    assert briefing.parent(before).feedback == "tie, later"


def test_a_first_evaluation_that_failed_is_shown_without_reading_the_store(
    tmp_path: Path,
) -> None:
    population = Population(tmp_path)
    briefing, store = population.briefing, population.store
    record = store.add_candidate(
        RUN, Program({"k.c": SEED + "// broken\n"}), parent_ids=[population.seed.id],
        island=0, generation=1, mutation={},
    )  # fmt: skip
    assert record is not None
    before = store_record(store, record.id)
    result = EvalResult("error", feedback="kernel.c:3: error: expected ';'")
    after = store.record_evaluation(
        before, result, kind="evaluate", score=None, input_seed=0, worker="w",
        started_at=0.0, finished_at=1.0,
    )  # fmt: skip
    briefing.measured(before, after, result, None)
    store.evaluations = None  # type: ignore[assignment,method-assign]  # a read would fail
    assert briefing.parent(after).feedback == "kernel.c:3: error: expected ';'"
