"""The python evaluator on real sandboxes: OpenEvolve evaluators run beside the candidate,
their results normalised, their cascade gated, their failures reported, and a verify.py
outside the sandbox that a candidate tampering with the evaluator cannot get past."""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evolve.evaluators.python import PythonEvaluator
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.watchdog import sandbox_time
from evolve.store import Store
from evolve.task.loading import TaskFileError, load_task
from tests.conftest import open_backend

ROOT = Path(__file__).resolve().parent.parent
EVOLVE = [sys.executable, "-m", "evolve"]

LOAD = """\
import importlib.util
import json
import os
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
"""


BACKENDS = ["process", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = open_backend(request.param)
    yield box
    box.close()


def task(folder: Path, evaluator: str, files: Mapping[str, str] | None = None) -> Path:
    """A task folder holding evaluator.py (after the LOAD helpers) and `files`, by name."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evaluator.py").write_text(LOAD + textwrap.dedent(evaluator))
    for name, text in (files or {}).items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def program(body: str) -> Program:
    block = textwrap.dedent(body).strip()
    return Program({"initial_program.py": f"# EVOLVE-BLOCK-START\n{block}\n# EVOLVE-BLOCK-END\n"})


def evaluate(
    folder: Path,
    sandbox: Sandbox,
    candidate: Program,
    params: Mapping[str, Any] | None = None,
    *,
    timeout_s: float = 20.0,
) -> EvalResult:
    evaluator = PythonEvaluator(params or {}, folder)
    evaluator.limits = Limits(timeout_s=timeout_s)
    evaluator.prepare(candidate, sandbox, folder)
    return evaluator.evaluate(candidate, sandbox, seed=0)


def stage_names(result: EvalResult) -> list[str]:
    return [stage.name for stage in result.stages]


def test_a_dict_keeps_numbers_as_metrics_bools_as_0_1_and_the_rest_as_artifacts(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(
        tmp_path,
        """
        def evaluate(program_path):
            value = load(program_path).VALUE
            return {"combined_score": value, "valid": True, "broken": False, "nan": float("nan"),
                    "note": "see the log", "shape": [3, 4]}
        """,
    )
    result = evaluate(folder, sandbox, program("VALUE = 0.25"))
    assert result.status == "ok", result.feedback
    assert stage_names(result) == ["evaluate"]
    assert set(result.metrics) == {"combined_score", "valid", "broken", "nan"}
    assert result.metrics["combined_score"] == 0.25
    assert (result.metrics["valid"], result.metrics["broken"]) == (1.0, 0.0)
    assert math.isnan(result.metrics["nan"])  # kept: scoring refuses it, not the evaluator
    assert result.artifacts["note"] == "see the log"
    assert result.artifacts["shape"] == "[3, 4]"
    assert "note:\nsee the log" in result.feedback
    assert "combined_score=0.25" in result.feedback


def test_without_a_combined_score_the_mean_of_the_metrics_is_given_that_name(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """As OpenEvolve ranks such a program, so that a translated config can name it."""
    folder = task(
        tmp_path,
        """
        def evaluate(program_path):
            return {"accuracy": load(program_path).VALUE, "speed": 0.5, "label": "fast"}
        """,
    )
    result = evaluate(folder, sandbox, program("VALUE = 0.25"))
    assert result.status == "ok", result.feedback
    assert result.metrics["combined_score"] == pytest.approx((0.25 + 0.5) / 2)
    assert "combined_score 0.375: the mean of 2 metrics" in result.feedback


def test_an_evaluation_result_works_without_openevolve_installed(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    assert importlib.util.find_spec("openevolve") is None, "this test needs OpenEvolve absent"
    folder = task(
        tmp_path,
        """
        from openevolve.evaluation_result import EvaluationResult

        def evaluate(program_path):
            value = load(program_path).VALUE
            stand_in = getattr(sys.modules["openevolve"], "__file__", None) is None
            return EvaluationResult(
                metrics={"combined_score": value, "stand_in": stand_in, "why": "a reason"},
                artifacts={"log": "line one\\nline two", "raw": b"bytes too"},
            )
        """,
    )
    result = evaluate(folder, sandbox, program("VALUE = 0.5"))
    assert result.status == "ok", result.feedback
    assert result.metrics == {"combined_score": 0.5, "stand_in": 1.0}
    assert result.artifacts["log"] == "line one\nline two"
    assert result.artifacts["raw"] == "bytes too"
    assert result.artifacts["why"] == "a reason"
    assert "line one\nline two" in result.feedback


CASCADE = """
def evaluate_stage1(program_path):
    return load(program_path).STAGE1

def evaluate_stage2(program_path):
    return {"combined_score": 0.9, "second": 2.0, "first": 10.0}

def evaluate_stage3(program_path):
    return {"third": 3.0}

def evaluate(program_path):
    return {"single": 1.0}
"""


def test_the_cascade_stops_below_a_threshold_and_says_so(tmp_path: Path, sandbox: Sandbox) -> None:
    folder = task(tmp_path, CASCADE)
    low = evaluate(folder, sandbox, program('STAGE1 = {"combined_score": 0.3, "first": 1.0}'))
    assert low.status == "ok", low.feedback  # stopped by a gate: scored on what it reached
    assert stage_names(low) == ["stage1"]
    assert low.metrics == {"combined_score": 0.3, "first": 1.0}
    assert "score 0.3 (combined_score) is below the threshold 0.5" in low.feedback
    assert "stage2 did not run" in low.feedback

    # Without combined_score the gate compares the mean of the metrics: (0.2 + 0.6) / 2.
    mean = evaluate(folder, sandbox, program('STAGE1 = {"a": 0.2, "b": 0.6}'))
    assert stage_names(mean) == ["stage1"]
    assert "score 0.4 (mean of 2 metrics)" in mean.feedback


def test_the_cascade_runs_on_above_its_thresholds_later_stages_winning(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(tmp_path, CASCADE)
    high = program('STAGE1 = {"combined_score": 0.8, "first": 1.0}')
    result = evaluate(folder, sandbox, high)
    assert result.status == "ok", result.feedback
    assert stage_names(result) == ["stage1", "stage2", "stage3"]
    assert result.metrics == {"combined_score": 0.9, "first": 10.0, "second": 2.0, "third": 3.0}

    # The thresholds come from the params; a stage without one lets the next one run.
    low = program('STAGE1 = {"combined_score": 0.3}')
    assert stage_names(evaluate(folder, sandbox, low, {"cascade_thresholds": [0.2]})) == [
        "stage1",
        "stage2",
        "stage3",
    ]
    stopped = evaluate(folder, sandbox, low, {"cascade_thresholds": [0.2, 0.95]})
    assert stage_names(stopped) == ["stage1", "stage2"]
    assert "below the threshold 0.95, so stage3 did not run" in stopped.feedback

    single = evaluate(folder, sandbox, high, {"cascade": False})
    assert stage_names(single) == ["evaluate"]
    assert single.metrics == {"single": 1.0, "combined_score": 1.0}  # the mean, named

    evaluator = PythonEvaluator({}, folder)
    evaluator.limits = Limits(timeout_s=20)
    drafted = evaluator.draft(high, sandbox, seed=0)  # the first stage only
    assert stage_names(drafted) == ["stage1"] and drafted.ok


def test_an_exception_fails_its_stage_with_the_traceback_and_stderr(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(
        tmp_path,
        """
        def evaluate_stage1(program_path):
            return {"combined_score": 1.0}

        def evaluate_stage2(program_path):
            print("stderr-marker-51", file=sys.stderr)
            load(program_path).check()
        """,
    )
    candidate = program("""
        def check():
            raise ValueError("no packing here")
    """)
    result = evaluate(folder, sandbox, candidate)
    assert result.status == "stage2_failed"
    assert stage_names(result) == ["stage1", "stage2"]
    failed = result.stages[-1]
    # The exception is on the stage's first line, where every one-line view reads it.
    assert failed.feedback.splitlines()[0] == (
        "evaluate_stage2(program_path) raised ValueError: no packing here"
    )
    assert "Traceback (most recent call last)" in failed.feedback
    assert "stderr-marker-51" in failed.feedback
    assert "ValueError: no packing here" in result.artifacts["stage2.traceback"]
    assert "stderr-marker-51" in result.artifacts["stage2.stderr"]


def test_artifacts_are_clipped_in_the_feedback_and_the_record(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(
        tmp_path,
        """
        def evaluate(program_path):
            artifacts = {"huge": "x" * 200_000}
            artifacts.update({f"item{i:03}": "y" * 3000 for i in range(100)})
            return {"combined_score": 1.0, **artifacts}
        """,
    )
    result = evaluate(folder, sandbox, program("pass"))
    assert result.status == "ok", result.feedback
    assert len(result.feedback) < 8000
    assert "[... 198500 more characters cut]" in result.feedback
    assert "(not shown, the feedback is full: " in result.feedback
    assert len(result.artifacts["huge"]) < 1600
    assert len(result.artifacts) == 65 and "(more artifacts)" in result.artifacts


def test_too_many_metrics_fail_the_stage(tmp_path: Path, sandbox: Sandbox) -> None:
    folder = task(
        tmp_path, "def evaluate(program_path):\n    return {str(i): i for i in range(300)}\n"
    )
    result = evaluate(folder, sandbox, program("pass"))
    assert result.status == "evaluate_failed"
    assert "300 metrics, over the cap of 256" in result.feedback


def test_a_hanging_evaluator_is_killed_at_the_sandbox_timeout(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(
        tmp_path,
        """
        def evaluate(program_path):
            while True:
                pass
        """,
    )
    started = time.monotonic()
    result = evaluate(folder, sandbox, program("pass"), timeout_s=2)
    assert time.monotonic() - started < 15
    assert result.status == "timeout"
    # Timed out by the timer at timeout_s, or at the CPU limit it sets, in the limit's words.
    assert re.search(r"its (CPU )?time limit.* 2 s.*\(sandbox\.timeout_s", result.feedback)


@pytest.mark.parametrize(
    ("ending", "said"),
    [
        ("os.kill(os.getpid(), 9)", "killed by signal 9"),
        ("os._exit(3)", "exited with code 3"),
        ("os._exit(0)", "without sending its result"),
        ("sys.exit(0)", "SystemExit"),
    ],
)
def test_an_evaluator_that_ends_its_own_process_fails_saying_how(
    tmp_path: Path, sandbox: Sandbox, ending: str, said: str
) -> None:
    folder = task(tmp_path, f"def evaluate(program_path):\n    {ending}\n")
    result = evaluate(folder, sandbox, program("pass"))
    assert result.status == "evaluate_failed"
    assert said in result.feedback


# Only the job's work dir holds the program: an evaluator that opens it at its top cannot be
# imported warm, so each stage imports it cold, in a fresh interpreter.
COLD = 'open("initial_program.py").close()\n'


FORGED = '{"metrics": {"combined_score": 1.0}, "artifacts": {}}'


def framed(data: str) -> str:
    """`data` as the runner frames it on its result channel."""
    return f"EVOLVE-RESULT {len(data)}\n{data}"


FRAME = framed(FORGED)


@pytest.mark.parametrize("start", ["warm", "cold"])
@pytest.mark.parametrize("written", ["not json", FORGED])
def test_a_result_file_the_candidate_writes_at_exit_or_meanwhile_counts_for_nothing(
    tmp_path: Path, sandbox: Sandbox, written: str, start: str
) -> None:
    """The result travels over the job's result channel, never a file: the runner's old
    result file, rewritten by an exit handler and by a thread that never stops, is not read,
    and the exit handler never runs (the runner ends with os._exit)."""
    evaluator = "def evaluate(program_path):\n    return load(program_path).run()\n"
    folder = task(tmp_path, (COLD if start == "cold" else "") + evaluator)
    candidate = program(f"""
        import atexit
        import threading

        def forge():
            for name in ("__evolve_result__.json", "result.json"):
                with open(name, "w") as stream:
                    stream.write({written!r})

        def keep_forging():
            while True:
                forge()

        def run():
            atexit.register(forge)
            threading.Thread(target=keep_forging, daemon=True).start()
            return {{"combined_score": 0.1}}
    """)
    result = evaluate(folder, sandbox, candidate)
    assert result.status == "ok", result.feedback
    assert result.metrics["combined_score"] == 0.1


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_frame_the_candidate_writes_into_the_channel_fails_the_stage(
    tmp_path: Path, sandbox: Sandbox, start: str
) -> None:
    """A candidate that finds the runner's private descriptor and sends a forged frame
    first: the channel then holds two frames, and the stage fails rather than crown either."""
    evaluator = "def evaluate(program_path):\n    return load(program_path).run()\n"
    folder = task(tmp_path, (COLD if start == "cold" else "") + evaluator)
    candidate = program(f"""
        import os

        def run():
            for name in os.listdir("/proc/self/fd"):
                fd = int(name)
                try:
                    if fd > 2 and os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
                        os.write(fd, {FRAME!r}.encode())
                except OSError:
                    pass
            return {{"combined_score": 0.1}}
    """)
    result = evaluate(folder, sandbox, candidate)
    assert result.status == "evaluate_failed", result.feedback
    assert "something in the job wrote to it" in result.feedback
    assert "combined_score" not in result.metrics


def test_what_the_candidate_prints_lands_in_the_log_not_the_channel(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(tmp_path, "def evaluate(program_path):\n    return load(program_path).run()\n")
    candidate = program(f"""
        import os
        import sys

        def run():
            print({FRAME!r})
            sys.stdout.flush()
            os.write(1, b"written to descriptor 1\\n")
            return {{"combined_score": 0.1}}
    """)
    result = evaluate(folder, sandbox, candidate)
    assert result.status == "ok", result.feedback
    assert result.metrics["combined_score"] == 0.1
    logged = result.artifacts["evaluate.stderr"]
    assert "EVOLVE-RESULT" in logged and "written to descriptor 1" in logged


def test_an_artifact_larger_than_the_output_cap_arrives_clipped(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """The runner clips each artifact before it is sent, so a huge one neither fills the
    channel past the sandbox's output cap nor loses the stage's metrics; the cut is counted
    whole."""
    evaluator = """
        def evaluate(program_path):
            return {"combined_score": 0.5, "log": "x" * (3 * 1024 * 1024) + "END"}
    """
    result = evaluate(task(tmp_path, evaluator), sandbox, program("pass"))
    assert result.status == "ok", result.feedback
    assert result.metrics["combined_score"] == 0.5
    cut = 3 * 1024 * 1024 + len("END") - 1500
    assert result.artifacts["log"].endswith(f"\n[... {cut} more characters cut]")


@pytest.mark.parametrize(
    ("written", "said"),
    [
        (b"not a frame", "bytes the runner did not send"),
        (framed("not json").encode(), "not JSON"),
        (framed(FORGED.replace("1.0", '"1"')).encode(), "malformed entries"),
        (
            FRAME.encode()[:-1],
            f"holds {len(FORGED) - 1} bytes where its header announced {len(FORGED)}",
        ),
    ],
)
def test_a_result_the_candidate_makes_the_runner_send_badly_fails(
    tmp_path: Path, sandbox: Sandbox, written: bytes, said: str
) -> None:
    folder = task(tmp_path, "def evaluate(program_path):\n    return load(program_path).run()\n")
    candidate = program(f"""
        import os
        import sys

        def forge(channel, outcome):
            os.write(channel, {written!r})
            os._exit(0)

        def run():
            sys.modules["__evolve_warm__"].send = forge
            return {{"combined_score": 0.1}}
    """)
    result = evaluate(folder, sandbox, candidate)
    assert result.status == "evaluate_failed"
    assert said in result.feedback


TAMPERED = """
def total(values):
    return sum(values)

def evaluate(program_path):
    values = load(program_path).run()
    return {"combined_score": total(values), "values": json.dumps(values)}
"""

VERIFY = """
import json
import math

def verify(metrics, artifacts):
    values = json.loads(artifacts["values"])
    if any(not 0 <= value <= 1 for value in values):
        raise ValueError(f"values out of range: {values}")
    return {"combined_score": math.fsum(values)}
"""

# The candidate shares the evaluator's process: it replaces the evaluator's own scoring.
CHEAT = """
import sys

sys.modules["evaluator"].total = lambda values: 1e6

def run():
    return [0.25, 0.5]
"""


def test_a_candidate_that_tampers_with_the_evaluator_wins_without_verify(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(tmp_path, TAMPERED)
    result = evaluate(folder, sandbox, program(CHEAT))
    assert result.status == "ok", result.feedback
    assert result.metrics["combined_score"] == 1e6  # the documented trust model


def test_verify_scores_the_truth_and_rejects_what_it_cannot_check(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    folder = task(tmp_path, TAMPERED, {"verify.py": VERIFY})
    result = evaluate(folder, sandbox, program(CHEAT), {"verify": "verify.py"})
    assert result.status == "ok", result.feedback
    assert stage_names(result) == ["evaluate", "verify"]
    assert result.metrics == {"combined_score": 0.75}  # only what verify returns
    assert "claimed metrics (not scored: verify.py decides): combined_score=1e+06" in (
        result.feedback
    )

    forged = program("def run():\n    return [0.5, 7.0]")
    rejected = evaluate(folder, sandbox, forged, {"verify": "verify.py"})
    assert rejected.status == "verify_failed"
    assert "verify.py rejected the result: ValueError: values out of range" in rejected.feedback
    assert rejected.metrics == {}


def test_verify_py_never_reaches_the_sandbox(tmp_path: Path, sandbox: Sandbox) -> None:
    marker = "VERIFY-SECRET-" + "7c1e"  # never written whole anywhere but verify.py
    folder = task(
        tmp_path,
        "def evaluate(program_path):\n    return load(program_path).look()\n",
        {
            "verify.py": f"def verify(metrics, artifacts):\n    return dict(metrics)\n# {marker}\n",
            "data.json": '{"shipped": true}',
        },
    )
    candidate = program("""
        import os

        def look():
            seen = {}
            for folder in {os.getcwd(), os.path.dirname(os.path.abspath(__file__))}:
                for where, _, names in os.walk(folder):
                    for name in names:
                        with open(os.path.join(where, name), "rb") as stream:
                            seen[name] = stream.read()
            wanted = ("VERIFY-SECRET-" + "7c1e").encode()
            return {
                "data_shipped": "data.json" in seen,
                "verify_file": "verify.py" in seen,
                "marker": any(wanted in text for text in seen.values()),
                "files": sorted(seen),
            }
    """)
    result = evaluate(folder, sandbox, candidate, {"verify": "verify.py"})
    assert result.status == "ok", result.feedback
    assert result.metrics["data_shipped"] == 1.0  # the default ships the task's other files
    assert (result.metrics["verify_file"], result.metrics["marker"]) == (0.0, 0.0)
    assert "evaluator.py" in result.artifacts["files"]
    assert "verify.py" not in result.artifacts["files"]
    assert marker not in result.feedback + "".join(result.artifacts.values())


def write_task_yaml(folder: Path, params: str) -> Path:
    (folder / "initial_program.py").write_text("# EVOLVE-BLOCK-START\nX = 1\n# EVOLVE-BLOCK-END\n")
    path = folder / "task.yaml"
    path.write_text(
        "name: t\n"
        "seed: initial_program.py\n"
        "evaluator:\n"
        "  name: python\n"
        f"  params: {params}\n"
        "objectives:\n"
        "  - {name: combined_score, direction: maximize}\n"
        "budget: {candidates: 2}\n"
        "sandbox: {backend: process}\n"
    )
    return path


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ("{evaluater: evaluator.py}", "task.yaml:5: evaluator.params.evaluater"),
        ("{cascade_thresholds: [0.5, high]}", "task.yaml:5: evaluator.params.cascade_thresholds"),
        ("{evaluator: nope.py}", "cannot read 'nope.py'"),
        ("{verify: verify.py, files: ['*.py']}", "matches the verify file"),
        ("{files: ['data/*.csv']}", "matches no file"),
        ("{files: ['../*.py']}", "give globs relative to the task folder"),
        ("{evaluator: empty.py}", "empty.py defines no evaluate or evaluate_stage1"),
        ("{evaluator: broken.py}", "broken.py:1: invalid syntax"),
    ],
)
def test_a_bad_param_fails_loading_on_its_line(tmp_path: Path, params: str, said: str) -> None:
    task(tmp_path, "def evaluate(program_path):\n    return {}\n", {"verify.py": VERIFY})
    (tmp_path / "empty.py").write_text("def helper(program_path):\n    return {}\n")
    (tmp_path / "broken.py").write_text("def evaluate(:\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(write_task_yaml(tmp_path, params))
    assert said in str(caught.value)
    assert re.search(r"task\.yaml:5: evaluator\.params", str(caught.value))


def test_bad_params_fail_the_constructor(tmp_path: Path) -> None:
    task(tmp_path, "def evaluate(program_path):\n    return {}\n")
    with pytest.raises(ValidationError, match="cascade_thresholds"):
        PythonEvaluator({"cascade_thresholds": [float("nan")]}, tmp_path)
    evaluator = PythonEvaluator({}, tmp_path)
    assert evaluator.metric_problem("anything") is None


def test_the_deadline_counts_one_sandbox_run_per_stage_and_one_for_the_import(
    tmp_path: Path,
) -> None:
    folder = task(tmp_path, CASCADE)
    limits = Limits(timeout_s=7)
    three = PythonEvaluator({}, folder).worst_case_s(limits)
    one = PythonEvaluator({"cascade": False}, folder).worst_case_s(limits)
    assert three - one == pytest.approx(sandbox_time(2, limits))
    assert one >= sandbox_time(2, limits)  # a warm server may import the evaluator first


PACKING_CHEAT = """\
import sys

# EVOLVE-BLOCK-START
sys.modules["evaluator"].problem = lambda centers, radii: None  # the evaluator's check, gone


def run_packing():
    radii = [RADIUS] * 26
    return [(0.5, 0.5)] * 26, radii, sum(radii)


# EVOLVE-BLOCK-END
"""


@pytest.mark.parametrize(
    ("radius", "said"), [("0.5", "circles 0 and 1 overlap"), ('float("nan")', "is not finite")]
)
def test_circle_packing_verify_rejects_what_its_evaluator_was_made_to_pass(
    sandbox: Sandbox, radius: str, said: str
) -> None:
    folder = ROOT / "tasks" / "circle_packing"
    evaluator = PythonEvaluator({"evaluator": "evaluator.py", "verify": "verify.py"}, folder)
    evaluator.limits = Limits(timeout_s=20)
    seed = load_task(folder / "task.yaml").seed
    assert evaluator.evaluate(seed, sandbox, seed=0).metrics["combined_score"] > 0.89

    cheat = Program({"initial_program.py": PACKING_CHEAT.replace("RADIUS", radius)})
    result = evaluator.evaluate(cheat, sandbox, seed=0)
    assert result.status == "verify_failed"
    assert said in result.feedback
    assert "validity=1" in result.stages[0].feedback  # what the tampered evaluator claimed


def test_the_function_minimization_example_runs_its_cascade(sandbox: Sandbox) -> None:
    loaded = load_task(ROOT / "tasks" / "function_minimization" / "task.yaml")
    evaluator = PythonEvaluator(loaded.spec.evaluator.params, loaded.root)
    evaluator.limits = Limits(timeout_s=20)
    result = evaluator.evaluate(loaded.seed, sandbox, seed=0)
    assert result.status == "ok", result.feedback
    assert stage_names(result) in (["stage1", "verify"], ["stage1", "stage2", "verify"])
    assert 0 < result.metrics["combined_score"] <= 1
    assert loaded.unverified is None  # its verify.py recomputes what the evaluator claims


BETTER_PROMPT = """# EVOLVE-BLOCK-START
Reply in JSON with the keys "order" and "reply", concisely.
Apologise for delays. Never promise a refund. Escalate damaged items to a human.
# EVOLVE-BLOCK-END
"""


def test_the_prompt_task_scores_text_the_same_every_time_and_rewards_better_prompts(
    sandbox: Sandbox,
) -> None:
    loaded = load_task(ROOT / "tasks" / "prompt_optimization" / "task.yaml")
    evaluator = PythonEvaluator(loaded.spec.evaluator.params, loaded.root)
    evaluator.limits = Limits(timeout_s=20)
    first = evaluator.evaluate(loaded.seed, sandbox, seed=1)
    again = evaluator.evaluate(loaded.seed, sandbox, seed=2)
    assert first.status == "ok", first.feedback
    assert first.metrics == again.metrics, "no model, no noise: the same prompt, the same score"
    assert first.metrics["rubric"] < 0.5
    assert "machine_readable" in first.artifacts["failed_checks"]  # what the model is told

    better = evaluator.evaluate(Program({"prompt.txt": BETTER_PROMPT}), sandbox, seed=0)
    assert better.metrics["rubric"] == 1.0, better.artifacts.get("failed_checks")
    assert better.metrics["combined_score"] > first.metrics["combined_score"]


@pytest.mark.system
def test_evolve_runs_the_circle_packing_example(tmp_path: Path) -> None:
    folder = tmp_path / "circle_packing"
    shutil.copytree(ROOT / "tasks" / "circle_packing", folder)
    spec = folder / "task.yaml"
    spec.write_text(spec.read_text().replace("candidates: 100", "candidates: 8"))
    done = subprocess.run(
        [*EVOLVE, "run", str(spec), "--sandbox", "process", "--plain", "--name", "packing"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "finished: candidate budget reached (8)" in done.stdout
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        assert store.status_counts("packing") == {"ok": 8}
        scores = [score for _, _, score in store.scored("packing")]
    assert len(scores) == 8
    assert max(scores) >= 0.89  # the seed's sum of radii, about 2.369, over 2.635
