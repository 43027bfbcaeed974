"""One backoff per provider for the whole run, so that a 429 storm costs a probe now and then
instead of every worker's retries.

A provider that answers 429 or 5xx (or cannot be reached) opens its circuit: every worker
then waits instead of asking. The wait honours Retry-After, and without one backs off
exponentially with jitter. When it is over, exactly one request goes through as a probe
(half-open) while the others keep waiting: its success closes the circuit, its failure
opens it again for longer. A server's Retry-After sets the wait, never this backoff: after
a long outage, its own delay would outlast what the server asks. A provider whose
circuits have heard no answer from it yet (a probe's, or any report but a 429, a 5xx or a
timeout) is probed every second rather than ever more rarely: one that fails from the
start is more likely misconfigured than overloaded, and the run's failure streak
(evolve/propose/failure_streak.py) ends such a run after a few dozen attempts, not an hour.

A refusal (a key refused, an unknown model: status "refused") cannot get better by waiting:
the circuit shuts for good, and every request still asked for is turned away with
`Refused`, unsent, while the driver stops the run.

`Circuit` is the pure state machine (a clock and a random source are injected, for tests);
`ProviderCircuits` holds one per provider for all of a run's workers, in the proposal worker
that hosts the run's services (evolve/propose/service_host.py);
`SharedCircuits` is a process's side of them, and `Gate` one provider's part of it, which a
client asks and tells.

Asking the host before every request cost a round trip per model call, the largest part
of a call's own cost with a fast model. So a process that hears "closed" sends without
asking for the next TRUST_S, and tells the host only what can change its state: the
failures that trip it, and how a request sent while it was not closed (a probe) ended. A
process that sees a trip stops trusting at once; the others hear of it within TRUST_S.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from evolve.llm.config import ModelConfig
from evolve.llm.records import Status

log = logging.getLogger("evolve.llm.circuit")

State = Literal["closed", "open", "half-open", "refused"]

TRIPS: frozenset[Status] = frozenset({"rate_limited", "server_error"})
BASE_S = 1.0
CAP_S = 120.0
# How long the half-open probe may take before another caller gets the slot: a worker
# killed mid-request never reports, and must not hold every other worker back for good.
PROBE_LEASE_S = 150.0
# How often a caller waiting on someone else's probe asks again.
POLL_S = 1.0
# How long a process sends without asking after the circuits answered "closed".
TRUST_S = 0.5

_CAUSES: dict[Status, str] = {"rate_limited": "429s", "server_error": "server errors"}
# Statuses that say nothing of whether the provider answers.
_SILENT: frozenset[Status] = TRIPS | {"timeout"}


class Refused(RuntimeError):
    """A request not sent: its provider refused this run's key or model earlier, and the
    run is stopping."""


class Circuit:
    """One provider's circuit. `wait_s` answers a caller about to send a request (0.0: go
    now); `report` tells it how a request ended."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        base_s: float = BASE_S,
        cap_s: float = CAP_S,
    ) -> None:
        self._clock = clock
        self._rng = rng or random.Random()
        self.base_s, self.cap_s = base_s, cap_s
        self.state: State = "closed"
        self.backoffs = 0  # openings since it was last closed; sets the next delay
        self.cause: Status | None = None
        self.answered = False  # whether a report said the provider answers (see above)
        self._until = 0.0  # open: when the wait ends; half-open: when the probe's lease ends

    def wait_s(self) -> float:
        """Seconds to wait before asking again; 0.0 lets the request go, and in half-open
        hands this caller the one probe."""
        now = self._clock()
        if self.state in ("closed", "refused"):
            return 0.0
        if now < self._until:
            return self._until - now if self.state == "open" else min(POLL_S, self._until - now)
        self.state = "half-open"
        self._until = now + PROBE_LEASE_S
        return 0.0

    def report(self, status: Status, retry_after: float | None = None) -> None:
        """A 429 or 5xx opens the circuit (again, for longer, from half-open); one while it
        is open (a request sent before it opened) changes the wait only where it carries a
        Retry-After, which then sets it. Any other answer from half-open closes it. A
        timeout says nothing about the provider: it frees the probe slot for the next
        caller. A refusal shuts it for the rest of the run."""
        now = self._clock()
        if self.state == "refused":
            return
        if status not in _SILENT:
            self.answered = True
        if status == "refused":
            self.state, self.cause = "refused", status
        elif status in TRIPS:
            self.cause = status
            if self.state == "open":
                if retry_after is not None:
                    self._until = now + self._capped(retry_after)
            else:
                self.backoffs += 1
                self.state = "open"
                self._until = now + self._delay(retry_after)
        elif self.state == "half-open":
            if status == "timeout":
                self._until = now
            else:
                self.state, self.backoffs, self.cause = "closed", 0, None

    def describe(self) -> str | None:
        """A short line for the live board; None while closed."""
        if self.state == "closed":
            return None
        if self.state == "refused":
            return "refused the key or model; the run stops"
        cause = _CAUSES.get(self.cause, "failures") if self.cause else "failures"
        backoff = f"({_ordinal(self.backoffs)} backoff)"
        left = self._until - self._clock()
        if self.state == "open" and left > 0:
            return f"open, {cause}, retry in {left:.0f} s {backoff}"
        return f"half-open, probing after {cause} {backoff}"

    def _delay(self, retry_after: float | None) -> float:
        """What the server asked (up to the cap: one probe per cap costs little and notices
        a provider that is back early); without a Retry-After, exponential with jitter, or
        where the provider has never answered, a second with jitter."""
        if retry_after is not None:
            return self._capped(retry_after)
        doublings = self.backoffs - 1 if self.answered else 0
        ceiling = min(self.cap_s, self.base_s * 2**doublings)
        return ceiling * self._rng.uniform(0.5, 1.0)

    def _capped(self, seconds: float) -> float:
        return min(self.cap_s, max(0.0, seconds))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def provider_key(config: ModelConfig) -> str:
    """Requests that share a rate limit share a circuit: a server by its address, an API by
    its provider."""
    return config.base_url or config.provider


