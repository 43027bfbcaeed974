"""A task.yaml beside an OpenEvolve config that extends it (`openevolve: config.yaml`): the
folder gains what its config cannot say (Debian packages, pip requirements, which files
ship) without an edit; each problem names the file and line that gave the field."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evolve.task.loading import TaskFileError, changed_files, load_task
from evolve.task.openevolve import RunDefaults, run_defaults

EVOLVE = [sys.executable, "-m", "evolve"]
SEED = "# EVOLVE-BLOCK-START\nN = 3  # @knob int 1..5\n# EVOLVE-BLOCK-END\n"
EVALUATOR = "def evaluate(program_path):\n    return {'combined_score': 1.0}\n"
CONFIG = """\
max_iterations: 9
evaluator:
  timeout: 45
  cascade_evaluation: false
database:
  num_islands: 2
"""


def folder(root: Path, extension: str, config: str = CONFIG) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "config.yaml").write_text(config)
    (root / "task.yaml").write_text(textwrap.dedent(extension))
    return root


def test_the_task_yaml_is_laid_over_the_configs_translation(tmp_path: Path) -> None:
    root = folder(
        tmp_path / "rusty",
        """\
        openevolve: config.yaml
        sandbox:
          packages: [cargo]
          pip: [pykalman]
        evaluator:
          params: {files: ["*.py"]}
        budget: {wall_time_s: 600}
        """,
    )
    task = load_task(root)  # the folder: its task.yaml comes first
    spec = task.spec
    assert task.path == (root / "task.yaml").resolve()
    assert (spec.sandbox.packages, spec.sandbox.pip) == (["cargo"], ["pykalman"])
    assert spec.sandbox.timeout_s == 45  # from the config, kept beside the task.yaml's keys
    assert spec.evaluator.name == "python"
    assert spec.evaluator.params == {"evaluator": "evaluator.py", "cascade": False,
                                     "files": ["*.py"]}  # fmt: skip
    assert (spec.budget.candidates, spec.budget.wall_time_s) == (10, 600)
    assert spec.search.islands == 2 and spec.name == "rusty"
    assert "config.yaml" in task.files  # an edit to the config stops a --resume


def test_the_configs_workers_and_seed_stay_the_runs_defaults(tmp_path: Path) -> None:
    config = CONFIG + "random_seed: 7\nevaluator:\n  parallel_evaluations: 3\n"
    config = config.replace("evaluator:\n  timeout: 45\n  cascade_evaluation: false\n", "")
    root = folder(tmp_path / "rusty", "openevolve: config.yaml\n", config)
    task = load_task(root)
    assert run_defaults(task.text, task.root) == RunDefaults(workers=3, seed=7)


def test_the_task_yaml_may_name_the_models_the_config_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The config's own `llm:` is then not read: its model's missing key is no error."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = CONFIG + "llm:\n  primary_model: gpt-4o\n"
    root = folder(
        tmp_path / "local",
        """\
        openevolve: config.yaml
        llm:
          models: [{model: scripted, base_url: "http://127.0.0.1:9/v1"}]
        """,
        config,
    )
    spec = load_task(root).spec
    assert [m.model for m in spec.llm.models] == ["scripted"]
    assert [m.name for m in spec.mutators] == ["diff"]


def test_an_edited_config_shows_in_the_fingerprint(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\n")
    before = load_task(root)
    (root / "config.yaml").write_text(CONFIG.replace("45", "50"))
    assert changed_files(load_task(root), before.files) == ["config.yaml"]


def test_each_problem_is_placed_in_the_file_that_gave_the_field(tmp_path: Path) -> None:
    root = folder(
        tmp_path / "t",
        """\
        openevolve: config.yaml
        sandbox:
          packages: [Cargo]
          timeot_s: 5
        """,
        CONFIG.replace("num_islands: 2", "num_islands: many"),
    )
    with pytest.raises(TaskFileError) as caught:
        load_task(root)
    lines = str(caught.value).splitlines()
    for start in (
        f"{root / 'task.yaml'}:3: sandbox.packages[0]: 'Cargo' is not a Debian package name",
        f"{root / 'task.yaml'}:4: sandbox.timeot_s: unknown key",
        f"{root / 'config.yaml'}:6: database.num_islands: Input should be a valid integer",
    ):
        assert any(line.startswith(start) for line in lines), (start, lines)


def test_a_problem_in_the_config_itself_names_the_config(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\n", "max_iterations: [\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(root)
    assert caught.value.path == root / "config.yaml"
    assert "invalid YAML" in caught.value.message


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("../config.yaml", "must name the OpenEvolve config beside this file"),
        ("[config.yaml]", "must name the OpenEvolve config beside this file"),
        ("other.yaml", "cannot read 'other.yaml'"),
        ("listed.yaml", "the top level must be a mapping"),  # the config's own error
    ],
)
def test_a_bad_openevolve_value_is_an_error_on_its_line(
    tmp_path: Path, written: str, said: str
) -> None:
    root = folder(tmp_path / "t", f"name: mine\nopenevolve: {written}\n")
    (root / "listed.yaml").write_text("- max_iterations: 3\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(root)
    assert said in str(caught.value)
    if caught.value.path == root / "listed.yaml":
        assert caught.value.line == 1
    else:
        assert (caught.value.line, caught.value.field) == (2, "openevolve")


def test_a_config_without_its_evaluator_is_refused(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\n")
    (root / "evaluator.py").unlink()
    with pytest.raises(TaskFileError, match=r"an OpenEvolve config only beside its evaluator\.py"):
        load_task(root / "task.yaml")


def test_requirements_txt_becomes_sandbox_pip_and_is_fingerprinted(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\n")
    (root / "requirements.txt").write_text(
        "numpy>=1.24\nscipy==1.11  # for optimize\nscikit_learn\nopenevolve\n\n# a comment\n"
        "-r more.txt\n--index-url https://example.org/simple\n"
    )
    (root / "more.txt").write_text('PyWavelets ; python_version >= "3.8"\n')
    for task in (load_task(root / "config.yaml"), load_task(root)):  # alone, and extended
        assert task.spec.sandbox.pip == [
            "numpy>=1.24",
            "scipy==1.11",
            "scikit_learn",
            'PyWavelets; python_version >= "3.8"',
        ]
        said = "\n".join(task.warnings)
        assert "requirements.txt: pip installs numpy>=1.24, scipy==1.11, scikit_learn" in said
        assert "ignored: --index-url https://example.org/simple" in said
        assert {"requirements.txt", "more.txt"} <= set(task.files)
    (root / "task.yaml").write_text("openevolve: config.yaml\nsandbox: {pip: [pykalman]}\n")
    assert load_task(root).spec.sandbox.pip == ["pykalman"]  # a list is replaced whole


def test_a_bad_requirements_line_names_requirements_txt_and_its_line(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\n")
    (root / "requirements.txt").write_text("scipy\n\npykalman ==\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(root)
    assert caught.value.path == root / "requirements.txt"
    assert caught.value.line == 3
    assert "'pykalman ==' is not a requirement evolve can install" in caught.value.message


def test_naming_the_config_warns_that_the_task_yaml_beside_it_is_not_read(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\nsandbox: {packages: [cargo]}\n")
    task = load_task(root / "config.yaml")
    assert task.spec.sandbox.packages == []
    assert "the task.yaml beside config.yaml is not read: run the folder to use it" in task.warnings


@pytest.mark.system
def test_sandbox_build_task_takes_the_extension(tmp_path: Path) -> None:
    root = folder(tmp_path / "t", "openevolve: config.yaml\nsandbox: {packages: [Not-A-Name]}\n")
    done = subprocess.run(
        [*EVOLVE, "sandbox", "build", "--task", str(root)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"{root / 'task.yaml'}:2: sandbox.packages[0]: 'Not-A-Name'" in done.stderr
