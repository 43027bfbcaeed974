"""Task files: good ones load from anywhere; each bad one names its file, line and field."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evolve.plugin.knobs import find_knobs
from evolve.task.loading import Problem, TaskFileError, load_task, make_evaluator, parse_task
from evolve.task.schema import ChampionSpec
from tests.conftest import SYNTHETIC_SEED

GOOD = """\
name: demo
seed: prog.py
evaluator:
  name: synthetic
  params: {target: 10}
objectives:
  - name: distance
    direction: minimize
budget:
  candidates: 5
"""

PROGRAM = """\
# EVOLVE-BLOCK-START
X = 3  # @knob int 0..20
# EVOLVE-BLOCK-END
print(X)
"""


def write_task(folder: Path, text: str, files: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in (files if files is not None else {"prog.py": PROGRAM}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content)
    path = folder / "task.yaml"
    path.write_text(text)
    return path


def edited(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


def test_good_task_loads_relative_to_its_file_from_any_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_task(tmp_path / "tasks" / "demo", GOOD)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    task = load_task(Path("../tasks/demo/task.yaml"))
    assert task.path == (tmp_path / "tasks" / "demo" / "task.yaml").resolve()
    assert task.root == task.path.parent
    assert task.text == GOOD
    assert task.spec.seed == ["prog.py"]  # a single string becomes a one-element list
    assert dict(task.seed.files) == {"prog.py": PROGRAM}
    assert task.notes == ""
    [knob] = find_knobs(task.seed)
    assert (knob.kind, knob.value, knob.low, knob.high) == ("int", 3, 0, 20)


def test_seed_list_and_notes_are_read(tmp_path: Path) -> None:
    text = edited("seed: prog.py\n", "seed:\n  - prog.py\n  - lib/util.py\nnotes: NOTES.md\n")
    files = {"prog.py": PROGRAM, "lib/util.py": "def helper(): ...\n", "NOTES.md": "be fast\n"}
    task = load_task(write_task(tmp_path, text, files))
    assert list(task.seed.files) == ["prog.py", "lib/util.py"]
    assert task.notes == "be fast\n"


def test_parse_task_rebuilds_the_same_task_from_stored_text(tmp_path: Path) -> None:
    path = write_task(tmp_path, GOOD)
    loaded = load_task(path)
    assert parse_task(loaded.text, path) == loaded
    assert pickle.loads(pickle.dumps(loaded)) == loaded


def test_the_champion_section_is_optional_and_read(tmp_path: Path) -> None:
    assert load_task(write_task(tmp_path / "a", GOOD)).spec.champion == ChampionSpec()
    text = GOOD + "champion: {max_step_speedup: 20, agreement: 0.9}\n"
    assert load_task(write_task(tmp_path / "b", text)).spec.champion == ChampionSpec(
        max_step_speedup=20, agreement=0.9
    )


def test_make_evaluator_builds_the_named_plugin(tmp_path: Path) -> None:
    evaluator = make_evaluator(load_task(write_task(tmp_path, GOOD)))
    assert evaluator.name == "synthetic"


@dataclass
class Bad:
    text: str
    field: str
    line: int | None
    says: str  # a fragment the message must contain
    files: dict[str, str] = field(default_factory=lambda: {"prog.py": PROGRAM})


BAD = {
    "missing seed": Bad(edited("seed: prog.py\n", ""), "seed", 1, "required but missing"),
    "missing budget": Bad(
        edited("budget:\n  candidates: 5\n", ""), "budget", 1, "required but missing"
    ),
    "budget without limits": Bad(
        edited("budget:\n  candidates: 5\n", "budget: {}\n"),
        "budget",
        9,
        "set at least one of candidates or wall_time_s",
    ),
    "negative candidates": Bad(
        edited("candidates: 5", "candidates: -1"),
        "budget.candidates",
        10,
        "greater than or equal to 1",
    ),
    "islands not a number": Bad(
        GOOD + "search:\n  islands: many\n", "search.islands", 12, "valid integer"
    ),
    "unknown top-level key": Bad(
        GOOD.replace("seed:", "seeds:"), "seeds", 2, "unknown key; did you mean 'seed'?"
    ),
    "unknown nested key": Bad(
        GOOD + "sandbox:\n  timeout: 5\n", "sandbox.timeout", 12, "did you mean 'timeout_s'?"
    ),
    "bad direction": Bad(
        edited("direction: minimize", "direction: maximise"),
        "objectives[0].direction",
        8,
        "'maximize' or 'minimize'",
    ),
    "missing objective direction": Bad(
        edited("    direction: minimize\n", ""),
        "objectives[0].direction",
        7,
        "required but missing",
    ),
    "seed file missing": Bad(GOOD, "seed", 2, "cannot read 'prog.py'", files={}),
    "seed without block": Bad(GOOD, "seed", 2, "no EVOLVE-BLOCK", files={"prog.py": "X = 3\n"}),
    "malformed knob": Bad(
        GOOD,
        "seed",
        2,
        "prog.py:2: malformed @knob",
        files={"prog.py": PROGRAM.replace("@knob int 0..20", "@knob")},
    ),
    "seed escapes the task folder": Bad(
        edited("seed: prog.py", "seed: [prog.py, ../outside.py]"),
        "seed[1]",
        2,
        "outside the task folder",
    ),
    "absolute seed path": Bad(
        edited("seed: prog.py", "seed:\n  - /etc/hostname"), "seed[0]", 3, "absolute"
    ),
    "notes missing": Bad(GOOD + "notes: NOTES.md\n", "notes", 11, "cannot read 'NOTES.md'"),
    "unknown evaluator": Bad(
        edited("name: synthetic", "name: nosuch"),
        "evaluator.name",
        4,
        "installed: ",
    ),
    "unknown evaluator param": Bad(
        edited("{target: 10}", "{target: 10, reps: 3}"),
        "evaluator.params.reps",
        5,
        "unknown key",
    ),
    "evaluator param of the wrong type": Bad(
        edited("{target: 10}", "\n    target: lots"),
        "evaluator.params.target",
        6,
        "valid number",
    ),
    "unknown mutator": Bad(
        GOOD + "mutators:\n  - name: autotuner\n  - name: genius\n",
        "mutators[1].name",
        13,
        "unknown mutator 'genius' (known: agent, autotuner",
    ),
    "model operator without a model": Bad(
        GOOD + "mutators:\n  - name: diff\n",
        "mutators[0].name",
        12,
        "'diff' asks a model: add an `llm:` section",
    ),
    "bad mutator param": Bad(
        GOOD + "mutators:\n  - name: autotuner\n    params: {crossover: 2}\n",
        "mutators[0].params.crossover",
        13,
        "less than or equal to 1",
    ),
    "model without its key": Bad(
        GOOD
        + "llm:\n  models:\n    - model: openai:gpt-4.1-mini\n"
        + "      api_key_env: EVOLVE_TEST_NO_SUCH_KEY\n",
        "llm.models[0].model",
        13,
        "set EVOLVE_TEST_NO_SUCH_KEY to use openai:gpt-4.1-mini",
    ),
    "step speedup limit not above 1": Bad(
        GOOD + "champion:\n  max_step_speedup: 1\n",
        "champion.max_step_speedup",
        12,
        "greater than 1",
    ),
    "agreement above 1": Bad(
        GOOD + "champion: {agreement: 1.5}\n", "champion.agreement", 11, "less than or equal to 1"
    ),
    "unknown champion key": Bad(
        GOOD + "champion: {agree: 0.9}\n", "champion.agree", 11, "did you mean 'agreement'?"
    ),
    "duplicate objective": Bad(
        edited("budget:", "  - name: distance\n    direction: maximize\nbudget:"),
        "objectives[1].name",
        9,
        "'distance' is already objectives[0]",
    ),
    "duplicate yaml key": Bad(
        GOOD + "  candidates: 6\n", "budget.candidates", 11, "key given twice (first on line 10)"
    ),
    "yaml syntax error": Bad(
        edited("  candidates: 5\n", "  candidates: 5\n bad: 1\n"), "", 11, "invalid YAML"
    ),
    "unclosed flow mapping": Bad(edited("{target: 10}", "{target: 10"), "", 6, "started on line 5"),
    "empty file": Bad("# nothing yet\n", "", None, "the file is empty; a task needs name, seed"),
    "top level is a list": Bad("- name: demo\n", "", 1, "must be a mapping"),
}


@pytest.mark.parametrize("case", BAD.values(), ids=BAD.keys())
def test_bad_task_names_file_line_and_field(tmp_path: Path, case: Bad) -> None:
    (tmp_path / "outside.py").write_text(PROGRAM)
    path = write_task(tmp_path / "task", case.text, case.files)
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    error = caught.value
    assert error.path == path
    found = [p for p in error.problems if p.field == case.field]
    assert found, f"no problem for {case.field!r} in:\n{error}"
    assert found[0].line == case.line, str(error)
    assert case.says in found[0].message
    where = f"{path}:{case.line}" if case.line else str(path)
    assert f"{where}: " in str(error)


def test_missing_task_file(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    assert (caught.value.line, caught.value.field) == (None, "")
    assert str(caught.value) == f"{path}: cannot read it: No such file or directory"


def test_every_problem_is_listed_one_per_line(tmp_path: Path) -> None:
    text = edited("candidates: 5", "candidates: 0").replace("direction: minimize", "direction: up")
    path = write_task(tmp_path, text)
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    assert str(caught.value).splitlines() == [
        f"{path}:8: objectives[0].direction: Input should be 'maximize' or 'minimize'",
        f"{path}:10: budget.candidates: Input should be greater than or equal to 1",
    ]
    assert (caught.value.line, caught.value.field) == (8, "objectives[0].direction")


def test_error_survives_pickling() -> None:
    error = TaskFileError(Path("t.yaml"), [Problem(3, "budget", "required but missing")])
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) == "t.yaml:3: budget: required but missing"


def test_a_plugin_that_is_no_evaluator_fails_the_task_on_its_name_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registered class must derive from evolve.plugin.evaluator.Evaluator, whose hooks the core
    calls on every evaluator; one that does not is refused at load, on evaluator.name."""
    site = tmp_path / "site"
    info = site / "evolve_loose-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "evolve_loose.py").write_text(
        "class Loose:\n    name = 'loose'\n    def __init__(self, params, task_dir): pass\n"
    )
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evolve-loose\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[evolve.evaluators]\nloose = evolve_loose:Loose\n")
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "seed.py").write_text(SYNTHETIC_SEED)
    task = tmp_path / "task.yaml"
    task.write_text(
        "name: loose\nseed: seed.py\nevaluator: {name: loose}\n"
        "objectives: [{name: x, direction: maximize}]\nbudget: {candidates: 3}\n"
    )
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert "task.yaml:3" in str(caught.value)
    assert "is not a subclass of evolve.plugin.evaluator.Evaluator" in str(caught.value)
