"""The code_layout evaluator in the Docker sandbox: clang-19, lld-19 and valgrind from the
image, a looping order() contained, and the seed scored after it in the same container,
to the same counts each time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.evaluators.code_layout import CodeLayoutEvaluator
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.sandboxes import DockerSandbox, docker_available

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "code_layout_lua"

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not docker_available()[0], reason=docker_available()[1]),
]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox()
    yield box
    box.close()


def test_a_looping_order_is_contained_and_the_seed_still_scores(sandbox: DockerSandbox) -> None:
    evaluator = CodeLayoutEvaluator({"program": "lua"}, TASK_DIR)
    evaluator.limits = Limits(timeout_s=300)
    seed = Program.from_paths([TASK_DIR / "layout.py"], TASK_DIR)
    evaluator.prepare(seed, sandbox, TASK_DIR)

    hostile = Program(
        {"layout.py": "# EVOLVE-BLOCK-START\ndef order(functions, calls):\n"
         "    while True:\n        pass\n# EVOLVE-BLOCK-END\n"}
    )  # fmt: skip
    failed = evaluator.evaluate(hostile, sandbox, seed=1)
    assert failed.status == "order_failed"
    assert "order() took longer than 10 s" in failed.feedback

    scored = evaluator.evaluate(seed, sandbox, seed=2)
    assert scored.ok, scored.feedback
    assert scored.sandbox["backend"] == "docker"

    evaluator.measured.clear()
    again = evaluator.evaluate(seed, sandbox, seed=3)
    assert again.metrics["train_i1"] == scored.metrics["train_i1"]  # simulated, so exact
    assert again.metrics["heldout_pages"] == scored.metrics["heldout_pages"]
