"""The autotuner draws again, in the driver, while it repeats a program the run holds: each
repeat counts toward the fruitless stop as a duplicate proposal would, but only the last
draw reaches the ledger."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evolve.engine.budgets import MAX_FRUITLESS
from evolve.engine.loop import Engine
from evolve.executors.local import LocalExecutor
from evolve.llm.hooks import CallHooks
from evolve.mutators import Autotuner, MutationRequest, Parent, Proposal
from evolve.plugin.program import Program
from evolve.plugin.secrets import Keys
from evolve.propose.autotuner_draws import DRAWS, draw_new
from evolve.propose.making import make_proposal
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator

# One knob with three values: from 1 the autotuner can only reach 0 or 2.
THREE_VALUES = """\
# EVOLVE-BLOCK-START
A = 1  # @knob int 0..2
# EVOLVE-BLOCK-END
"""
TUNER = Autotuner({"crossover": 0})


def request(seed: int) -> MutationRequest:
    """A request to tune THREE_VALUES, decided by `seed`."""
    return MutationRequest(Parent(1, Program({"s.py": THREE_VALUES}), 0.0), (), seed)


def value(program: Program) -> str:
    """The knob's line, as far as its value: "A = 0", "A = 1" or "A = 2"."""
    return program.files["s.py"].splitlines()[1][:5]


class Held:
    """What the run holds, by the knob's value; counts how often it was asked (each draw
    but a last one is)."""

    def __init__(self, *values: str) -> None:
        self.values, self.asked = set(values), 0

    def __call__(self, program: Program) -> bool:
        self.asked += 1
        return value(program) in self.values


def test_a_draw_the_run_does_not_hold_is_kept_at_once() -> None:
    first = make_proposal(TUNER, request(3), Keys(), CallHooks())
    held = Held()
    made = draw_new(TUNER, request(3), held)
    assert isinstance(made, Proposal) and isinstance(first, Proposal)
    assert made.program == first.program  # the request's seed decides, as before
    assert held.asked == 1


def test_repeats_are_drawn_again_until_a_new_program() -> None:
    """From A = 1 only A = 0 and A = 2 exist; with A = 0 held, every seed ends on A = 2
    unless all its draws repeat A = 0, and some seed must have needed more than one."""
    asked = []
    for seed in range(40):
        held = Held("A = 0")
        made = draw_new(TUNER, request(seed), held)
        assert isinstance(made, Proposal)
        assert value(made.program) == "A = 2" or held.asked == DRAWS - 1
        again = draw_new(TUNER, request(seed), Held("A = 0"))
        assert isinstance(again, Proposal) and again.program == made.program
        asked.append(held.asked)
    assert max(asked) >= 2 and min(asked) == 1


def test_the_last_draw_is_the_proposal_when_every_draw_repeats() -> None:
    held = Held("A = 0", "A = 2")
    made = draw_new(TUNER, request(5), held)
    assert held.asked == DRAWS - 1 and isinstance(made, Proposal)


def test_a_failed_draw_is_not_drawn_again() -> None:
    fixed = "# EVOLVE-BLOCK-START\nA = 1  # @knob int 1..1\n# EVOLVE-BLOCK-END\n"
    parent = Parent(1, Program({"s.py": fixed}), 0.0)
    held = Held("A = 1")
    made = draw_new(TUNER, MutationRequest(parent, (), 1), held)
    assert held.asked == 0 and not isinstance(made, Proposal)


@pytest.mark.system
def test_a_run_with_nothing_left_to_draw_stops_after_as_many_proposals_as_before(
    tmp_path: Path,
) -> None:
    """Two knob values in all: once both are held, every draw repeats one. Each proposal
    counts once toward the fruitless stop, whatever its draws, so the stop still comes
    after MAX_FRUITLESS parent picks that found nothing; every one of them is a
    `duplicate` row. (Any evaluation that passes, a re-measurement too, starts the streak
    again, so there may be more.)"""
    (tmp_path / "seed.py").write_text(
        "# EVOLVE-BLOCK-START\nA = 1  # @knob int 0..1\n# EVOLVE-BLOCK-END\n"
    )
    (tmp_path / "task.yaml").write_text(
        textwrap.dedent(
            """\
            name: two
            seed: seed.py
            evaluator: {name: synthetic, params: {target: 5}}
            objectives: [{name: distance, direction: minimize}]
            search: {islands: 1}
            budget: {candidates: 50}
            sandbox: {backend: process}
            """
        )
    )
    task = load_task(tmp_path / "task.yaml")
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run("r", task_path=str(task.path), task_yaml=task.text, seed=1, settings={})
    engine = Engine(
        task,
        store,
        run,
        make_evaluator(task),
        LocalExecutor(tmp_path),
        workers=1,
        results_dir=tmp_path / "results",
    )
    outcome = engine.run()
    assert (
        outcome.reason == f"the last {MAX_FRUITLESS} proposals were all known programs or failures"
    )
    assert store.count_candidates("r") == 2
    outcomes = store.proposal_outcomes("r")
    assert outcomes["candidate"] == 1
    assert outcomes["duplicate"] >= MAX_FRUITLESS
