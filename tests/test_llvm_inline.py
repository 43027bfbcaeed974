"""The llvm_inline evaluator with real clang-19 and the real process sandbox.

Protocol and hostile-policy tests compile a tiny C file; the replay self-test and the
cascade use the real corpus (fetched into the user cache on first use).
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from evolve.evaluators.llvm_inline import LLVMInlineEvaluator
from evolve.evaluators.llvm_inline.jobs import Compiled, manifest, run_driver
from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.evaluators.llvm_inline.scoring import compare_guards
from evolve.evaluators.llvm_inline.units import Unit
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.plugin.stages import Runner, StageFailed
from evolve.sandboxes import ProcessSandbox
from evolve.task.schema import TaskSpec

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "llvm_inline_size"

pytestmark = pytest.mark.skipif(
    shutil.which("clang-19") is None, reason="needs clang-19 (apt-get install clang-19 llvm-19)"
)

TINY = b"""
static int square(int x) { return x * x; }
static int add(int a, int b) { return square(a) + square(b); }
int sum(const int *p, int n) { int s = 0; for (int i = 0; i < n; i++) s += add(p[i], i); return s; }
int entry(int a) { return add(a, 3) + sum(&a, 1); }
"""
TINY_UNIT = Unit("tiny", "tiny.c", "fast")
LIMITS = Limits(timeout_s=30)
LEVEL = LLVMInlineParams().opt_level  # the pipeline a task joins unless it says otherwise


def policy(body: str, prelude: str = "") -> Program:
    """A candidate whose should_inline runs `body` (indented into the function)."""
    text = (
        "# EVOLVE-BLOCK-START\n"
        + textwrap.dedent(prelude)
        + "def should_inline(features):\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "\n# EVOLVE-BLOCK-END\n"
    )
    return Program({"policy.py": text})


DEFAULT = policy('return features["inlining_default"] == 1')


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def decide(
    sandbox: ProcessSandbox, program: Program, limits: Limits = LIMITS, **params: object
) -> list:
    """The decide run on the tiny file; StageFailed if the candidate misbehaves."""
    settings = LLVMInlineParams.model_validate(params)
    plan = manifest(
        settings, "decide", [TINY_UNIT], level=LEVEL, timeout_s=20, policy="candidate/policy.py"
    )
    files = {f"candidate/{p}": t for p, t in program.as_bytes().items()}
    return run_driver(Runner(sandbox, limits), plan, {"tiny.c": TINY}, files)


def replay(sandbox: ProcessSandbox, decisions: str) -> list:
    settings = LLVMInlineParams()
    plan = manifest(
        settings, "replay", [TINY_UNIT], level=LEVEL, timeout_s=20, decisions={"tiny": decisions}
    )
    return run_driver(Runner(sandbox, LIMITS), plan, {"tiny.c": TINY})


def stock(sandbox: ProcessSandbox) -> list:
    plan = manifest(LLVMInlineParams(), "stock", [TINY_UNIT], level=LEVEL, timeout_s=20)
    return run_driver(Runner(sandbox, LIMITS), plan, {"tiny.c": TINY})


def test_decisions_replay_into_the_same_object_as_stock(sandbox: ProcessSandbox) -> None:
    (decided,) = decide(sandbox, DEFAULT)
    assert decided.decisions and set(decided.decisions) <= {"0", "1"}
    (replayed,) = replay(sandbox, decided.decisions)
    (plain,) = stock(sandbox)
    assert replayed.decisions == decided.decisions
    assert replayed.sha256 == plain.sha256 and replayed.text_bytes == plain.text_bytes > 0


def test_trusted_compiles_report_clangs_cpu_seconds(sandbox: ProcessSandbox) -> None:
    (decided,) = decide(sandbox, DEFAULT)
    (replayed,) = replay(sandbox, decided.decisions)
    (plain,) = stock(sandbox)
    assert replayed.cpu_seconds > 0 and plain.cpu_seconds > 0


def test_never_inlining_keeps_the_calls_and_changes_the_object(sandbox: ProcessSandbox) -> None:
    (decided,) = decide(sandbox, policy("return False"))
    assert set(decided.decisions) == {"0"}
    (replayed,) = replay(sandbox, decided.decisions)
    assert replayed.sha256 != stock(sandbox)[0].sha256


def test_the_policy_sees_named_features_and_the_default_advice(sandbox: ProcessSandbox) -> None:
    seen = policy(
        """\
        assert isinstance(features["cost_estimate"], int)
        assert features["inlining_default"] in (0, 1)
        assert features["callee_basic_block_count"] == -1  # clobbered by LLVM 17-20
        return True
        """
    )
    (decided,) = decide(sandbox, seen)
    assert set(decided.decisions) == {"1"}
    with pytest.raises(StageFailed, match="KeyError: 'inlining_default'"):
        decide(sandbox, policy('return features["inlining_default"] == 1'), include_default=False)


def test_decisions_that_do_not_fit_the_compile_are_refused(sandbox: ProcessSandbox) -> None:
    (decided,) = decide(sandbox, DEFAULT)
    with pytest.raises(StageFailed, match="do not replay"):
        replay(sandbox, decided.decisions + "1")
    with pytest.raises(StageFailed, match="do not replay"):
        replay(sandbox, decided.decisions[:-1])


@pytest.mark.parametrize(
    ("body", "prelude", "expected"),
    [
        ("while True:\n    pass", "", "took longer than 50 ms on decision 0"),
        ('raise RuntimeError("boom")', "", "(?s)raised on decision 0:.*RuntimeError: boom"),
        ("return 10**100", "", "returned int 1000000000000000000000000000000000000"),
        ("return 1", "", "returned int 1 on decision 0; it must return True or False"),
        ("import os\nfor fd in range(3, 256):\n    try: os.close(fd)\n    except OSError: pass\n"
         "return True", "", "writing advice to clang failed|clang closed the channel"),
        ("return True", "raise SystemExit(3)\n", "importing candidate/policy.py raised"),
        ("return True", "import time\ntime.sleep(60)\n", "importing .* took longer than"),
        ("import os\nos._exit(0)", "", "without a report"),
    ],
    ids=["infinite-loop", "exception", "huge-int", "non-bool", "closes-pipe", "exit-on-import",
         "slow-import", "kills-driver"],
)  # fmt: skip
def test_a_hostile_policy_fails_with_feedback_and_clang_dies(
    sandbox: ProcessSandbox, body: str, prelude: str, expected: str
) -> None:
    with pytest.raises(StageFailed, match=expected) as failure:
        decide(sandbox, policy(body, prelude))
    assert not failure.value.timed_out  # the driver caught it, not the sandbox's timer


def test_a_policy_that_swallows_the_alarm_is_stopped_by_the_sandbox(
    sandbox: ProcessSandbox,
) -> None:
    stubborn = policy(
        """\
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
        """
    )
    with pytest.raises(
        StageFailed, match=r"its (CPU )?time limit.*\(sandbox\.timeout_s"
    ) as failure:
        decide(sandbox, stubborn, limits=replace(LIMITS, timeout_s=3))
    assert failure.value.timed_out


def test_bad_params_fail_at_load_time() -> None:
    with pytest.raises(ValidationError, match="decision_timeout_ms"):
        LLVMInlineEvaluator({"decision_timeout_ms": 0}, TASK_DIR)
    with pytest.raises(ValidationError, match="extra"):
        LLVMInlineEvaluator({"levels": "-O2"}, TASK_DIR)


@pytest.fixture(scope="module")
def evaluator(sandbox: ProcessSandbox) -> LLVMInlineEvaluator:
    """The task's evaluator, prepared with the seed (corpus and baselines cached on disk)."""
    spec = TaskSpec.model_validate(yaml.safe_load((TASK_DIR / "task.yaml").read_text()))
    prepared = LLVMInlineEvaluator(spec.evaluator.params, TASK_DIR)
    prepared.limits = spec.sandbox.limits()
    seed = Program.from_paths([TASK_DIR / path for path in spec.seed], TASK_DIR)
    prepared.prepare(seed, sandbox, TASK_DIR)
    return prepared


