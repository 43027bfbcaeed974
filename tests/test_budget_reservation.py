"""Reserve, then spend: every model request is held against the run's USD and token budgets
at its worst case before it is sent, so that no budget is passed with many proposals in
flight, and a request whose reply never comes is charged as the provider bills it.

The scripted provider below bills as a real one does: an answered request its usage, and
one it took but whose answer the client never read (our timeout) in full, here the worst
case the client could be charged (the prompt's bound and every answer token). Its bill is
set down when each request arrives, so the ledger is compared with what the server billed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from evolve.engine.loop import Engine
from evolve.executors.local import LocalExecutor
from evolve.llm.records import LLMCall
from evolve.llm.reservations import Book
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.fakes.llm_server import ScriptedLLMServer
from tests.helpers.llm_runs import (
    MAX_TOKENS,
    PRICE_IN,
    PRICE_OUT,
    BillingModel,
    billed_task,
)

RUN = "reserve"


def run(tmp_path: Path, task_file: Path) -> tuple[Any, Store]:
    task = load_task(task_file)
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    record = store.create_run(
        RUN, task_path=str(task.path), task_yaml=task.text, seed=3, settings={}
    )
    engine = Engine(
        task,
        store,
        record,
        make_evaluator(task),
        LocalExecutor(tmp_path),
        workers=1,
        results_dir=tmp_path / "out",
    )
    return engine.run(), store


def refusal(reason: str, unit: str) -> float:
    """The worst case of the request the budgets refused, from the run's stop reason."""
    found = re.search(rf"the next request may (?:use|cost) \$?([\d,.]+){unit}\)$", reason)
    assert found, reason
    return float(found.group(1).replace(",", ""))


@pytest.mark.system
def test_a_token_budget_with_many_proposals_in_flight_is_never_passed(tmp_path: Path) -> None:
    limit = 12_000
    model = BillingModel()
    with ScriptedLLMServer(default=model) as server:
        task = billed_task(tmp_path, server.openai_url, budget=f"  tokens: {limit}\n")
        outcome, store = run(tmp_path, task)
        billed = sum(model.billed)

    assert outcome.reason.startswith("token budget reached"), outcome.reason
    calls = store.llm_calls_of_run(RUN)
    assert len(calls) == len(model.billed) >= 4
    charged = store.llm_spend(RUN)[1]
    assert charged == billed == sum(c.charged_tokens for c in calls)
    assert limit - refusal(outcome.reason, "") < billed <= limit


@pytest.mark.system
def test_a_usd_budget_with_many_proposals_in_flight_is_never_passed(tmp_path: Path) -> None:
    limit = 0.02
    with ScriptedLLMServer(default=BillingModel()) as server:
        task = billed_task(tmp_path, server.openai_url, budget=f"  usd: {limit}\n")
        outcome, store = run(tmp_path, task)
        requests = len(server.requests)

    assert outcome.reason.startswith("USD budget reached"), outcome.reason
    calls = store.llm_calls_of_run(RUN)
    assert len(calls) == requests >= 4
    billed = sum((c.input_tokens * PRICE_IN + c.output_tokens * PRICE_OUT) / 1e6 for c in calls)
    spent = store.llm_spend(RUN)[0]
    assert spent == pytest.approx(billed)
    assert limit - refusal(outcome.reason, "") - 1e-4 < spent <= limit


@pytest.mark.system
def test_a_request_that_outlasts_the_timeout_is_charged_as_the_provider_bills_it(
    tmp_path: Path,
) -> None:
    """Every third request is answered after the client gave up on it: the provider bills
    it, and the ledger charges it its worst case; the two agree, and the token budget
    still holds with the stalls counted."""
    limit = 30_000
    model = BillingModel(stalls=lambda n: n % 3 == 1, stall_s=6.0)
    with ScriptedLLMServer(default=model) as server:
        task = billed_task(tmp_path, server.openai_url, budget=f"  tokens: {limit}\n", timeout_s=3)
        outcome, store = run(tmp_path, task)
        billed = sum(model.billed)

    calls = store.llm_calls_of_run(RUN)
    timed_out = [c for c in calls if c.status == "timeout"]
    assert timed_out and all(c.input_tokens == 0 for c in timed_out)
    assert all(c.charged_tokens > MAX_TOKENS for c in timed_out)
    assert len(calls) == len(model.billed)
    assert store.llm_spend(RUN)[1] == billed <= limit
    assert outcome.reason.startswith("token budget reached"), outcome.reason


def reservation(tokens: int, usd: float = 0.0) -> LLMCall:
    return LLMCall(
        "openai", "m", "", "", 0, 0, 0.0, 0.0, "in_flight", reserved_tokens=tokens,
        reserved_usd=usd,
    )  # fmt: skip


def test_a_request_that_does_not_fit_waits_while_others_are_out_then_is_refused() -> None:
    book = Book(None, 1000, charged_tokens=100)
    first, second = reservation(600), reservation(600)
    assert book.reserve(first) == "ok"
    assert book.reserve(second) == "wait", "the first may settle for less than it holds"
    answered = LLMCall("openai", "m", "p", "r", 150, 50, 0.0, 0.1, "ok", call_id=first.call_id,
                       reserved_tokens=600)  # fmt: skip
    book.settle(answered)
    assert book.charged_tokens == 300
    assert book.reserve(second) == "ok"
    timed_out = LLMCall("openai", "m", "p", "", 0, 0, 0.0, 1.0, "timeout",
                        call_id=second.call_id, reserved_tokens=600)  # fmt: skip
    book.settle(timed_out)
    assert book.charged_tokens == 900  # billed in full
    assert book.reserve(reservation(101)).startswith("token budget reached (900 of 1,000")
    assert book.reserve(reservation(100)) == "ok"
