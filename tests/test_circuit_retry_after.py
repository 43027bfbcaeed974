"""The circuit waits what a server's Retry-After says, never its own longer backoff; a
provider that has never answered is probed every second; and a refused key shuts the
circuit for the run, so that no worker of any process sends another request."""

from __future__ import annotations

import random

import pytest

from evolve.llm.circuit import CAP_S, Circuit, ProviderCircuits, Refused, SharedCircuits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def answered_circuit(clock: Clock) -> Circuit:
    breaker = Circuit(clock=clock, rng=random.Random(3), base_s=1.0, cap_s=CAP_S)
    breaker.report("ok")
    return breaker


def probe_fails(breaker: Circuit, clock: Clock, retry_after: float | None = None) -> float:
    """Let the wait pass, send the probe, fail it with a 5xx: the next wait."""
    clock.now += breaker.wait_s()
    assert breaker.wait_s() == 0.0 and breaker.state == "half-open"
    breaker.report("server_error", retry_after)
    return breaker.wait_s()


def test_after_a_long_outage_a_retry_after_of_5_s_is_waited_not_the_backoff(
    clock: Clock,
) -> None:
    breaker = answered_circuit(clock)
    breaker.report("server_error")
    waits = [probe_fails(breaker, clock) for _ in range(7)]
    assert waits[-1] > 60, "the outage grew the backoff"

    assert probe_fails(breaker, clock, retry_after=5) == pytest.approx(5)
    assert breaker.describe() == "open, server errors, retry in 5 s (9th backoff)"


def test_a_retry_after_from_a_request_in_flight_shortens_a_long_wait(clock: Clock) -> None:
    breaker = answered_circuit(clock)
    breaker.report("server_error")
    for _ in range(7):
        probe_fails(breaker, clock)
    breaker.report("rate_limited", retry_after=5)  # sent before the circuit opened
    assert breaker.wait_s() == pytest.approx(5)
    breaker.report("server_error")  # one without a Retry-After changes nothing
    assert breaker.wait_s() == pytest.approx(5)


def test_a_provider_that_never_answered_is_probed_every_second(clock: Clock) -> None:
    breaker = Circuit(clock=clock, rng=random.Random(3), base_s=1.0, cap_s=CAP_S)
    breaker.report("server_error")
    waits = [breaker.wait_s()] + [probe_fails(breaker, clock) for _ in range(12)]
    assert all(0.5 <= wait <= 1.0 for wait in waits), waits

    clock.now += breaker.wait_s()
    breaker.wait_s()
    breaker.report("ok")  # a probe is answered: from now on outages are ridden out
    breaker.report("server_error")
    grown = [probe_fails(breaker, clock) for _ in range(6)]
    assert grown[-1] > 16, grown


def test_a_refusal_shuts_the_circuit_for_every_process_of_the_run() -> None:
    circuits = ProviderCircuits()
    here = SharedCircuits(circuits.ask, circuits.report)
    elsewhere = SharedCircuits(circuits.ask, circuits.report, trust_s=0.0)
    slept: list[float] = []
    assert here.admit("p", slept.append) is False  # closed: trusted for a while

    here.report("p", "refused", None, probe=False)

    with pytest.raises(Refused, match="not sent: p refused an earlier request"):
        here.admit("p", slept.append)  # at once, trust or not
    with pytest.raises(Refused):
        elsewhere.admit("p", slept.append)  # on its next question
    here.report("p", "ok", None, probe=True)
    assert circuits.ask("p") == (0.0, "refused"), "nothing reopens a refused circuit"
    assert circuits.status() == {"p": "p: refused the key or model; the run stops"}
    assert not slept
    assert elsewhere.admit("q", slept.append) is False, "another provider is not refused"
