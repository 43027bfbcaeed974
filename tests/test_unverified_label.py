"""A run whose scores a candidate could forge says so: "unverified" beside its scores in
every view, and `evolve check` says why; a run whose scores are re-checked outside the
sandbox says nothing of the kind. And the shipped function_minimization task re-checks its
scores: a candidate that forges them is rejected, never crowned."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.evaluators.python import PythonEvaluator
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.stages import StageFailed
from evolve.store import Store
from evolve.task.loading import load_task
from tests.conftest import open_backend

ROOT = Path(__file__).resolve().parent.parent
EVOLVE = [sys.executable, "-m", "evolve"]
REASON = (
    "scores come from evaluator.py, which runs in the sandbox beside the candidate: a "
    "candidate can forge them; add a verify.py (see the README) to re-check them outside"
)

SEED = """\
# EVOLVE-BLOCK-START
X = 0.5  # @knob float 0.0..1.0
# EVOLVE-BLOCK-END
"""

EVALUATOR = """\
import importlib.util


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"combined_score": 1.0 - abs(module.X - 0.8), "x": repr(module.X)}
"""

VERIFY = """\
def verify(metrics, artifacts):
    x = float(artifacts["x"])
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x {x} is out of range")
    return {"combined_score": 1.0 - abs(x - 0.8)}
"""

TASK = """\
name: tiny
seed: initial_program.py
evaluator:
  name: python
  params:
    evaluator: evaluator.py
{verify}
objectives:
  - {{name: combined_score, direction: maximize}}
mutators:
  - {{name: autotuner}}
budget:
  candidates: 4
  wall_time_s: 200
sandbox:
  backend: process
  timeout_s: 20
"""


def make_task(folder: Path, *, verified: bool) -> Path:
    folder.mkdir()
    (folder / "initial_program.py").write_text(SEED)
    (folder / "evaluator.py").write_text(EVALUATOR)
    if verified:
        (folder / "verify.py").write_text(VERIFY)
    verify = "    verify: verify.py" if verified else ""
    (folder / "task.yaml").write_text(TASK.format(verify=verify))
    return folder / "task.yaml"


def evolve(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}  # rich tables on one line per row
    return subprocess.run(
        [*EVOLVE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def best_id(output: str) -> int:
    found = re.search(r"^best: candidate #(\d+)", output, re.MULTILINE)
    assert found, output
    return int(found.group(1))


def row(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if f" {name} " in f" {line} ")


@pytest.mark.system
def test_every_view_of_an_unverified_run_says_so_and_of_a_verified_one_does_not(
    tmp_path: Path,
) -> None:
    plain = make_task(tmp_path / "plain_task", verified=False)
    checked = make_task(tmp_path / "checked_task", verified=True)

    said = evolve(tmp_path, "check", str(plain), "--sandbox", "process")
    assert said.returncode == 0, said.stdout + said.stderr
    assert REASON in " ".join((said.stdout + said.stderr).split())
    said = evolve(tmp_path, "check", str(checked), "--sandbox", "process")
    assert said.returncode == 0, said.stdout + said.stderr
    assert "unverified" not in said.stdout + said.stderr

    runs = {}
    for name, path in (("plain", plain), ("checked", checked)):
        done = evolve(tmp_path, "run", str(path), "--sandbox", "process", "--plain", "--name", name)
        assert done.returncode == 0, done.stdout + done.stderr
        runs[name] = done.stdout + done.stderr
    figure = r"combined_score [\d.]+(, seed [\d.]+: [^;]+| \(the seed\))"
    ranked = "combined_score, higher is better"
    said_best = rf"^best: candidate #\d+, {figure} \(unverified\); {ranked}$"
    assert re.search(said_best, runs["plain"], re.M)
    assert "unverified" not in runs["checked"]

    for name in ("plain", "checked"):
        shown = evolve(tmp_path, "show", str(best_id(runs[name])))
        board = evolve(tmp_path, "leaderboard", name)
        report = evolve(tmp_path, "report", name, "-o", str(tmp_path / f"{name}.html"))
        for done in (shown, board, report):
            assert done.returncode == 0, done.stdout + done.stderr
        page = (tmp_path / f"{name}.html").read_text()
        texts = [shown.stdout, board.stdout, page]
        if name == "plain":
            assert all("unverified" in text for text in texts)
            assert REASON in " ".join(shown.stdout.split())
            assert "combined_score (unverified)" in board.stdout
        else:
            assert not any("unverified" in text for text in texts)

    listed = evolve(tmp_path, "runs")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "unverified" in row(listed.stdout, "plain")
    assert "unverified" not in row(listed.stdout, "checked")


def test_an_openevolve_folder_is_unverified(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("max_iterations: 2\n")
    (tmp_path / "initial_program.py").write_text(SEED)
    (tmp_path / "evaluator.py").write_text(EVALUATOR)
    assert load_task(tmp_path).unverified == REASON


@pytest.mark.parametrize(("check", "unverified"), [("", True), ("check: c.py", False)])
def test_a_command_task_is_unverified_without_check_py(
    tmp_path: Path, check: str, unverified: bool
) -> None:
    (tmp_path / "prog.sh").write_text("# EVOLVE-BLOCK-START\ntrue\n# EVOLVE-BLOCK-END\n")
    (tmp_path / "c.py").write_text("def check(outputs, metrics):\n    return None\n")
    (tmp_path / "task.yaml").write_text(
        "name: t\nseed: prog.sh\nevaluator:\n  name: command\n"
        f"  params: {{run: sh prog.sh, {check}}}\n"
        "objectives: [{name: run_wall_s, direction: minimize}]\nbudget: {candidates: 1}\n"
    )
    reason = load_task(tmp_path / "task.yaml").unverified
    assert (reason is not None) == unverified
    if unverified:
        assert "nothing checks its output: a candidate can forge them; add a check.py" in reason


BACKENDS = ["process", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = open_backend(request.param)
    yield box
    box.close()


FOLDER = ROOT / "tasks" / "function_minimization"
# Each forgery goes in front of the seed's search, which stays as it is.
FORGERIES = {
    # The evaluator's score function replaced, were the evaluator in the candidate's process.
    "patch": textwrap.dedent("""\
        if "evaluator" in sys.modules:
            sys.modules["evaluator"].score = lambda gap: 1.0
    """),
    # A result file of the candidate's own, written before the evaluator writes its own.
    "result": textwrap.dedent("""\
        with open("__evolve_result__.json", "w") as stream:
            stream.write('{"metrics": {"combined_score": 1.0}, "artifacts": {}}')
    """),
    # The shift read from the objective, to call it at the minimum.
    "shift": "run_search = lambda objective, *rest: objective(*objective.shift)",
    # The evaluator's memory read, where the shift and the best value are.
    "memory": 'open(f"/proc/{os.getppid()}/mem", "rb").close()',
}


def forged(forgery: str) -> Program:
    seed = load_task(FOLDER / "task.yaml").seed.files["initial_program.py"]
    body = seed if forgery != "shift" else seed + FORGERIES[forgery] + "\n"
    head = FORGERIES[forgery] if forgery != "shift" else ""
    return Program({"initial_program.py": f"import os\nimport sys\n{head}\n{body}"})


@pytest.mark.parametrize(
    ("forgery", "said"),
    [
        ("patch", None),
        ("result", None),
        ("shift", "AttributeError: 'Remote' object has no attribute 'shift'"),
        ("memory", "PermissionError"),
    ],
)
def test_function_minimization_keeps_the_score_out_of_the_candidates_reach(
    sandbox: Sandbox, forgery: str, said: str | None
) -> None:
    """The candidate searches in a process of its own: what it patches is its own, and the
    evaluator's memory is closed to it. Scored truly or failed, never crowned at 1."""
    loaded = load_task(FOLDER / "task.yaml")
    evaluator = PythonEvaluator(loaded.spec.evaluator.params, loaded.root)
    evaluator.limits = Limits(timeout_s=20)
    result = evaluator.evaluate(forged(forgery), sandbox, seed=0)
    if said is None:
        assert result.status == "ok", result.feedback
        assert result.stages[-1].name == "verify"
        assert result.metrics["combined_score"] < 0.99
    else:
        assert result.status == "stage1_failed", result.feedback
        assert said in result.feedback + result.artifacts.get("stage1.stderr", "")