class ProviderCircuits:
    """The run's circuits, one per provider key, shared by every proposal worker."""

    def __init__(self, base_s: float = BASE_S, cap_s: float = CAP_S) -> None:
        self.base_s, self.cap_s = base_s, cap_s
        self._circuits: dict[str, Circuit] = {}

    def ask(self, key: str) -> tuple[float, State]:
        """The caller's wait (0.0: go now), and the state the circuit is in after it."""
        circuit = self._circuit(key)
        return circuit.wait_s(), circuit.state

    def report(self, key: str, status: Status, retry_after: float | None = None) -> None:
        circuit = self._circuit(key)
        before = circuit.state
        circuit.report(status, retry_after)
        if circuit.state == "open" and before != "open":
            log.warning("%s: %s", key, circuit.describe())
        elif circuit.state == "closed" and before != "closed":
            log.info("%s: circuit closed, the provider answers again", key)

    def status(self) -> dict[str, str]:
        """ "provider: state, cause, wait (nth backoff)" lines, for providers not closed."""
        lines = {key: circuit.describe() for key, circuit in self._circuits.items()}
        return {key: f"{key}: {line}" for key, line in lines.items() if line is not None}

    def _circuit(self, key: str) -> Circuit:
        if key not in self._circuits:
            self._circuits[key] = Circuit(base_s=self.base_s, cap_s=self.cap_s)
        return self._circuits[key]


class SharedCircuits:
    """One process's view of the run's circuits; its threads share it. `ask` and `tell`
    reach the circuits: directly in the process that hosts them, or from another
    (evolve/executors/ray_services.py: `reaching`)."""

    def __init__(
        self,
        ask: Callable[[str], tuple[float, State]],
        tell: Callable[[str, Status, float | None], object],
        trust_s: float = TRUST_S,
    ) -> None:
        self.ask, self.tell, self.trust_s = ask, tell, trust_s
        self._closed_until: dict[str, float] = {}  # provider key: until when to trust it
        self._refused: set[str] = set()  # provider keys refused, seen here or told

    def admit(self, key: str, sleep: Callable[[float], None]) -> bool:
        """Return when a request may go; True if its outcome must be reported, because
        the circuit was not closed when it was let through. Asks again after each wait:
        the probe that another worker sent may have failed and opened it for longer.
        Refused, unsent, once the provider refused the run's key or model."""
        if key in self._refused:
            raise Refused(f"not sent: {key} refused an earlier request of this run")
        if time.monotonic() < self._closed_until.get(key, 0.0):
            return False
        while True:
            wait, state = self.ask(key)
            if state == "refused":
                self._refused.add(key)
                raise Refused(f"not sent: {key} refused an earlier request of this run")
            if wait <= 0:
                break
            sleep(wait)
        if state == "closed":
            self._closed_until[key] = time.monotonic() + self.trust_s
            return False
        return True

    def report(self, key: str, status: Status, retry_after: float | None, *, probe: bool) -> None:
        """A request let through on trust that succeeded tells the circuits nothing they do
        not know; a refusal is told at once, and turns this process's next requests away."""
        if status in TRIPS or status == "refused":
            self._closed_until.pop(key, None)
        if status == "refused":
            self._refused.add(key)
        if probe or status in TRIPS or status == "refused":
            self.tell(key, status, retry_after)


@dataclass(frozen=True)
class Gate:
    """A client's side of the circuits: one provider key."""

    circuits: SharedCircuits
    key: str

    def admit(self, sleep: Callable[[float], None]) -> bool:
        """See SharedCircuits.admit."""
        return self.circuits.admit(self.key, sleep)

    def report(self, status: Status, retry_after: float | None, *, probe: bool) -> None:
        self.circuits.report(self.key, status, retry_after, probe=probe)
