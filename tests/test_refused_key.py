"""A key the provider refuses, or a model it does not serve, stops the run at once: one
line names the model, the variable the key is read from and what to change; the run is
`failed` and exits 1; and no request leaves after the refusal is known, however many
proposals were waiting. Real runs through the command line, with both SDKs, against the
scripted server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.llm_server import Fail, ScriptedLLMServer
from tests.helpers.guessing import (
    CONCURRENCY,
    KEY_ENV,
    WORKERS,
    evolve_run,
    guess_task,
    the_run,
)

pytestmark = pytest.mark.system


@pytest.mark.parametrize(
    ("api", "model", "label"),
    [
        ("openai", "scripted", "openai-compatible:scripted"),
        ("anthropic", "anthropic:scripted", "anthropic:scripted"),
    ],
)
def test_a_refused_key_stops_the_run_at_once_naming_model_and_variable(
    tmp_path: Path, api: str, model: str, label: str
) -> None:
    with ScriptedLLMServer(default=Fail(401, "invalid api key")) as server:
        url = server.openai_url if api == "openai" else server.anthropic_url
        task = guess_task(tmp_path / "guess", model, url)
        results = tmp_path / "results"
        shown = evolve_run(task, results)
        requests = list(server.requests)

    assert shown.returncode == 1, shown.stdout
    lines = shown.stdout.splitlines()
    assert lines[-1] == (
        f"error: {label} refused the key in {KEY_ENV} (HTTP 401: invalid api key): set a valid key"
    ), shown.stdout
    assert not any(line.startswith("finished") for line in lines)
    assert "sk-wrong-key" not in shown.stdout
    assert {r.api for r in requests} == {api}
    # Each proposal slot sends at most the request it had in flight when the first
    # refusal came back; none is retried, and none waiting for a slot is sent.
    assert 1 <= len(requests) <= CONCURRENCY + WORKERS, len(requests)
    store, run_name = the_run(results)
    assert store.get_run(run_name).status == "failed"  # type: ignore[union-attr]
    outcomes = store.proposal_outcomes(run_name)
    assert outcomes.get("refused", 0) >= 1 and "candidate" not in outcomes, outcomes
    calls = store.llm_calls_of_run(run_name)
    assert len(calls) == len(requests), "every request sent is in the ledger"
    assert {c.status for c in calls} == {"refused"}


def test_a_model_the_server_does_not_serve_stops_the_run_the_same_way(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=Fail(404, "The model `gpt-x` does not exist")) as server:
        task = guess_task(tmp_path / "guess", "gpt-x", server.openai_url)
        results = tmp_path / "results"
        shown = evolve_run(task, results)
        requests = len(server.requests)

    assert shown.returncode == 1, shown.stdout
    assert shown.stdout.splitlines()[-1] == (
        f"error: {server.openai_url} does not serve openai-compatible:gpt-x (HTTP 404: The "
        "model `gpt-x` does not exist): check the model's name and that base_url is the "
        "API's address"
    ), shown.stdout
    assert 1 <= requests <= CONCURRENCY + WORKERS
    store, run_name = the_run(results)
    assert store.get_run(run_name).status == "failed"  # type: ignore[union-attr]