def test_function_minimization_verify_recomputes_what_the_searches_give() -> None:
    """verify.py alone, on records a tampered evaluator could return: the score comes from
    the shift and the point, and a stage 1 that earned stage 2 must have it."""
    loaded = load_task(FOLDER / "task.yaml")
    verifier = PythonEvaluator(loaded.spec.evaluator.params, loaded.root).verifier
    assert verifier is not None
    two_cells_off = '[{"shift": [1.0, 1.0], "best": [3.0, 1.0]}]'  # a gap of about 4
    claims = {"first_gap": 0.0, "combined_score": 1.0}
    with pytest.raises(StageFailed, match=r"claimed first_gap 0\.0, but its searches give 4"):
        verifier(claims, {"stage1_searches": two_cells_off})
    exact = '[{"shift": [1.0, 1.0], "best": [1.0, 1.0]}]'  # a perfect stage 1
    with pytest.raises(StageFailed, match="stage 1 earned stage 2"):
        verifier(claims, {"stage1_searches": exact})
    moved = '[{"shift": [4.0, 1.0], "best": [4.0, 1.0]}]'  # a shift evaluator.py never draws
    with pytest.raises(StageFailed, match=r"outside \[-3, 3\]"):
        verifier({}, {"stage1_searches": moved})


@pytest.mark.system
def test_a_run_of_a_forging_seed_crowns_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "function_minimization"
    folder.mkdir()
    for name in ("evaluator.py", "searcher.py", "verify.py", "notes.md"):
        (folder / name).write_text((FOLDER / name).read_text())
    spec = (FOLDER / "task.yaml").read_text().replace("candidates: 100", "candidates: 3")
    (folder / "task.yaml").write_text(spec)
    (folder / "initial_program.py").write_text(forged("shift").files["initial_program.py"])
    done = evolve(tmp_path, "run", str(folder / "task.yaml"), "--sandbox", "process", "--plain",
                  "--name", "forged")  # fmt: skip
    assert done.returncode != 0, done.stdout + done.stderr
    assert "stage1_failed" in done.stdout
    assert "best: candidate" not in done.stdout
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        assert [score for _, _, score in store.scored("forged")] == []
