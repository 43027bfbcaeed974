"""The llvm_inline evaluator in the Docker sandbox: clang-19 from the image, a hostile
policy contained, and the seed scored after it in the same warm container."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.evaluators.llvm_inline import LLVMInlineEvaluator
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.sandboxes import DockerSandbox, docker_available

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "llvm_inline_size"

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not docker_available()[0], reason=docker_available()[1]),
]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox()
    yield box
    box.close()


def test_a_looping_policy_is_contained_and_the_seed_still_scores(sandbox: DockerSandbox) -> None:
    evaluator = LLVMInlineEvaluator({}, TASK_DIR)
    evaluator.limits = Limits(timeout_s=120)
    seed = Program.from_paths([TASK_DIR / "policy.py"], TASK_DIR)
    evaluator.prepare(seed, sandbox, TASK_DIR)
    assert evaluator.seed_fast_ratio is not None and evaluator.seed_fast_ratio > 0

    hostile = Program(
        {
            "policy.py": "# EVOLVE-BLOCK-START\ndef should_inline(features):\n"
            "    while True:\n        pass\n# EVOLVE-BLOCK-END\n"
        }
    )
    failed = evaluator.evaluate(hostile, sandbox, seed=1)
    assert failed.status == "fast_tier_failed"
    assert "should_inline took longer than 50 ms" in failed.feedback

    scored = evaluator.evaluate(seed, sandbox, seed=2)
    assert scored.ok, scored.feedback
    assert scored.metrics["fast_ratio"] == evaluator.seed_fast_ratio
    assert scored.sandbox["backend"] == "docker"
