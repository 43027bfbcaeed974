"""The guessing program, OpenEvolve's shape of a task (a program and an `evaluator.py` that
scores how close its guess is to 42), its folders and task files, a scripted model that
moves the guess closer, and whole runs of it through the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from evolve.store import Store
from tests.fakes.llm_server import Reply, prompt_text

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


# The older shape, as many of OpenEvolve's examples still write it.
PRIMARY_SECONDARY = """max_iterations: {iterations}
checkpoint_interval: 10
log_level: INFO
llm:
  primary_model: "{primary}"
  primary_model_weight: 0.8
  secondary_model: "big-model"
  secondary_model_weight: 0.2
  api_base: "{api_base}"
{api_key}  temperature: 0.6
  max_tokens: 4096
prompt:
  system_message: "Guess better."
  use_template_stochasticity: true
database:
  population_size: 50
  archive_size: 20
  num_islands: 1
evaluator:
  timeout: 30
  cascade_evaluation: false
  parallel_evaluations: {workers}
diff_based_evolution: true
"""


def folder_with(
    root: Path, config: str, program: str = PROGRAM, seed: str = "initial_program.py"
) -> Path:
    root.mkdir(parents=True)
    (root / seed).write_text(program)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "config.yaml").write_text(config)
    return root


def primary_secondary(
    api_base: str = "http://127.0.0.1:9/v1",
    api_key: str | None = None,
    primary: str = "small-model",
    iterations: int = 6,
    workers: int = 2,
) -> str:
    """The older shape; `api_key` None leaves the key out."""
    written = "" if api_key is None else f'  api_key: "{api_key}"\n'
    return PRIMARY_SECONDARY.format(
        api_base=api_base, api_key=written, primary=primary, iterations=iterations, workers=workers
    )


def answer_closer(body: dict[str, Any]) -> Reply:
    """The scripted model: the parent's `return N` moves 13 closer to 42."""
    found = re.search(r"^    return (\d+)$", prompt_text(body), re.M)
    assert found, "the prompt did not show the parent's code"
    value = int(found.group(1))
    better = min(value + 13, 42)
    diff = f"<<<<<<< SEARCH\n    return {value}\n=======\n    return {better}\n>>>>>>> REPLACE\n"
    return Reply(diff, input_tokens=100, output_tokens=40)


CONCURRENCY = 4


WORKERS = 1


KEY_ENV = "SCRIPTED_KEY"


def guess_task(root: Path, model: str, base_url: str, budget: str = "{candidates: 50}") -> Path:
    """The guessing program with a python evaluator, proposed by `diff` alone, on the
    process sandbox; the key is read from SCRIPTED_KEY."""
    root.mkdir(parents=True)
    (root / "guess.py").write_text(PROGRAM)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "task.yaml").write_text(
        textwrap.dedent(
            f"""\
            name: guess
            seed: guess.py
            evaluator: {{name: python, params: {{evaluator: evaluator.py}}}}
            objectives: [{{name: combined_score, direction: maximize}}]
            mutators: [{{name: diff}}]
            llm:
              models: [{{model: "{model}", base_url: "{base_url}", api_key_env: {KEY_ENV}}}]
              concurrency: {CONCURRENCY}
              max_attempts: 2
              timeout_s: 10
            budget: {budget}
            sandbox: {{backend: process}}
            """
        )
    )
    return root / "task.yaml"


def evolve_run(task: Path, results: Path) -> subprocess.CompletedProcess[str]:
    """`evolve run`, its output and errors in one stream, with a key the server refuses."""
    env = {**os.environ, KEY_ENV: "sk-wrong-key"}
    return subprocess.run(
        [sys.executable, "-m", "evolve", "run", str(task), "--plain", "--workers", str(WORKERS),
         "--results", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, env=env,
    )  # fmt: skip


def the_run(results: Path) -> tuple[Store, str]:
    store = Store(f"sqlite:///{results / 'evolve.db'}")
    (run,) = store.list_runs()
    return store, run.name
