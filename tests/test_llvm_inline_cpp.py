"""The llvm_inline evaluator's C++ route with real clang-19, llvm-19-dev and the process sandbox.

The trusted advisor object is built once for the module (a few seconds); each policy then
costs a small compile and link. The fast-tier tests use the real corpus, as the Python
route's tests do.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evolve.evaluators.llvm_inline import LLVMInlineEvaluator
from evolve.evaluators.llvm_inline.jobs import manifest, run_driver
from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.evaluators.llvm_inline.plugin import PLUGIN, build_advisor, build_plugin
from evolve.evaluators.llvm_inline.units import Unit
from evolve.plugin.knobs import find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.plugin.stages import Runner, StageFailed
from evolve.sandboxes import ProcessSandbox
from evolve.task.schema import TaskSpec

ROOT = Path(__file__).resolve().parent.parent
CPP_TASK = ROOT / "tasks" / "llvm_inline_size_cpp"
PY_TASK = ROOT / "tasks" / "llvm_inline_size"


def _llvm_dev_missing() -> str | None:
    """Why the C++ route cannot be built here, or None."""
    for tool in ("clang-19", "clang++-19", "llvm-config-19"):
        if shutil.which(tool) is None:
            return f"needs {tool} (apt-get install clang-19 llvm-19-dev)"
    include = subprocess.run(
        ["llvm-config-19", "--includedir"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if not (Path(include) / "llvm" / "Analysis" / "InlineAdvisor.h").is_file():
        return "needs the llvm-19-dev headers (apt-get install llvm-19-dev)"
    return None


pytestmark = pytest.mark.skipif(_llvm_dev_missing() is not None, reason=str(_llvm_dev_missing()))

TINY = b"""
static int square(int x) { return x * x; }
static int add(int a, int b) { return square(a) + square(b); }
static int spin(int n) { int s = 0; for (int i = 0; i < n; i++) s += square(i) ^ s; return s; }
int sum(const int *p, int n) { int s = 0; for (int i = 0; i < n; i++) s += add(p[i], i); return s; }
int entry(int a) { return add(a, 3) + sum(&a, 1) + spin(a) + spin(a + 1); }
"""
TINY_UNIT = Unit("tiny", "tiny.c", "fast")
LIMITS = Limits(timeout_s=30)
LEVEL = LLVMInlineParams().opt_level


def cpp_policy(body: str, prelude: str = "") -> Program:
    """A C++ candidate whose shouldInline runs `body`."""
    return Program(
        {
            "policy.cpp": '#include "evolve_inline.h"\n// EVOLVE-BLOCK-START\n'
            + prelude
            + "bool shouldInline(const evolve::CallSite &site) {\n"
            + body
            + "\n}\n// EVOLVE-BLOCK-END\n"
        }
    )


def py_policy(expression: str) -> Program:
    return Program(
        {
            "policy.py": "# EVOLVE-BLOCK-START\ndef should_inline(f):\n"
            f"    return {expression}\n# EVOLVE-BLOCK-END\n"
        }
    )


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="module")
def advisor(sandbox: ProcessSandbox) -> bytes:
    return build_advisor(Runner(sandbox, LIMITS), LLVMInlineParams(policy_language="cpp"))


def decide_cpp(sandbox: ProcessSandbox, advisor: bytes, program: Program, **params: object):
    settings = LLVMInlineParams.model_validate({"policy_language": "cpp", **params})
    run = Runner(sandbox, LIMITS)
    plugin = build_plugin(run, settings, advisor, program)
    plan = manifest(settings, "decide", [TINY_UNIT], level=LEVEL, timeout_s=20, plugin=PLUGIN)
    return run_driver(run, plan, {"tiny.c": TINY}, {PLUGIN: plugin})


def decide_py(sandbox: ProcessSandbox, program: Program):
    plan = manifest(
        LLVMInlineParams(),
        "decide",
        [TINY_UNIT],
        level=LEVEL,
        timeout_s=20,
        policy="candidate/policy.py",
    )
    files = {f"candidate/{p}": t for p, t in program.as_bytes().items()}
    return run_driver(Runner(sandbox, LIMITS), plan, {"tiny.c": TINY}, files)


def replay(sandbox: ProcessSandbox, decisions: str):
    plan = manifest(
        LLVMInlineParams(),
        "replay",
        [TINY_UNIT],
        level=LEVEL,
        timeout_s=20,
        decisions={"tiny": decisions},
    )
    return run_driver(Runner(sandbox, LIMITS), plan, {"tiny.c": TINY})


@pytest.mark.parametrize(
    ("cpp", "python"),
    [
        ("site.cost_estimate < 0", 'f["cost_estimate"] < 0'),
        ("site.inlining_default == 1", 'f["inlining_default"] == 1'),
        (
            "site.callee_users <= 2 && site.cost_estimate < 100",
            'f["callee_users"] <= 2 and f["cost_estimate"] < 100',
        ),
        ("site.nr_ctant_params > 0", 'f["nr_ctant_params"] > 0'),
        ("true", "True"),
    ],
    ids=["cost", "llvm-default", "users-and-cost", "constant-args", "always"],
)
def test_a_cpp_rule_decides_like_the_same_python_rule(
    sandbox: ProcessSandbox, advisor: bytes, cpp: str, python: str
) -> None:
    (from_cpp,) = decide_cpp(sandbox, advisor, cpp_policy(f"return {cpp};"))
    (from_py,) = decide_py(sandbox, py_policy(python))
    assert from_cpp.decisions and from_cpp.decisions == from_py.decisions
    (replayed,) = replay(sandbox, from_cpp.decisions)  # the trusted run accepts them
    assert replayed.decisions == from_cpp.decisions and replayed.text_bytes > 0


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        (cpp_policy("return site.no_such_field < 0;"), "no member named 'no_such_field'"),
        (cpp_policy("return true", ""), "expected ';'"),
        (
            Program({"policy.cpp": "// EVOLVE-BLOCK-START\nint unrelated;\n// EVOLVE-BLOCK-END\n"}),
            "shouldInline",  # the link refuses an undefined shouldInline
        ),
    ],
    ids=["unknown-field", "syntax", "no-should-inline"],
)
def test_a_policy_that_does_not_build_fails_with_the_compilers_message(
    sandbox: ProcessSandbox, advisor: bytes, program: Program, expected: str
) -> None:
    settings = LLVMInlineParams(policy_language="cpp")
    with pytest.raises(StageFailed, match="the policy does not build") as failure:
        build_plugin(Runner(sandbox, LIMITS), settings, advisor, program)
    assert expected in failure.value.feedback


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("__builtin_trap();", "clang with the policy's plugin exited with code"),
        (
            "static volatile long n = 0; for (;;) n = n + 1;",
            "ran past 2s: does shouldInline loop",
        ),
    ],
    ids=["crash", "endless-loop"],
)
def test_a_plugin_that_crashes_or_loops_fails_without_killing_the_sandbox(
    sandbox: ProcessSandbox, advisor: bytes, body: str, expected: str
) -> None:
    with pytest.raises(StageFailed, match=expected) as failure:
        decide_cpp(sandbox, advisor, cpp_policy(body), plugin_timeout_s=2)
    assert not failure.value.timed_out


def evaluator_for(task_dir: Path) -> tuple[LLVMInlineEvaluator, Program]:
    spec = TaskSpec.model_validate(yaml.safe_load((task_dir / "task.yaml").read_text()))
    evaluator = LLVMInlineEvaluator(spec.evaluator.params, task_dir)
    evaluator.limits = spec.sandbox.limits()
    return evaluator, Program.from_paths([task_dir / path for path in spec.seed], task_dir)


@pytest.fixture(scope="module")
def cpp_evaluator(advisor: bytes) -> tuple[LLVMInlineEvaluator, Program]:
    evaluator, seed = evaluator_for(CPP_TASK)
    evaluator.advisor = advisor  # the same trusted object it would build itself
    return evaluator, seed


def test_the_cpp_seed_builds_and_scores_like_the_python_seed_on_the_fast_tier(
    sandbox: ProcessSandbox, cpp_evaluator: tuple[LLVMInlineEvaluator, Program]
) -> None:
    evaluator, seed = cpp_evaluator
    assert evaluator.params.policy_language == "cpp"
    drafted = evaluator.draft(seed, sandbox, seed=0)
    assert drafted.ok, drafted.feedback
    assert [s.name for s in drafted.stages] == ["build", "fast_tier"]
    assert 0.8 < drafted.metrics["fast_ratio"] < 1.2
    assert "inlined" in drafted.feedback
    python, python_seed = evaluator_for(PY_TASK)
    same_rule = python.draft(python_seed, sandbox, seed=0)
    assert drafted.metrics == same_rule.metrics  # same decisions, so the same objects


def test_the_seeds_decide_alike_with_every_knob_moved(
    sandbox: ProcessSandbox, cpp_evaluator: tuple[LLVMInlineEvaluator, Program]
) -> None:
    """At their default knobs every feature term is zero, so the seeds' agreement there says
    nothing about the features; moved knobs make each one count."""
    evaluator, cpp_seed = cpp_evaluator
    python, python_seed = evaluator_for(PY_TASK)
    moved = [-20, 400, 12, 30, 9, 15]  # the knobs in the seeds' common order
    drafts = []
    for route, seed in ((evaluator, cpp_seed), (python, python_seed)):
        knobs = find_knobs(seed)
        assert [k.value for k in knobs] == [5, 15000, 0, 0, 0, 0]
        tuned = set_knobs(seed, knobs, dict(enumerate(moved)))
        drafts.append(route.draft(tuned, sandbox, seed=0))
    from_cpp, from_py = drafts
    assert from_cpp.ok and from_py.ok, from_cpp.feedback + from_py.feedback
    assert from_cpp.metrics == from_py.metrics
    untuned = python.draft(python_seed, sandbox, seed=0)
    assert from_py.metrics["fast_ratio"] != untuned.metrics["fast_ratio"]  # they did move


def test_a_candidate_that_does_not_build_is_build_failed(
    sandbox: ProcessSandbox, cpp_evaluator: tuple[LLVMInlineEvaluator, Program]
) -> None:
    evaluator, _ = cpp_evaluator
    result = evaluator.draft(cpp_policy("return site.cost < 0;"), sandbox, seed=0)
    assert result.status == "build_failed"
    assert [s.name for s in result.stages] == ["build"]
    assert "no member named 'cost'" in result.feedback


def test_the_python_route_stays_the_default() -> None:
    assert LLVMInlineParams().policy_language == "python"
    with pytest.raises(ValueError, match="policy_language"):
        LLVMInlineParams.model_validate({"policy_language": "rust"})
