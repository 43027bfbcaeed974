"""A proposal worker makes its share of the model slots' proposals at once; the others wait
in it for a slot, and once the run stops they come back unsent, with nothing paid."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest
import ray

from evolve.executors.on_ray import start_proposal_worker
from evolve.llm.client import LLMClient
from evolve.llm.config import parse_model
from evolve.mutators import MutationError, MutationRequest, Parent, Proposal
from evolve.plugin.program import Program
from evolve.plugin.secrets import Keys
from evolve.propose.making import MutationFailed
from tests.conftest import SYNTHETIC_SEED
from tests.fakes.llm_server import Reply, ScriptedLLMServer, Stall


class AskOnce:
    """Asks the model once, then declines with the call it paid for."""

    name = "asker"

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.url = params["url"]

    def propose(self, request: MutationRequest) -> Proposal:
        client = LLMClient(parse_model({"model": "scripted", "base_url": self.url}))
        exchange = client.complete("sys", [{"role": "user", "content": "go"}], max_tokens=9)
        raise MutationError("asked", exchange.calls)


@pytest.mark.usefixtures("ray_session")
def test_proposals_beyond_the_slots_wait_and_are_turned_away_unsent_when_the_run_stops() -> None:
    with ScriptedLLMServer(default=Stall(5.0, Reply("no"))) as server:
        mutators = {"asker": AskOnce({"url": server.openai_url})}
        worker = start_proposal_worker(mutators, None, (), running=1)
        request = MutationRequest(Parent(1, Program({"s.py": SYNTHETIC_SEED}), None), (), seed=1)
        refs = [worker.propose.remote("asker", request, Keys({}), n, False) for n in (1, 2, 3)]
        deadline = time.monotonic() + 60
        while not server.requests:
            assert time.monotonic() < deadline, "no proposal reached the model"
            time.sleep(0.01)
        ray.get(worker.stop.remote(), timeout=30)
        results = ray.get(refs, timeout=60)
        served = len(server.requests)

    asked = [r for r in results if r.reason == "asked"]
    waiting = [r for r in results if r.reason != "asked"]
    assert served == 1 and len(asked) == 1 and len(asked[0].calls) == 1
    assert len(waiting) == 2
    for turned_away in waiting:
        assert isinstance(turned_away, MutationFailed)
        assert turned_away.outcome == "interrupted" and not turned_away.calls
