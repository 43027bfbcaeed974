"""The run's circuit per provider: the pure state machine on a fake clock, then the
circuits of the proposal worker that hosts them, shared by concurrent proposal tasks, with
real SDKs against a scripted server in a 429 storm."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray

from evolve.executors.on_ray import start_proposal_worker
from evolve.executors.ray_services import RemoteLedger, reaching
from evolve.llm import parse_model
from evolve.llm.circuit import (
    CAP_S,
    POLL_S,
    Circuit,
    provider_key,
)
from evolve.llm.client import LLMClient
from evolve.llm.hooks import CallHooks, hooked
from evolve.llm.records import LLMCall
from evolve.propose.service_host import ServicePlan
from tests.fakes.llm_server import Fail, Reply, ScriptedLLMServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def circuit(clock: Clock, seed: int = 7) -> Circuit:
    return Circuit(clock=clock, rng=random.Random(seed), base_s=1.0, cap_s=CAP_S)


def reopen(breaker: Circuit, clock: Clock, status: Any = "rate_limited") -> float:
    """Let the open period pass, take the probe, fail it: the next open period's length."""
    clock.now += breaker.wait_s()
    assert breaker.wait_s() == 0.0 and breaker.state == "half-open"
    breaker.report(status)
    return breaker.wait_s()


def test_a_closed_circuit_lets_every_request_go_and_ignores_other_failures(clock: Clock) -> None:
    breaker = circuit(clock)
    for status in ("ok", "empty", "error", "timeout"):
        breaker.report(status)
        assert breaker.wait_s() == 0.0 and breaker.state == "closed"
    assert breaker.describe() is None


@pytest.mark.parametrize("status", ["rate_limited", "server_error"])
def test_a_429_or_5xx_opens_it_and_everyone_waits(clock: Clock, status: Any) -> None:
    breaker = circuit(clock)
    breaker.report(status)

    assert breaker.state == "open"
    first = breaker.wait_s()
    assert 0.5 <= first <= 1.0
    clock.now += first / 2
    assert breaker.wait_s() == pytest.approx(first / 2)


def test_retry_after_is_honoured_up_to_the_cap(clock: Clock) -> None:
    breaker = circuit(clock)
    breaker.report("rate_limited", retry_after=12)
    assert breaker.wait_s() == pytest.approx(12)
    assert breaker.describe() == "open, 429s, retry in 12 s (1st backoff)"

    huge = circuit(clock)
    huge.report("rate_limited", retry_after=86_400)
    assert huge.wait_s() == pytest.approx(CAP_S)


def test_failures_that_were_already_in_flight_stretch_the_wait_but_not_the_backoff(
    clock: Clock,
) -> None:
    breaker = circuit(clock)
    breaker.report("rate_limited", retry_after=2)
    breaker.report("rate_limited")
    breaker.report("server_error", retry_after=5)

    assert breaker.backoffs == 1
    assert breaker.wait_s() == pytest.approx(5)
    assert breaker.describe() == "open, server errors, retry in 5 s (1st backoff)"


def test_each_failed_probe_backs_off_longer_with_jitter_up_to_the_cap(clock: Clock) -> None:
    breaker = circuit(clock)
    breaker.report("ok")  # the provider has answered: its outage is ridden out
    breaker.report("server_error")
    delays = [breaker.wait_s()] + [reopen(breaker, clock, "server_error") for _ in range(9)]

    for number, delay in enumerate(delays, start=1):
        ceiling = min(CAP_S, 2 ** (number - 1))
        assert ceiling / 2 <= delay <= ceiling
    assert delays[6] > delays[3] > delays[0]
    assert breaker.backoffs == 10 and "10th backoff" in (breaker.describe() or "")
    other = [circuit(clock, seed) for seed in (1, 2)]
    for breaker in other:
        breaker.report("server_error")
    assert other[0].wait_s() != other[1].wait_s(), "no jitter: the workers would move in step"


