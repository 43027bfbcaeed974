"""OpenEvolve task folders, run unchanged: the layout its documentation describes
(initial_program.py, evaluator.py, config.yaml), written here from that description."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evolve.store import Store
from evolve.taskfile import load_task
from evolve.taskproblems import TaskFileError
from tests.fakes.llm_server import Reply, ScriptedLLMServer, prompt_text

PROGRAM = '''"""Guess the answer."""


# EVOLVE-BLOCK-START
def guess():
    return 3
# EVOLVE-BLOCK-END


def run():
    return guess()
'''

EVALUATOR = """import importlib.util

from openevolve.evaluation_result import EvaluationResult


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("program", program_path)
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    value = program.run()
    return EvaluationResult(
        metrics={"combined_score": 1.0 / (1.0 + abs(value - 42)), "value": value},
        artifacts={"hint": f"{value} is {'low' if value < 42 else 'not low'}"},
    )
"""

CONFIG = """# A config as OpenEvolve's documentation lays it out.
max_iterations: 6
checkpoint_interval: 10
log_level: INFO
random_seed: 42
diff_based_evolution: true
max_code_length: 10000

llm:
  models:
    - name: scripted
      weight: 1.0
  api_base: "{api_base}"
  temperature: 0.7
  top_p: 0.95
  max_tokens: 2048
  timeout: 30
  retries: 2

prompt:
  system_message: "You are an expert at guessing the answer to everything."
  num_top_programs: 3

database:
  population_size: 100
  num_islands: 2
  migration_interval: 10
  feature_dimensions: [complexity, diversity]

evaluator:
  timeout: 20
  cascade_evaluation: false
  cascade_thresholds: [0.3, 0.6]
  parallel_evaluations: 2
