"""One model request, made through the provider's own SDK and the retry loop in retry.py.

The SDKs' built-in retries are switched off so that every HTTP attempt passes through here
and becomes an LLMCall: a storm of 429s shows up in the ledger, and its cost and waits are
visible instead of hidden inside a library. An empty reply comes back at once (text None,
status "empty") and the caller decides what to do next.

Inside a proposal (evolve/llm/hooks.py), each attempt is reserved against the run's budgets
and written to its ledger before it is sent (evolve/llm/reservations.py), goes to the ledger
again as soon as it ends, and waits on the run's circuit for its provider.

A provider's SDK loads on its first request, or when `preload` asks for it: each takes a
second or so and tens of megabytes to import, and a process
needs only those its models use.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from evolve.llm import hooks
from evolve.llm.circuit import Gate, provider_key
from evolve.llm.config import ModelConfig, Provider
from evolve.llm.conversation import AssistantTurn, Tool, Turn, render_turn
from evolve.llm.failures import classify
from evolve.llm.prices import BUILTIN_PRICES, Price, cost
from evolve.llm.records import LLMCall, Usage
from evolve.llm.reservations import prompt_tokens_bound, worst_usd
from evolve.llm.retry import Attempt, retry
from evolve.plugin.clipping import middle_truncate
from evolve.plugin.secrets import lookup

# Local servers (vLLM, Ollama, llama.cpp) often want no key, but the SDKs insist on one.
_PLACEHOLDER_KEY = "no-key-needed"
# How long, beyond its own timeout, a request waits for room in the budgets while others are
# in flight: theirs end within their timeouts and their circuits' waits, so a longer wait
# means a reservation that was never settled.
RESERVE_PATIENCE_S = 300.0
_SDK_CLIENTS: dict[tuple[str, str | None, str, float], Any] = {}  # see _shared_sdk
_SDK_LOCK = threading.Lock()
_BASE_URL_ENV: dict[Provider, str] = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
}


@dataclass(frozen=True)
class Completion:
    """The reply text (None if no attempt produced one) and every attempt that was paid for."""

    text: str | None
    calls: tuple[LLMCall, ...]


@dataclass(frozen=True)
class Exchange:
    """One assistant turn (None if no attempt produced one) and every attempt paid for."""

    turn: AssistantTurn | None
    calls: tuple[LLMCall, ...]


class LLMClient:
    """Talks to one model. Cheap to pickle to Ray workers: the SDK client (and the key inside
    it) is rebuilt on first use in each process, never shipped."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        timeout_s: float = 60.0,
        max_attempts: int = 4,
        prices: Mapping[str, Price] | None = None,
        max_stored_chars: int = 20_000,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {max_attempts}")
        self.config = config
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.price = {**BUILTIN_PRICES, **(prices or {})}.get(config.label)
        self.max_stored_chars = max_stored_chars
        self._sleep = sleep
        self._sdk: Any = None  # the provider's SDK client (openai.OpenAI, anthropic.Anthropic)
        self._api_key: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sdk": None, "_api_key": None}

    def complete(
        self,
        system: str,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float | None = None,
    ) -> Completion:
        """Ask until a reply, a final error, or max_attempts; every attempt is recorded.

        ValueError for a temperature with an Anthropic model: the Messages API (version
        2026-10-21, which the SDK sends) rejects every sampling parameter, so it would
        otherwise be dropped without a word."""
        self._check_temperature(temperature)

        requests = provider_requests(self.config.provider)

        def ask(sdk: Any) -> tuple[str | None, Usage]:
            if self.config.provider == "openai":
                return requests.complete(
                    sdk, self.config, system, messages, max_tokens, temperature
                )
            return requests.complete(sdk, self.config, system, messages, max_tokens)

        prompt = self._clip(_render(system, messages))
        sent = [system] if system else []
        held = self._worst_case([*sent, *(m["content"] for m in messages)], max_tokens)
        outcome, calls = self._exchange(prompt, held, ask, lambda text: not (text or "").strip())
        return Completion(outcome.answer if outcome.status == "ok" else None, calls)

    def converse(
        self,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[Tool],
        *,
        max_tokens: int,
        temperature: float | None = None,
    ) -> Exchange:
        """One assistant turn of a tool-using conversation, with the same retries and
        records as `complete`; the turn is None when no attempt produced one."""
        self._check_temperature(temperature)

        requests = provider_requests(self.config.provider)

        def ask(sdk: Any) -> tuple[AssistantTurn, Usage]:
            if self.config.provider == "openai":
                return requests.converse(
                    sdk, self.config, system, turns, tools, max_tokens, temperature
                )
            return requests.converse(sdk, self.config, system, turns, tools, max_tokens)

        parts = [f"[system]\n{system}"] if system else []
        rendered = [*parts, *map(render_turn, turns)]
        prompt = self._clip("\n\n".join(rendered))
        held = self._worst_case(rendered, max_tokens)
        outcome, calls = self._exchange(prompt, held, ask, lambda turn: turn is None or turn.empty)
        return Exchange(outcome.answer if outcome.status == "ok" else None, calls)

    def _check_temperature(self, temperature: float | None) -> None:
        if temperature is not None and self.config.provider == "anthropic":
            raise ValueError(
                f"{self.config.label}: the Anthropic Messages API takes no temperature; "
                "leave llm.temperature unset for Anthropic models"
            )

    def _worst_case(self, texts: Sequence[str], max_tokens: int) -> tuple[int, float]:
        """The tokens and USD a request of `texts` with `max_tokens` may cost at most."""
        prompt_tokens = prompt_tokens_bound(texts)
        return prompt_tokens + max_tokens, worst_usd(self.price, prompt_tokens, max_tokens)

    def _exchange(
        self,
        prompt: str,
        worst: tuple[int, float],
        ask: Callable[[Any], tuple[Any, Usage]],
        is_empty: Callable[[Any], bool],
    ) -> tuple[Attempt, tuple[LLMCall, ...]]:
        current = hooks.current()
        gate = None
        if current is not None and current.gate is not None:
            gate = Gate(current.gate, provider_key(self.config))
        held: list[LLMCall] = []  # each attempt's reservation, the latest last

        def reserve() -> None:
            reservation = LLMCall(
                provider=self.config.vendor,
                model=self.config.model,
                prompt="",
                response="",
                input_tokens=0,
                output_tokens=0,
                cost_usd=0.0,
                latency_s=0.0,
                status="in_flight",
                priced=self.price is not None,
                started_at=time.time(),
                reserved_tokens=worst[0],
                reserved_usd=worst[1],
            )
            hooks.reserve(reservation, RESERVE_PATIENCE_S + self.timeout_s, self._sleep)
            held.append(reservation)

        def record(outcome: Attempt, latency_s: float, started_at: float) -> LLMCall:
            call = self._record(prompt, outcome, latency_s, started_at, held[-1])
            hooks.report_call(call)
            return call

        return retry(
            lambda: self._attempt(ask, is_empty),
            record,
            self.max_attempts,
            self._sleep,
            gate,
            reserve,
        )

    def _attempt(
        self, ask: Callable[[Any], tuple[Any, Usage]], is_empty: Callable[[Any], bool]
    ) -> Attempt:
        if self._sdk is None:
            key = self._read_key()
            if key is None:  # never sent: its row says why, charged nothing
                return Attempt(
                    "refused",
                    error=f"no API key for {self.config.label}: set {self.config.key_env}",
                )
            self._connect(key)
        sdk = provider_requests(self.config.provider).SDK
        try:
            answer, usage = ask(self._sdk)
        except sdk.APIError as failure:
            return classify(failure, sdk, self.config, self.timeout_s, self._redact)
        if is_empty(answer):
            return Attempt("empty", usage=usage, error="the model replied with no text")
        return Attempt("ok", answer, usage=usage)

    def _read_key(self) -> str | None:
        """The key lent to this proposal task, or where none is lent (the driver, a script),
        the environment's: Ray's workers hold none there (evolve/plugin/secrets.py)."""
        key = (lookup(self.config.key_env) or "").strip()
        if key:
            return key
        return _PLACEHOLDER_KEY if self.config.base_url is not None else None

    def _connect(self, key: str) -> None:
        self._sdk = _shared_sdk(self.config, key, self.timeout_s)
        self._api_key = key

    def _redact(self, text: str) -> str:
        """Servers echo keys back in auth errors; none may reach a record."""
        if self._api_key and self._api_key != _PLACEHOLDER_KEY:
            return text.replace(self._api_key, "[redacted]")
        return text

    def _record(
        self,
        prompt: str,
        outcome: Attempt,
        latency_s: float,
        started_at: float,
        reservation: LLMCall,
    ) -> LLMCall:
        """The attempt as the ledger keeps it, under its reservation's call_id."""
        usage = outcome.usage
        return LLMCall(
            provider=self.config.vendor,
            model=self.config.model,
            prompt=prompt,
            response=self._clip(_response_text(outcome.answer)),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=0.0
            if self.price is None
            else cost(
                self.price,
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
            ),
            latency_s=latency_s,
            status=outcome.status,
            error=outcome.error,
            priced=self.price is not None,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            started_at=started_at,
            call_id=reservation.call_id,
            reserved_tokens=reservation.reserved_tokens,
            reserved_usd=reservation.reserved_usd,
        )

    def _clip(self, text: str) -> str:
        """Stored texts keep both ends: a prompt's instructions and a reply's conclusion
        come last."""
        return middle_truncate(text, self.max_stored_chars)