def test_half_open_lets_exactly_one_probe_through_while_the_others_wait(clock: Clock) -> None:
    breaker = circuit(clock)
    breaker.report("rate_limited", retry_after=3)
    clock.now += 3

    answers = [breaker.wait_s() for _ in range(5)]

    assert answers[0] == 0.0
    assert all(0 < wait <= POLL_S for wait in answers[1:])
    assert breaker.describe() == "half-open, probing after 429s (1st backoff)"


def test_a_successful_probe_closes_it_and_resets_the_backoff(clock: Clock) -> None:
    breaker = circuit(clock)
    breaker.report("rate_limited")
    reopen(breaker, clock)
    reopen(breaker, clock)
    clock.now += breaker.wait_s()
    assert breaker.wait_s() == 0.0

    breaker.report("ok")

    assert breaker.state == "closed" and breaker.backoffs == 0
    assert [breaker.wait_s() for _ in range(3)] == [0.0, 0.0, 0.0]
    breaker.report("rate_limited")
    assert breaker.wait_s() <= 1.0, "the backoff starts over after a close"


def test_a_probe_that_times_out_or_never_reports_hands_the_slot_on(clock: Clock) -> None:
    breaker = circuit(clock)
    breaker.report("server_error", retry_after=1)
    clock.now += 1
    assert breaker.wait_s() == 0.0
    breaker.report("timeout")
    assert breaker.wait_s() == 0.0, "a timed-out probe says nothing: the next caller probes"
    assert breaker.wait_s() > 0

    clock.now += 1_000  # that probe's worker was killed and never reported
    assert breaker.wait_s() == 0.0 and breaker.state == "half-open"


def test_requests_share_a_circuit_when_they_share_a_rate_limit() -> None:
    assert provider_key(parse_model("openai:gpt-5")) == "openai"
    assert provider_key(parse_model("openai:gpt-4.1-mini")) == "openai"
    assert provider_key(parse_model("anthropic:claude-haiku-4-5")) == "anthropic"
    local = parse_model({"model": "qwen", "base_url": "http://gpu-box:8000/v1"})
    assert provider_key(local) == "http://gpu-box:8000/v1"


@ray.remote(num_cpus=0)
class Ledger:
    """A stand-in for the run's ledger writer: it keeps what it is sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[int | None, LLMCall]] = []

    def record(self, proposal_id: int | None, call: LLMCall) -> None:
        self.calls.append((proposal_id, call))

    def reserve(self, proposal_id: int | None, call: LLMCall) -> str:
        """No budgets here: every request may be sent."""
        return "ok"

    def recorded(self) -> list[tuple[int | None, LLMCall]]:
        return self.calls


@ray.remote(num_cpus=0)
def propose(url: str, hooks: CallHooks) -> tuple[str | None, list[str]]:
    """What a proposal task does with a model: one request, under the run's hooks."""
    client = LLMClient(parse_model({"model": "scripted", "base_url": url}), max_attempts=8)
    with hooked(hooks):
        completion = client.complete("sys", [{"role": "user", "content": "go"}], max_tokens=9)
    return completion.text, [call.status for call in completion.calls]