def test_llvm_inlines_at_minus_oz_by_default() -> None:
    assert LEVEL == "-Oz"  # what size-conscious builds use, and what sizes are ratios to
    assert LLVMInlineParams().reference_level == LEVEL


def test_a_changed_guard_output_names_the_stock_build_it_differs_from() -> None:
    stock = {"prog": (0, "ok\n")}
    same = [Compiled("prog", "01", 0.1, guard=(0, "ok\n"))]
    other = [Compiled("prog", "01", 0.1, guard=(1, "bad\n"))]
    assert compare_guards(same, stock, "-Oz") is None
    changed = compare_guards(other, stock, "-Oz")
    assert changed is not None and "stock -Oz build exited 0" in changed and "bad" in changed


def test_replaying_llvms_default_reproduces_the_stock_build_on_the_corpus(
    evaluator: LLVMInlineEvaluator, sandbox: ProcessSandbox
) -> None:
    assert evaluator.baseline is not None
    for tier in evaluator.tiers:
        compiled = evaluator.decide_and_replay(Runner(sandbox, evaluator.limits), DEFAULT, tier)
        for unit in compiled:
            assert unit.sha256 == evaluator.baseline.stock_sha256[unit.name], unit.name
            assert unit.text_bytes == evaluator.baseline.stock[unit.name]
            assert unit.guard is None or unit.guard == evaluator.baseline.guards[unit.name]