def provider_requests(provider: Provider) -> ModuleType:
    """The module that speaks to `provider` through its SDK; importing it loads the SDK."""
    if provider == "openai":
        from evolve.llm import openai_requests  # loads openai, here only

        return openai_requests
    from evolve.llm import anthropic_requests  # loads anthropic, here only

    return anthropic_requests


def _shared_sdk(config: ModelConfig, key: str, timeout_s: float) -> Any:
    """One SDK client per endpoint, key and timeout in a process, shared by its threads:
    each of a proposal worker's threads, with mutators (and so model clients) of its own,
    had built its own on its first proposal, with a connection pool of its own. An SDK
    client, like the HTTP connection pool inside it, is safe to use from many threads at
    once."""
    # Where base_url is not given, the SDK reads its own variable, as a user's env may set.
    base_url = config.base_url or os.environ.get(_BASE_URL_ENV[config.provider])
    identity = (config.provider, base_url, key, timeout_s)
    with _SDK_LOCK:
        if identity not in _SDK_CLIENTS:
            _SDK_CLIENTS[identity] = provider_requests(config.provider).connect(
                config, key, timeout_s
            )
        return _SDK_CLIENTS[identity]


def preload(providers: Iterable[Provider]) -> None:
    """Load and warm up these providers' SDKs now, ahead of the first request that needs
    one (evolve/llm/warm_up.py)."""
    for provider in set(providers):
        provider_requests(provider).warm_up()


def _render(system: str, messages: list[dict[str, str]]) -> str:
    """The conversation as one readable text, for the ledger (not for the wire)."""
    parts = [f"[system]\n{system}"] if system else []
    parts += [f"[{message['role']}]\n{message['content']}" for message in messages]
    return "\n\n".join(parts)


def _response_text(answer: Any) -> str:
    if isinstance(answer, AssistantTurn):
        return render_turn(answer).removeprefix("[assistant]\n")
    return answer or ""
