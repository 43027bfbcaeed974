"""No silent runs without a proposer: a run says on its first line who proposes children; a
task in which nothing could propose a change stops before it starts; a run in which every
proposal failed or repeated a program ends failed, saying why; and the autotuner is never
handed a program without @knob values. Through the command line, on real runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evolve.store import Store
from tests.fakes.llm_server import Fail, ScriptedLLMServer
from tests.helpers.guessing import (
    EVALUATOR,
    PROGRAM,
    answer_closer,
    folder_with,
    primary_secondary,
)

pytestmark = pytest.mark.system

PINNED_SEED = "# EVOLVE-BLOCK-START\nA = 1  # @knob int 1..1\n# EVOLVE-BLOCK-END\n"
KNOBLESS_SEED = "# EVOLVE-BLOCK-START\nA = 1\n# EVOLVE-BLOCK-END\n"

SYNTHETIC_TASK = """\
name: stuck
seed: seed.py
evaluator: {name: synthetic, params: {target: 5}}
objectives: [{name: distance, direction: minimize}]
budget: {candidates: 20}
sandbox: {backend: process}
"""


def evolve_run(task: Path, results: Path) -> subprocess.CompletedProcess[str]:
    """`evolve run`, its output and errors in one stream, in the order they were written;
    without OPENAI_API_KEY, which no test here may depend on."""
    env = {name: value for name, value in os.environ.items() if name != "OPENAI_API_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "evolve", "run", str(task), "--plain", "--workers", "1",
         "--results", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, env=env,
    )  # fmt: skip


def synthetic_task(root: Path, seed: str) -> Path:
    root.mkdir(parents=True)
    (root / "seed.py").write_text(seed)
    (root / "task.yaml").write_text(SYNTHETIC_TASK)
    return root / "task.yaml"


def the_run(results: Path) -> tuple[Store, str]:
    store = Store(f"sqlite:///{results / 'evolve.db'}")
    (run,) = store.list_runs()
    return store, run.name


def test_the_autotuner_alone_on_a_seed_without_knobs_stops_before_it_starts(
    tmp_path: Path,
) -> None:
    task = synthetic_task(tmp_path / "t", KNOBLESS_SEED)
    shown = evolve_run(task, tmp_path / "results")
    assert shown.returncode == 2, shown.stdout
    (line,) = shown.stdout.splitlines()
    assert line.startswith(f"error: {task.resolve()}: the autotuner is this task's only mutator")
    assert "no @knob values" in line
    assert not (tmp_path / "results").exists(), "nothing was started"


def test_a_run_whose_every_proposal_fails_ends_failed_saying_why(tmp_path: Path) -> None:
    """Its one knob has a single value, so the autotuner can never make a new program."""
    task = synthetic_task(tmp_path / "t", PINNED_SEED)
    results = tmp_path / "results"
    shown = evolve_run(task, results)
    assert shown.returncode == 1, shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("no model proposes: the autotuner alone varies the seed's 1 @knob")
    assert lines[-1].startswith("error: nothing could be proposed: the last 200 proposals")
    assert "no child passed" in lines[-1] and "every knob is pinned" in lines[-1]
    assert not any(line.startswith("finished:") for line in lines)
    store, run_name = the_run(results)
    assert store.get_run(run_name).status == "failed"  # type: ignore[union-attr]


def test_a_model_that_refuses_every_request_ends_the_run_failed(tmp_path: Path) -> None:
    """A wrong key at a real server: the first refusal ends the run, and says so."""
    with ScriptedLLMServer(default=Fail(401, "invalid api key")) as server:
        config = primary_secondary(api_base=server.openai_url, iterations=50, workers=1)
        folder = folder_with(tmp_path / "guess", config)
        results = tmp_path / "results"
        shown = evolve_run(folder, results)
        requests = len(server.requests)
    assert shown.returncode == 1, shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("models: small-model at "), lines[0]
    # Both models are refused; which one's refusal comes back first is the server's timing.
    assert re.fullmatch(
        r"error: openai-compatible:(small|big)-model refused the key in OPENAI_API_KEY "
        r"\(HTTP 401: invalid api key\): set a valid key",
        lines[-1],
    ), lines[-1]
    store, run_name = the_run(results)
    outcomes = store.proposal_outcomes(run_name)
    assert outcomes.get("refused", 0) >= 1 and "candidate" not in outcomes
    assert requests <= sum(outcomes.values()), "no proposal asked twice"
    assert store.get_run(run_name).status == "failed"  # type: ignore[union-attr]


def test_the_autotuner_hands_a_parent_without_knobs_to_a_model_operator(tmp_path: Path) -> None:
    """Autotuner and diff at equal weights, on a program with no @knob values: every parent
    the autotuner draws goes to the model instead, and the run evolves."""
    with ScriptedLLMServer(default=answer_closer) as server:
        folder = tmp_path / "guess"
        folder.mkdir()
        (folder / "guess.py").write_text(PROGRAM)
        (folder / "evaluator.py").write_text(EVALUATOR)
        (folder / "task.yaml").write_text(
            textwrap.dedent(
                f"""\
                name: guess
                seed: guess.py
                evaluator: {{name: python, params: {{evaluator: evaluator.py}}}}
                objectives: [{{name: combined_score, direction: maximize}}]
                mutators: [{{name: autotuner}}, {{name: diff}}]
                llm: {{models: [{{model: scripted, base_url: "{server.openai_url}"}}]}}
                budget: {{candidates: 4}}
                sandbox: {{backend: process}}
                """
            )
        )
        results = tmp_path / "results"
        shown = evolve_run(folder / "task.yaml", results)
        requests = len(server.requests)
    assert shown.returncode == 0, shown.stdout
    assert shown.stdout.splitlines()[0].startswith("models: scripted at "), shown.stdout
    store, run_name = the_run(results)
    proposals = store.proposals(run_name)
    assert {p.operator for p in proposals} == {"diff"}, [(p.operator, p.detail) for p in proposals]
    assert requests >= len(proposals) >= 3