def test_the_seed_passes_the_cascade_with_split_metrics(
    evaluator: LLVMInlineEvaluator, sandbox: ProcessSandbox
) -> None:
    seed = Program.from_paths([TASK_DIR / "policy.py"], TASK_DIR)
    result = evaluator.evaluate(seed, sandbox, seed=1)
    assert result.ok, result.feedback
    assert [s.name for s in result.stages] == ["fast_tier", "train", "heldout"]
    assert list(result.metrics)[:3] == ["size_ratio", "heldout_ratio", "fast_ratio"]
    assert result.metrics["fast_ratio"] == evaluator.seed_fast_ratio
    assert 0.8 < result.metrics["size_ratio"] < 1.2 and 0.8 < result.metrics["heldout_ratio"] < 1.2
    assert result.metrics["text.zlib-minigzip"] > 0 and "text.zlib-gun" in result.metrics
    assert "inlined" in result.feedback and "x -Oz" in result.feedback
    assert result.metrics["compile_s"] > 0 and "s CPU" in result.feedback
    # At its default knobs the seed is LLVM's own -Oz rule: every object is stock -Oz's.
    assert result.metrics["size_ratio"] == result.metrics["heldout_ratio"] == 1.0


def test_a_worse_fast_tier_skips_the_training_corpus(
    evaluator: LLVMInlineEvaluator, sandbox: ProcessSandbox
) -> None:
    result = evaluator.evaluate(policy("return True"), sandbox, seed=1)
    assert result.status == "fast_tier_failed"
    assert "worse than the seed's" in result.feedback
    assert [s.name for s in result.stages] == ["fast_tier"]


def test_a_hostile_candidate_fails_and_the_next_one_is_scored(
    evaluator: LLVMInlineEvaluator, sandbox: ProcessSandbox
) -> None:
    hostile = evaluator.evaluate(policy("while True:\n    pass"), sandbox, seed=1)
    assert hostile.status == "fast_tier_failed" and "took longer than" in hostile.feedback
    after = evaluator.evaluate(DEFAULT, sandbox, seed=2)
    assert after.ok, after.feedback  # LLVM's own advice rebuilds the reference, stock -Oz
    assert after.metrics["size_ratio"] == after.metrics["heldout_ratio"] == 1.0


def test_an_agents_draft_runs_the_fast_tier_without_prepare(sandbox: ProcessSandbox) -> None:
    spec = TaskSpec.model_validate(yaml.safe_load((TASK_DIR / "task.yaml").read_text()))
    fresh = LLVMInlineEvaluator(spec.evaluator.params, TASK_DIR)
    fresh.limits = spec.sandbox.limits()
    drafted = fresh.draft(Program.from_paths([TASK_DIR / "policy.py"], TASK_DIR), sandbox, seed=0)
    assert drafted.ok and [s.name for s in drafted.stages] == ["fast_tier"]
    assert 0.8 < drafted.metrics["fast_ratio"] < 1.2
    broken = fresh.draft(policy("raise KeyError('no such feature')"), sandbox, seed=0)
    assert broken.status == "fast_tier_failed" and "KeyError" in broken.feedback
