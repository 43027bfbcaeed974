"""A model in no price table is charged nothing, which is not what it costs: wherever
the cost of its tokens is shown (the progress line, `evolve runs`, `evolve show`, the
report's tables), it reads "unpriced", never $0.0000 beside its tokens. A priced model
still shows dollars. A real run through the command line against the scripted server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.engine.budgets import Budgets
from evolve.llm import LLMCall
from evolve.store import Store
from evolve.task.schema import Budget
from tests.fakes.llm_server import ScriptedLLMServer
from tests.helpers.guessing import answer_closer, evolve_run, guess_task, the_run

PRICE = "prices: {'openai-compatible:scripted': {input_per_mtok: 1000, output_per_mtok: 1000}}"


def evolve(results: Path, *args: str) -> str:
    shown = subprocess.run(
        [sys.executable, "-m", "evolve", *args, "--results", str(results)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def a_run(tmp_path: Path, priced: bool) -> tuple[Path, Store, str]:
    with ScriptedLLMServer(default=answer_closer) as server:
        task = guess_task(tmp_path / "guess", "scripted", server.openai_url, "{candidates: 3}")
        if priced:
            text = task.read_text().replace(
                "  max_attempts: 2\n", f"  max_attempts: 2\n  {PRICE}\n"
            )
            task.write_text(text)
        results = tmp_path / "results"
        shown = evolve_run(task, results)
    assert shown.returncode == 0, shown.stdout
    store, run_name = the_run(results)
    return results, store, run_name


@pytest.mark.system
def test_an_unpriced_model_shows_unpriced_beside_its_tokens(tmp_path: Path) -> None:
    results, store, run_name = a_run(tmp_path, priced=False)
    spent_usd, tokens = store.llm_spend(run_name)
    assert spent_usd == 0 and tokens > 0

    listed = evolve(results, "runs")
    assert f"unpriced, {tokens:,} tokens" in listed, listed
    assert "$0.0000" not in listed
    child = next(p.candidate_id for p in store.proposals(run_name) if p.candidate_id)
    shown = evolve(results, "show", str(child))
    assert re.search(r"model call \d+: openai-compatible:scripted \(diff\) ok, 100\+40 tokens, "
                     r"unpriced, ", shown), shown  # fmt: skip
    assert "$0.0000" not in shown
    report = tmp_path / "report.html"
    evolve(results, "report", run_name, "-o", str(report))
    page = report.read_text()
    assert "unpriced" in page and "$0.0000" not in page


@pytest.mark.system
def test_a_priced_model_still_shows_dollars(tmp_path: Path) -> None:
    results, store, run_name = a_run(tmp_path, priced=True)
    spent_usd, tokens = store.llm_spend(run_name)
    assert spent_usd == pytest.approx(tokens * 1000 / 1e6)

    listed = evolve(results, "runs")
    assert f"${spent_usd:.4f}, {tokens:,} tokens" in listed, listed
    assert "unpriced" not in listed


def test_the_progress_line_says_unpriced(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    store.create_run("r", task_path="t", task_yaml="", seed=0, settings={})
    budgets = Budgets(Budget(candidates=5), store, "r", wall_used_s=0.0)
    assert budgets.spend_line() == "models $0.0000, 0 tokens", "nothing spent, nothing to price"
    unpriced = LLMCall("openai-compatible", "m", "p", "r", 103_000, 215, 0.0, 1.0, "ok",
                       priced=False)  # fmt: skip
    budgets.spend([unpriced])
    assert budgets.spend_line() == "models unpriced, 103,215 tokens"
    priced = LLMCall("openai", "gpt-5", "p", "r", 1_000, 0, 0.25, 1.0, "ok")
    budgets.spend([priced])
    assert budgets.spend_line() == "models $0.2500, 104,215 tokens"
