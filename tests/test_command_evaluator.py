"""The command evaluator on real sandboxes: shell commands build and run candidates of any
language and any number of files, metrics come from the run's last JSON line or its
metrics.json, and a trusted check.py outside the sandbox rejects wrong output or replaces
the claimed metrics."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evolve.evaluators.command import CommandEvaluator
from evolve.evaluators.command.evaluator import RUN_WALL
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.watchdog import sandbox_time
from evolve.store import Store
from evolve.task.loading import TaskFileError, load_task
from tests.conftest import open_backend

ROOT = Path(__file__).resolve().parent.parent
EVOLVE = [sys.executable, "-m", "evolve"]
WORDFREQ = ROOT / "tasks" / "command_wordfreq"
BACKENDS = ["process", pytest.param("docker", marks=pytest.mark.docker)]
LIMITS = Limits(timeout_s=20.0)

MAIN_C = """\
#include <stdio.h>
#include "scale.h"
int main(void) {
    printf("building is not running\\n");
    printf("{\\"value\\": %d, \\"name\\": \\"c\\", \\"fast\\": true}\\n", scale(21));
    return 0;
}
"""
SCALE_H = "int scale(int x);\n"
SCALE_C = """\
// EVOLVE-BLOCK-START
int scale(int x) { return 2 * x; }
// EVOLVE-BLOCK-END
"""
CHECK = """\
def check(outputs, metrics):
    answer = outputs.get("answer.txt")
    if answer is None:
        raise ValueError("no answer.txt")
    if answer.strip() != b"42":
        raise ValueError(f"answer.txt says {answer.strip()!r}, not 42")
    return {"trusted": 1.0}
"""


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = open_backend(request.param)
    yield box
    box.close()


def script(body: str) -> Program:
    """A one-file shell candidate: `body` is its EVOLVE-BLOCK."""
    block = textwrap.dedent(body).strip()
    return Program({"prog.sh": f"# EVOLVE-BLOCK-START\n{block}\n# EVOLVE-BLOCK-END\n"})


def make(
    folder: Path, params: Mapping[str, Any], files: Mapping[str, str] | None = None
) -> CommandEvaluator:
    """The evaluator of a task folder holding `files`, by path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return CommandEvaluator(params, folder)


def evaluate(
    evaluator: CommandEvaluator,
    sandbox: Sandbox,
    program: Program,
    *,
    limits: Limits = LIMITS,
    seed: int = 0,
) -> EvalResult:
    evaluator.limits = limits
    evaluator.prepare(program, sandbox, Path("/nonexistent"))
    return evaluator.evaluate(program, sandbox, seed=seed)


def test_a_multi_file_c_candidate_is_built_then_run(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"build": "cc -O2 -o prog main.c scale.c", "run": "./prog"})
    program = Program({"scale.c": SCALE_C, "main.c": MAIN_C, "scale.h": SCALE_H})
    result = evaluate(evaluator, sandbox, program)
    assert result.ok, result.feedback
    assert [s.name for s in result.stages] == ["build", "run"]
    assert result.metrics["value"] == 42.0 and result.metrics["fast"] == 1.0
    assert result.artifacts["name"] == "c" and "name:\nc" in result.feedback
    assert 0 < result.metrics[RUN_WALL] < 20


