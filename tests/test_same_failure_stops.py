"""A run whose model proposals all fail the same way stops after `llm.same_failures` of
them in a row (20 by default), with one line that says which failure and what to change,
`failed` and exit 1; a server that answers 500 to everything counts each attempt, so it is
given up on after about that many requests, not an hour of backoff. And a run that spent
its budget without evaluating one child did not finish. Real runs through the command
line against the scripted server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.llm_server import Fail, Reply, ScriptedLLMServer
from tests.helpers.guessing import CONCURRENCY, WORKERS, evolve_run, guess_task, the_run

pytestmark = pytest.mark.system

SAME_FAILURES = 20  # llm.same_failures by default
SLOTS = CONCURRENCY + WORKERS  # proposals made at once


def test_a_server_that_answers_500_to_everything_ends_the_run(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=Fail(500, "upstream is down")) as server:
        task = guess_task(tmp_path / "guess", "scripted", server.openai_url)
        results = tmp_path / "results"
        shown = evolve_run(task, results)
        requests = len(server.requests)

    assert shown.returncode == 1, shown.stdout
    line = shown.stdout.splitlines()[-1]
    assert line.startswith(
        f"error: the model's proposals failed the same way {SAME_FAILURES} times in a row"
    ), shown.stdout
    assert "every attempt met a server error" in line
    assert "HTTP 500 from openai-compatible:scripted: upstream is down" in line
    assert line.endswith("check that the model's server works, then resume the run")
    # Each attempt counts once; a proposal still retrying when the streak ends adds at most
    # one attempt more (max_attempts 2).
    assert SAME_FAILURES <= requests <= SAME_FAILURES + 2 * SLOTS, requests
    store, run_name = the_run(results)
    assert store.get_run(run_name).status == "failed"  # type: ignore[union-attr]
    assert len(store.llm_calls_of_run(run_name)) == requests


def test_replies_that_never_apply_end_the_run_saying_what_to_change(tmp_path: Path) -> None:
    prose = Reply("I would make it faster by thinking harder.")
    with ScriptedLLMServer(default=prose) as server:
        task = guess_task(tmp_path / "guess", "scripted", server.openai_url)
        results = tmp_path / "results"
        shown = evolve_run(task, results)
        requests = len(server.requests)

    assert shown.returncode == 1, shown.stdout
    line = shown.stdout.splitlines()[-1]
    assert line.startswith(
        f"error: the model's proposals failed the same way {SAME_FAILURES} times in a row"
    ), shown.stdout
    assert "the replies could not be applied, even after a repair turn" in line
    assert line.endswith("try a stronger model, or the `rewrite` mutator")
    # Two requests a proposal: the reply and its repair.
    assert 2 * SAME_FAILURES <= requests <= 2 * (SAME_FAILURES + 2 * SLOTS), requests
    store, run_name = the_run(results)
    assert store.get_run(run_name).status == "failed"  # type: ignore[union-attr]
    assert store.proposal_outcomes(run_name).get("unparseable_after_repair", 0) >= SAME_FAILURES


def test_a_model_that_works_once_is_not_stopped_by_later_failures(tmp_path: Path) -> None:
    """One program brought back, then only prose: the model path is known to work, so
    the streak no longer applies, and the run ends on its candidate budget, finished."""
    diff = "<<<<<<< SEARCH\n    return 3\n=======\n    return 42\n>>>>>>> REPLACE\n"
    prose = Reply("I would make it faster by thinking harder.")
    with ScriptedLLMServer(Reply(diff), default=prose) as server:
        task = guess_task(tmp_path / "guess", "scripted", server.openai_url, "{candidates: 2}")
        results = tmp_path / "results"
        shown = evolve_run(task, results)

    assert shown.returncode == 0, shown.stdout
    assert "finished: candidate budget reached (2)" in shown.stdout
    assert "same way" not in shown.stdout
    store, run_name = the_run(results)
    assert store.get_run(run_name).status == "finished"  # type: ignore[union-attr]