"""


def openevolve_folder(root: Path, api_base: str = "http://127.0.0.1:9/v1", **edits: str) -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(PROGRAM)
    (root / "evaluator.py").write_text(EVALUATOR)
    config = CONFIG.format(api_base=api_base)
    for old, new in edits.items():
        config = config.replace(old.replace("__", " "), new)
    (root / "config.yaml").write_text(config)
    return root


def test_a_folder_maps_every_key_with_a_meaning_and_names_the_rest(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "guess-the-answer")
    before = (folder / "config.yaml").read_bytes()
    task = load_task(folder)
    spec = task.spec
    assert task.path == (folder / "config.yaml").resolve()
    assert spec.name == "guess-the-answer"
    assert list(task.seed.files) == ["initial_program.py"]
    assert spec.description == "You are an expert at guessing the answer to everything."
    assert spec.evaluator.name == "python"
    assert spec.evaluator.params == {
        "evaluator": "evaluator.py",
        "cascade": False,
        "cascade_thresholds": [0.3, 0.6],
    }
    assert [(o.name, o.direction) for o in spec.objectives] == [("combined_score", "maximize")]
    assert spec.budget.candidates == 7  # six iterations plus the seed
    assert (spec.search.islands, spec.search.migration_interval) == (2, 10)
    assert spec.sandbox.timeout_s == 20
    assert spec.llm is not None
    model = spec.llm.models[0]
    assert (model.model, model.base_url, model.weight) == ("scripted", "http://127.0.0.1:9/v1", 1.0)
    assert (spec.llm.temperature, spec.llm.max_tokens, spec.llm.timeout_s) == (0.7, 2048, 30)
    assert spec.llm.max_attempts == 3
    assert [m.name for m in spec.mutators] == ["diff"]
    (warning,) = task.warnings
    ignored = warning.split("ignored: ")[1].split(", ")
    assert ignored == sorted(
        [
            "checkpoint_interval",
            "database.feature_dimensions",
            "database.population_size",
            "evaluator.parallel_evaluations",
            "llm.top_p",
            "log_level",
            "max_code_length",
            "prompt.num_top_programs",
            "random_seed",
        ]
    )
    assert (folder / "config.yaml").read_bytes() == before, "the user's config is never rewritten"


def test_full_rewrites_and_no_models(tmp_path: Path) -> None:
    folder = openevolve_folder(
        tmp_path / "t", **{"diff_based_evolution:__true": "diff_based_evolution: false"}
    )
    assert [m.name for m in load_task(folder).spec.mutators] == ["rewrite"]


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("max_iterations: 6", "max_iterations: -3", "max_iterations", "greater than or equal"),
        ("  num_islands: 2", "  num_islands: many", "database.num_islands", "integer"),
        ("  timeout: 20", "  timeout: soon", "evaluator.timeout", "number"),
        ("  temperature: 0.7", "  temperature: 9", "llm.temperature", "less than or equal"),
        ('  api_base: "', '  api_key: "sk-live-123"\n  api_base: "', "llm.api_key", "${"),
    ],
)
def test_a_bad_value_is_reported_on_the_configs_own_line(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    folder = openevolve_folder(tmp_path / "t")
    config = folder / "config.yaml"
    text = config.read_text().replace(old, new)
    config.write_text(text)
    first = new.splitlines()[0]
    line = next(n for n, written in enumerate(text.splitlines(), 1) if written == first)
    with pytest.raises(TaskFileError) as caught:
        load_task(folder)
    error = caught.value
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message


def test_a_literal_key_never_reaches_the_store(tmp_path: Path) -> None:
    """The config is stored with the run, so a key written in it is refused outright."""
    folder = openevolve_folder(tmp_path / "t")
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace("  api_base:", '  api_key: "sk-x"\n  api_base:'))
    with pytest.raises(TaskFileError, match="takes no literal key"):
        load_task(config)


def test_a_key_named_as_a_variable_is_read_from_it(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "t")
    config = folder / "config.yaml"
    text = config.read_text().replace("  api_base:", '  api_key: "${GUESS_KEY}"\n  api_base:')
    config.write_text(text)
    os.environ["GUESS_KEY"] = "not-a-real-key"
    try:
        spec = load_task(folder).spec
    finally:
        del os.environ["GUESS_KEY"]
    assert spec.llm is not None and spec.llm.models[0].api_key_env == "GUESS_KEY"


def answer_closer(body: dict[str, Any]) -> Reply:
    """The scripted model: the parent's `return N` moves 13 closer to 42."""
    found = re.search(r"^    return (\d+)$", prompt_text(body), re.M)
    assert found, "the prompt did not show the parent's code"
    value = int(found.group(1))
    better = min(value + 13, 42)
    diff = f"<<<<<<< SEARCH\n    return {value}\n=======\n    return {better}\n>>>>>>> REPLACE\n"
    return Reply(diff, input_tokens=100, output_tokens=40)


def test_evolve_runs_the_folder_unchanged(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=answer_closer) as server:
        folder = openevolve_folder(tmp_path / "guess", api_base=server.openai_url)
        results = tmp_path / "results"
        shown = subprocess.run(
            [sys.executable, "-m", "evolve", "run", str(folder), "--plain", "--workers", "1",
             "--sandbox", "process", "--results", str(results)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "OpenEvolve keys with no meaning in evolve, ignored: checkpoint_interval" in shown.stderr
    store = Store(f"sqlite:///{results / 'evolve.db'}")
    (run,) = store.list_runs()
    assert run.status == "finished"
    seed = store.seed_candidate(run.name)
    best = store.top(run.name, 1)[0]
    assert seed is not None and seed.score == pytest.approx(1 / 40)
    assert best.score is not None and best.score > seed.score, "the model's edits were scored"
    latest = store.evaluations(best.id)[-1]
    assert latest.metrics["value"] in (16, 29, 42)
    assert "is not low" in latest.feedback or "is low" in latest.feedback  # artifacts shown


def test_requirements_become_the_sandboxs_debian_packages(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "t")
    (folder / "requirements.txt").write_text(
        "numpy>=1.24\nscipy==1.11  # for optimize\nscikit_learn\n\n# a comment\n-r more.txt\n"
    )
    task = load_task(folder)
    assert task.spec.sandbox.packages == ["python3-scipy", "python3-sklearn"]
    assert any(
        "requirements.txt: the sandbox gets Debian's python3-scipy, python3-sklearn" in said
        for said in task.warnings
    )