def test_a_build_error_fails_the_build_with_the_compilers_words(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    evaluator = make(tmp_path, {"build": "cc -o prog main.c scale.c", "run": "./prog"})
    broken = SCALE_C.replace("return 2 * x;", "return 2 * ;")
    program = Program({"scale.c": broken, "main.c": MAIN_C, "scale.h": SCALE_H})
    result = evaluate(evaluator, sandbox, program)
    assert result.status == "build_failed"
    assert [s.name for s in result.stages] == ["build"]
    assert "the build: exited with code 1" in result.feedback
    assert "scale.c:2" in result.feedback and "error" in result.feedback
    assert "scale.c:2" in result.artifacts["build.stderr"]
    assert result.metrics == {}


def test_build_warnings_reach_the_feedback_of_a_passing_build(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    evaluator = make(tmp_path, {"build": "echo beware >&2; touch made", "run": "ls made"})
    result = evaluate(evaluator, sandbox, script("echo unused"))
    assert result.status == "run_failed"  # `ls made` found the file, and printed no metrics
    assert "[build] warnings:\nbeware" in result.feedback
    assert "the last line of stdout is not JSON" in result.feedback and ": made" in result.feedback


def test_metrics_come_from_the_last_json_line_the_rest_becoming_artifacts(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    program = script("""
        echo '{"ignored": 1}'
        echo 'log line' >&2
        echo '{"speed": 2.5, "ok": false, "note": "fine", "sizes": [1, 2], "none": null}'
        echo
    """)
    result = evaluate(evaluator, sandbox, program)
    assert result.ok, result.feedback
    assert set(result.metrics) == {"speed", "ok", RUN_WALL}
    assert (result.metrics["speed"], result.metrics["ok"]) == (2.5, 0.0)
    assert result.artifacts == {
        "note": "fine",
        "sizes": "[1, 2]",
        "none": "null",
        "run.stderr": "log line",
    }
    assert "metrics: speed=2.5, ok=0" in result.feedback and "note:\nfine" in result.feedback


def test_metrics_json_wins_over_stdout(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    program = script("""
        echo '{"from": "file", "score": 7}' > metrics.json
        echo '{"score": 1}'
    """)
    result = evaluate(evaluator, sandbox, program)
    assert result.ok, result.feedback
    assert result.metrics["score"] == 7.0 and result.artifacts["from"] == "file"


def test_a_run_must_report_a_json_object(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    silent = evaluate(evaluator, sandbox, script("true"))
    assert silent.status == "run_failed" and "its stdout being empty" in silent.feedback
    listed = evaluate(evaluator, sandbox, script("echo '[1, 2]'"))
    assert listed.status == "run_failed" and "a JSON list, not an object" in listed.feedback
    garbled = evaluate(evaluator, sandbox, script("echo '{score: 1}'"))
    assert garbled.status == "run_failed" and "is not JSON" in garbled.feedback


def test_past_the_output_cap_only_metrics_json_counts(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    limits = Limits(timeout_s=20, max_output_bytes=1000)
    flood = "head -c 5000 /dev/zero | tr '\\0' x; echo; echo '{\"score\": 1}'"
    lost = evaluate(evaluator, sandbox, script(flood), limits=limits)
    assert lost.status == "run_failed" and "its last line of stdout is lost" in lost.feedback
    kept = evaluate(evaluator, sandbox, script(f"{flood} > metrics.json"), limits=limits)
    assert kept.ok, kept.feedback


def test_the_sandbox_times_the_run_whatever_the_candidate_claims(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    result = evaluate(evaluator, sandbox, script(f"sleep 0.3; echo '{{\"{RUN_WALL}\": 0}}'"))
    assert result.ok, result.feedback
    assert result.metrics[RUN_WALL] >= 0.3


def test_a_crash_fails_the_run_with_stderr_and_stdout(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    result = evaluate(evaluator, sandbox, script("echo partial; echo boom >&2; kill -SEGV $$"))
    assert result.status == "run_failed"
    assert "the run: exited with code 139" in result.feedback  # sh's 128 + SIGSEGV
    assert "stderr:\nboom\nSegmentation fault" in result.feedback
    assert "stdout:\npartial" in result.feedback


def test_a_hanging_run_times_out(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"run": "sh prog.sh"})
    result = evaluate(evaluator, sandbox, script("sleep 600"), limits=Limits(timeout_s=1.5))
    assert result.status == "timeout"
    assert result.stages[-1].name == "run" and result.stages[-1].timed_out
    assert "the run: ran past its time limit of 1.5 s (sandbox.timeout_s)" in result.feedback


def test_check_rejects_a_wrong_output_and_replaces_the_claimed_metrics(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    params = {"run": "sh prog.sh", "check": "check.py", "outputs": ["answer.txt"]}
    evaluator = make(tmp_path, params, {"check.py": CHECK})
    right = evaluate(evaluator, sandbox, script("""echo 42 > answer.txt; echo '{"score": 1e9}'"""))
    assert right.ok, right.feedback
    assert set(right.metrics) == {"trusted", RUN_WALL} and right.metrics["trusted"] == 1.0
    assert "claimed metrics (check.py decides): score=1e+09" in right.feedback
    wrong = evaluate(evaluator, sandbox, script("""echo 41 > answer.txt; echo '{"score": 1e9}'"""))
    assert wrong.status == "check_failed" and wrong.metrics == {}
    assert "check.py rejected the run: ValueError: answer.txt says b'41', not 42" in wrong.feedback
    missing = evaluate(evaluator, sandbox, script("""echo '{"score": 1e9}'"""))
    assert missing.status == "check_failed" and "no answer.txt" in missing.feedback


def test_a_check_that_returns_none_lets_the_claims_stand(tmp_path: Path, sandbox: Sandbox) -> None:
    check = "def check(outputs, metrics):\n    assert metrics['score'] == 3\n"
    evaluator = make(tmp_path, {"run": "sh prog.sh", "check": "c.py"}, {"c.py": check})
    result = evaluate(evaluator, sandbox, script("""echo '{"score": 3}'"""))
    assert result.ok, result.feedback
    assert result.metrics["score"] == 3.0 and "let the claimed metrics stand" in result.feedback


def test_task_files_go_in_and_the_seed_reaches_the_run_as_1(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    params = {"run": 'sh harness.sh "$1"', "files": ["harness.sh", "data/*.txt"]}
    files = {
        "harness.sh": 'n=$(cat data/*.txt | wc -l)\necho "{\\"lines\\": $n, \\"seed\\": $1}"\n',
        "data/a.txt": "1\n2\n",
        "data/b.txt": "3\n",
        "data/skip.md": "not shipped\n",
    }
    evaluator = make(tmp_path, params, files)
    assert sorted(evaluator.files) == ["data/a.txt", "data/b.txt", "harness.sh"]
    result = evaluate(evaluator, sandbox, script("true"), seed=1234)
    assert result.ok, result.feedback
    assert (result.metrics["lines"], result.metrics["seed"]) == (3.0, 1234.0)


def test_a_binary_task_file_goes_in_as_its_bytes(tmp_path: Path, sandbox: Sandbox) -> None:
    picture = bytes(range(256)) * 4  # no text encoding reads this
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "image.bin").write_bytes(picture)
    evaluator = make(tmp_path, {"run": 'echo "{\\"bytes\\": $(wc -c < data/image.bin)}"',
                                "files": ["data/*.bin"]})  # fmt: skip
    assert evaluator.files == {"data/image.bin": picture}
    result = evaluate(evaluator, sandbox, script("true"))
    assert result.ok, result.feedback
    assert result.metrics["bytes"] == len(picture)


def test_a_metrics_json_left_by_the_build_is_not_the_runs(tmp_path: Path, sandbox: Sandbox) -> None:
    params = {"build": "echo '{\"score\": 5}' > metrics.json", "run": "true"}
    result = evaluate(make(tmp_path, params), sandbox, script("true"))
    assert result.status == "run_failed" and "reported no metrics" in result.feedback


def test_the_deadline_counts_the_build_and_the_run(tmp_path: Path) -> None:
    limits = Limits(timeout_s=7)
    built = make(tmp_path, {"build": "true", "run": "true"})
    assert built.worst_case_s(limits) == sandbox_time(2, limits) + 10
    assert make(tmp_path, {"run": "true"}).worst_case_s(limits) == sandbox_time(1, limits) + 10
    assert built.metric_problem("anything") is None


def test_a_program_file_may_not_take_the_evaluators_names(tmp_path: Path, sandbox: Sandbox) -> None:
    evaluator = make(tmp_path, {"run": "true"})
    program = Program({"metrics.json": "# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n"})
    with pytest.raises(RuntimeError, match=r"may not be named metrics\.json"):
        evaluator.prepare(program, sandbox, tmp_path)


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ("{run: x, buidl: y}", "evaluator.params.buidl: unknown key"),
        ("{build: y}", "evaluator.params.run: required but missing"),
        ("{run: ''}", "evaluator.params.run: String should have at least 1 character"),
        ("{run: x, outputs: [a, ../b], check: c.py}", "evaluator.params.outputs[1]: '../b'"),
        (
            "{run: x, outputs: [metrics.json], check: c.py}",
            "evaluator.params.outputs[0]: 'metrics.json' is collected already",
        ),
        ("{run: x, outputs: [a]}", "evaluator.params: outputs are collected only for check"),
        ("{run: x, files: ['*.csv']}", "evaluator.params.files: '*.csv' matches no file"),
        (
            "{run: x, files: ['*.py'], check: c.py}",
            "evaluator.params.files: '*.py' matches the check file",
        ),
        ("{run: x, check: nope.py}", "evaluator.params.check: cannot read 'nope.py'"),
        ("{run: x, check: broken.py}", "evaluator.params.check: broken.py:1: invalid syntax"),
        ("{run: x, check: other.py}", "evaluator.params.check: other.py: ValueError"),
    ],
)
def test_a_bad_param_fails_loading_on_its_line(tmp_path: Path, params: str, said: str) -> None:
    (tmp_path / "prog.sh").write_text("# EVOLVE-BLOCK-START\ntrue\n# EVOLVE-BLOCK-END\n")
    (tmp_path / "c.py").write_text("def check(outputs, metrics):\n    return None\n")
    (tmp_path / "broken.py").write_text("def check(:\n")
    (tmp_path / "other.py").write_text("def verify(metrics):\n    return None\n")
    (tmp_path / "task.yaml").write_text(
        "name: t\nseed: prog.sh\nevaluator:\n  name: command\n"
        f"  params: {params}\n"
        "objectives: [{name: run_wall_s, direction: minimize}]\nbudget: {candidates: 1}\n"
    )
    with pytest.raises(TaskFileError) as caught:
        load_task(tmp_path / "task.yaml")
    assert f"task.yaml:5: {said}" in str(caught.value)


def test_bad_params_fail_the_constructor(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        CommandEvaluator({"run": "x", "timeout": 3}, tmp_path)


def test_the_examples_check_holds_what_its_corpus_gives() -> None:
    """check.py's EXPECTED is copied from `gen_corpus.py --top`: the two must agree."""
    printed = subprocess.run(
        [sys.executable, "gen_corpus.py", "--top"], cwd=WORDFREQ, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    namespace: dict[str, Any] = {}
    exec((WORDFREQ / "check.py").read_text(), namespace)
    assert namespace["EXPECTED"] == ast.literal_eval(printed.stdout)


def test_the_wordfreq_example_passes_and_a_wrong_pipeline_is_rejected(sandbox: Sandbox) -> None:
    task = load_task(WORDFREQ / "task.yaml")
    evaluator = CommandEvaluator(task.spec.evaluator.params, task.root)
    seed = evaluate(evaluator, sandbox, task.seed)
    assert seed.ok, seed.feedback
    assert seed.metrics["correct"] == 1.0 and seed.metrics[RUN_WALL] > 0
    script_text = task.seed.files["wordfreq.sh"]
    case_blind = script_text.replace("| tr 'A-Z' 'a-z'", "")  # counts Sa apart from sa
    wrong = evaluate(
        evaluator, sandbox, task.seed.replace({**task.seed.files, "wordfreq.sh": case_blind})
    )
    assert wrong.status == "check_failed" and "rank 1: expected 71792 sa" in wrong.feedback


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.system
def test_evolve_runs_the_wordfreq_example(tmp_path: Path, backend: str) -> None:
    folder = tmp_path / "wordfreq"
    folder.mkdir()
    for path in WORDFREQ.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    spec = folder / "task.yaml"
    spec.write_text(spec.read_text().replace("candidates: 24", "candidates: 6"))
    done = subprocess.run(
        [*EVOLVE, "run", str(spec), "--sandbox", backend, "--plain", "--name", "words",
         "--workers", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "finished: candidate budget reached (6)" in done.stdout
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        assert store.status_counts("words") == {"ok": 6}
    assert (tmp_path / "results" / "words" / "best" / "wordfreq.sh").is_file()