class Storm:
    """429 with Retry-After 1 for `seconds` after the first request, then replies."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started: float | None = None
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply | Fail:
        with self.lock:
            now = time.monotonic()
            self.started = self.started or now
            if now - self.started < self.seconds:
                return Fail(429, "rate limit reached", retry_after=1)
        return Reply("done")


@pytest.mark.usefixtures("ray_session")
def test_workers_share_one_circuit_so_a_storm_costs_probes_not_a_stream(tmp_path: Path) -> None:
    workers, storm = 4, Storm(seconds=3.0)
    plan = ServicePlan(f"sqlite:///{tmp_path / 'e.db'}", base_s=0.5)
    circuits = start_proposal_worker({}, plan, ())
    ledger = Ledger.remote()  # type: ignore[attr-defined]
    shared = reaching(circuits)  # each task unpickles a view of its own
    began = time.time()
    with ScriptedLLMServer(default=storm) as server:
        refs = [
            propose.remote(server.openai_url, CallHooks(number, RemoteLedger(ledger), shared))
            for number in range(workers)
        ]
        seen: list[dict[str, str]] = []
        pending = refs
        while pending:
            _, pending = ray.wait(pending, timeout=0.2)
            seen.append(ray.get(circuits.status.remote()))
        results = ray.get(refs)
        ended = time.time()
        during = [r for r in server.requests if r.received_at - storm.started < storm.seconds]
        after = [r for r in server.requests if r.received_at - storm.started >= storm.seconds]

    assert [text for text, _ in results] == ["done"] * workers
    # Once the first 429s are in, only one probe goes out per open period, and each period
    # lasts at least the Retry-After of 1 s: three at most in the storm's 3 s, where
    # unshared retries would send every worker's request every second.
    assert len(during) <= workers + 3, [r.received_at - storm.started for r in during]
    assert len(after) == workers  # each worker's request went once the probe had closed it
    key = server.openai_url
    assert any(key in lines and "open, 429s" in lines[key] for lines in seen)
    assert ray.get(circuits.status.remote()) == {}
    recorded = ray.get(ledger.recorded.remote())
    statuses = sorted(status for _, statuses in results for status in statuses)
    assert sorted(call.status for _, call in recorded) == statuses
    assert sorted({number for number, _ in recorded}) == list(range(workers))
    assert all(began <= call.started_at <= ended for _, call in recorded)


@pytest.mark.usefixtures("ray_session")
def test_a_process_trusts_closed_for_a_while_and_reports_only_what_moves_the_circuit(
    tmp_path: Path,
) -> None:
    # Open for a second at a time: long enough that the asks below, a Ray call each, come
    # before it half-opens on a loaded machine (0.2 s was not, once in six runs).
    plan = ServicePlan(f"sqlite:///{tmp_path / 'e.db'}", base_s=1.0, cap_s=1.0)
    circuits = start_proposal_worker({}, plan, ())
    here = reaching(circuits, trust_s=60.0)
    elsewhere = reaching(circuits)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    def told(state: Callable[[], bool]) -> bool:
        """Whether the host comes to `state`: a report is sent without waiting for it, and
        a question asked of the host directly, as here, may overtake it."""
        deadline = time.monotonic() + 30.0
        while not state() and time.monotonic() < deadline:
            time.sleep(0.05)
        return state()

    assert here.admit("p", sleep) is False, "closed: nothing to report on success"
    elsewhere.report("p", "rate_limited", None, probe=False)  # a trip is always told
    assert told(lambda: ray.get(circuits.ask.remote("p"))[1] == "open")
    # Another process's trip reaches this one only when it asks again (after trust_s).
    assert here.admit("p", sleep) is False and slept == []

    here.report("p", "rate_limited", None, probe=False)  # its own trip ends its trust
    assert here.admit("p", sleep) is True, "let through after the wait: the probe"
    assert slept and ray.get(circuits.ask.remote("p"))[1] == "half-open"
    elsewhere.report("p", "ok", None, probe=False)  # sent on trust: not told
    assert ray.get(circuits.status.remote()), "a success sent on trust closed nothing"
    here.report("p", "ok", None, probe=True)
    assert told(lambda: ray.get(circuits.status.remote()) == {})
    assert ray.get(circuits.ask.remote("p")) == (0.0, "closed")


@ray.remote(num_cpus=0)
class SlowToHear:
    """A host whose reports land late, and whose questions do not wait for them: as two
    threads of a threaded actor may run them."""

    def __init__(self) -> None:
        self.state = "closed"

    async def report(self, key: str, status: str, retry_after: float | None = None) -> None:
        await asyncio.sleep(0.5)
        self.state = "open"

    async def ask(self, key: str) -> tuple[float, str]:
        return 0.0, self.state


@pytest.mark.usefixtures("ray_session")
def test_a_process_hears_its_own_report_before_it_asks_again() -> None:
    host = SlowToHear.remote()  # type: ignore[attr-defined]
    circuits = reaching(host)
    circuits.report("p", "rate_limited", None, probe=False)
    assert circuits.ask("p") == (0.0, "open")
