"""Every way a model proposal fails names its outcome for the proposals ledger. The real
openai and anthropic SDKs talk to the scripted server; the mutators are the ones a run builds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evolve.executors.local import LocalExecutor
from evolve.mutators import MutationError, MutationRequest, Parent
from evolve.mutators.agent import EMPTY_NUDGE, Agent
from evolve.mutators.agent_tools import AgentServices
from evolve.mutators.llm import LLMEditor
from evolve.mutators.prompt import PromptContext
from evolve.plugin.program import Program
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from evolve.task.schema import LLMSpec, ModelSpec
from tests.conftest import SYNTHETIC_SEED, write_synthetic_task
from tests.fakes.llm_server import (
    Empty,
    Fail,
    Reply,
    ScriptedLLMServer,
    Step,
    ToolCall,
    prompt_text,
)

CONTEXT = PromptContext("Bring the knob sum to 100.", (("distance", "minimize"),))
PARENT = Parent(1, Program({"seed.py": SYNTHETIC_SEED}), 1.0)
ATTEMPTS = 3
RAISE_A = (
    "<<<<<<< SEARCH\nA = 1  # @knob int 0..64\n=======\nA = 9  # @knob int 0..64\n>>>>>>> REPLACE\n"
)
OUTSIDE = "<<<<<<< SEARCH\n# EVOLVE-BLOCK-START\n=======\n# the marker, changed\n>>>>>>> REPLACE\n"
NO_MATCH = "<<<<<<< SEARCH\nA = 999\n=======\nA = 5\n>>>>>>> REPLACE\n"
PROSE = "I would make it faster by thinking harder."
APIS = ["openai", "anthropic"]


def llm_spec(server: ScriptedLLMServer, api: str) -> LLMSpec:
    if api == "openai":
        model = ModelSpec(model="scripted", base_url=server.openai_url)
    else:
        model = ModelSpec(model="anthropic:scripted", base_url=server.anthropic_url)
    return LLMSpec(models=[model], timeout_s=5, max_attempts=ATTEMPTS)


def edit_failure(api: str, operator: str, *steps: Step, others: tuple[Parent, ...] = ()) -> Any:
    """Run one proposal against `steps`; the MutationError it raised, and the requests."""
    with ScriptedLLMServer(*steps) as server:
        editor = LLMEditor(operator, {}, llm_spec(server, api), CONTEXT, None)
        with pytest.raises(MutationError) as caught:
            editor.propose(MutationRequest(PARENT, others, seed=1))
    return caught.value, server.requests


@pytest.mark.parametrize("api", APIS)
def test_a_reply_that_cannot_be_applied_after_its_repair_is_unparseable(api: str) -> None:
    error, requests = edit_failure(api, "diff", Reply(PROSE), Reply(NO_MATCH))
    assert error.outcome == "unparseable_after_repair"
    assert "even after one repair" in str(error) and "not found" in str(error)
    assert len(error.calls) == len(requests) == 2
    assert "no SEARCH/REPLACE block" in prompt_text(requests[1].body), "no repair turn was sent"


@pytest.mark.parametrize("api", APIS)
def test_an_edit_outside_the_block_is_named_so(api: str) -> None:
    error, requests = edit_failure(api, "diff", Reply(OUTSIDE), Reply(OUTSIDE))
    assert error.outcome == "outside_block"
    assert len(error.calls) == len(requests) == 2
    assert "Only text inside the EVOLVE-BLOCK" in prompt_text(requests[1].body)


def test_the_repairs_failure_decides_the_outcome() -> None:
    """An edit outside the block, repaired into one that matches nothing: the proposal ended
    unparseable, not outside the block."""
    error, _ = edit_failure("openai", "diff", Reply(OUTSIDE), Reply(NO_MATCH))
    assert error.outcome == "unparseable_after_repair"
    rewrite, _ = edit_failure("openai", "rewrite", Reply(PROSE), Reply("```python\nA = 2\n"))
    assert rewrite.outcome == "unparseable_after_repair"


@pytest.mark.parametrize("api", APIS)
def test_an_empty_reply_is_empty(api: str) -> None:
    error, requests = edit_failure(api, "diff", Empty())
    assert error.outcome == "empty"
    assert [call.status for call in error.calls] == ["empty"] and len(requests) == 1


def test_an_empty_repair_is_empty_and_keeps_the_first_call() -> None:
    error, _ = edit_failure("openai", "diff", Reply(PROSE), Empty())
    assert error.outcome == "empty"
    assert [call.status for call in error.calls] == ["ok", "empty"]


@pytest.mark.parametrize("api", APIS)
def test_429s_until_max_attempts_exhaust_the_retries(api: str) -> None:
    storm = [Fail(429, retry_after=0) for _ in range(ATTEMPTS)]
    error, requests = edit_failure(api, "diff", *storm)
    assert error.outcome == "retries_exhausted"
    assert [call.status for call in error.calls] == ["rate_limited"] * ATTEMPTS
    assert len(requests) == ATTEMPTS


def test_a_refused_key_is_refused_and_a_storm_of_500s_exhausts_the_retries() -> None:
    """A bad key is no outage: its proposal says "refused", with the line the run stops
    with."""
    refused, _ = edit_failure("openai", "diff", Fail(401, "invalid key"))
    assert refused.outcome == "refused"
    assert [call.status for call in refused.calls] == ["refused"]
    assert str(refused).endswith("refused the key in OPENAI_API_KEY (HTTP 401: invalid key): "
                                 "set a valid key")  # fmt: skip
    overloaded = [Fail(529, retry_after=0) for _ in range(ATTEMPTS)]
    down, _ = edit_failure("anthropic", "diff", *overloaded)
    assert down.outcome == "retries_exhausted"
    assert [call.status for call in down.calls] == ["server_error"] * ATTEMPTS


def test_crossover_without_a_partner_fails_without_a_call() -> None:
    error, requests = edit_failure("openai", "crossover")
    assert error.outcome == "failed" and not error.calls and not requests


def test_a_reply_that_applies_is_a_proposal() -> None:
    with ScriptedLLMServer(Reply(PROSE), Reply(RAISE_A)) as server:
        editor = LLMEditor("diff", {}, llm_spec(server, "openai"), CONTEXT, None)
        proposal = editor.propose(MutationRequest(PARENT, (), seed=1))
    assert "A = 9" in proposal.program.files["seed.py"]
    assert proposal.record["repaired"] and len(proposal.calls) == 2


@pytest.fixture
def services(tmp_path: Path) -> Iterator[AgentServices]:
    """Real drafts' sandbox and store reader (the local executor's: a thread of this
    process), though these agents never draft nor read the store."""
    task = load_task(write_synthetic_task(tmp_path / "task"))
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    reader = LocalExecutor(tmp_path).store_reader(store.url, "none")
    yield AgentServices(make_evaluator(task), task.spec.sandbox, reader)
    reader.kill()


def agent_outcome(
    services: AgentServices,
    api: str,
    *steps: Step,
    params: dict[str, Any] | None = None,
    token_cap: int | None = None,
    default: Step | None = None,
) -> tuple[Any, list[Any]]:
    """Run one agent proposal; the Proposal or the MutationError, and the requests."""
    with ScriptedLLMServer(*steps, default=default) as server:
        agent = Agent(params or {}, llm_spec(server, api), CONTEXT, None, services)
        request = MutationRequest(PARENT, (), seed=1, token_cap=token_cap)
        try:
            result: Any = agent.propose(request)
        except MutationError as error:
            result = error
    return result, server.requests


def user_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


@pytest.mark.parametrize("api", APIS)
def test_an_empty_agent_turn_is_nudged_and_the_agent_goes_on(
    services: AgentServices, api: str
) -> None:
    submit = ToolCall("submit", {"edits": RAISE_A})
    proposal, requests = agent_outcome(services, api, Empty(), submit)
    assert "A = 9" in proposal.program.files["seed.py"]
    assert proposal.record["turns"] == 2, "the empty turn counts against max_turns"
    assert [call.status for call in proposal.calls] == ["empty", "ok"]
    assert EMPTY_NUDGE not in prompt_text(requests[0].body)
    nudged = user_messages(requests[1].body)
    assert len(nudged) == 1 and nudged[0].endswith(EMPTY_NUDGE), (
        "the nudge joins the prompt, so no strict chat template sees two user messages"
    )


@pytest.mark.parametrize("api", APIS)
def test_an_empty_turn_after_tool_results_is_nudged_in_a_message_of_its_own(
    services: AgentServices, api: str
) -> None:
    notes = ToolCall("read_notes", {"topic": "knobs"})
    submit = ToolCall("submit", {"edits": RAISE_A})
    proposal, requests = agent_outcome(services, api, notes, Empty(), Empty(), submit)
    assert proposal.record["turns"] == 4
    last = requests[-1].body["messages"]
    assert last[-1] == {"role": "user", "content": EMPTY_NUDGE}, "the nudge was not sent"
    assert prompt_text(requests[-1].body).count(EMPTY_NUDGE) == 1, "nudges piled up"
    if api == "openai":
        assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
    else:
        assert [m["role"] for m in last[-3:]] == ["assistant", "user", "user"]
        assert last[-2]["content"][0]["type"] == "tool_result"


def test_an_agent_whose_every_turn_is_empty_is_empty(services: AgentServices) -> None:
    error, requests = agent_outcome(services, "openai", params={"max_turns": 3}, default=Empty())
    assert error.outcome == "empty" and "all 3 turns came back empty" in str(error)
    assert len(error.calls) == len(requests) == 3


@pytest.mark.parametrize("api", APIS)
def test_a_turn_lost_to_429s_ends_the_agents_proposal(services: AgentServices, api: str) -> None:
    notes = ToolCall("read_notes", {"topic": "knobs"})
    storm = [Fail(429, retry_after=0) for _ in range(ATTEMPTS)]
    error, requests = agent_outcome(services, api, notes, *storm, default=notes)
    assert error.outcome == "retries_exhausted"
    assert [call.status for call in error.calls] == ["ok"] + ["rate_limited"] * ATTEMPTS
    assert len(requests) == 1 + ATTEMPTS


def test_an_agent_that_never_submits_is_out_of_turns(services: AgentServices) -> None:
    wander = ToolCall("read_notes", {"topic": "knobs"})
    error, requests = agent_outcome(services, "openai", params={"max_turns": 3}, default=wander)
    assert error.outcome == "out_of_turns" and "3 turns used" in str(error)
    assert len(error.calls) == len(requests) == 3


def test_the_agents_token_cap_shrinks_with_the_runs_budget(services: AgentServices) -> None:
    wander = ToolCall("read_notes", {"topic": "knobs"}, input_tokens=400, output_tokens=100)
    budget, requests = agent_outcome(services, "openai", token_cap=900, default=wander)
    assert budget.outcome == "budget"
    assert "1000 tokens used, the cap is 900 (what the run's budget leaves" in str(budget)
    assert len(budget.calls) == len(requests) == 2
    own, _ = agent_outcome(
        services, "openai", params={"max_tokens": 1200}, token_cap=50_000, default=wander
    )
    assert "1500 tokens used, the cap is 1200 (the agent's max_tokens)" in str(own)
    assert own.outcome == "out_of_turns" and len(own.calls) == 3
    spent, requests = agent_outcome(services, "openai", token_cap=0, default=wander)
    assert spent.outcome == "budget" and not spent.calls and not requests
