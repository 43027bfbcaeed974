"""One model request, made through the provider's own SDK, with the only retry loop there is.

The SDKs' built-in retries are switched off so that every HTTP attempt passes through here
and becomes an LLMCall: a storm of 429s shows up in the ledger, and its cost and waits are
visible instead of hidden inside a library.

Retried: 429 (after its Retry-After, capped), 5xx, timeouts and lost connections, with
exponential backoff and jitter where the server gave no Retry-After. Not retried: any other
4xx (a bad key or request stays bad) and an empty reply. An empty reply is an answer the
model was paid for; asking the same prompt again mostly buys the same nothing, so it is
returned at once (text None, status "empty") and the caller decides what to do next.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anthropic
import openai

from evolve.llm.config import ModelConfig
from evolve.llm.conversation import (
    AssistantTurn,
    Tool,
    ToolUse,
    Turn,
    anthropic_messages,
    anthropic_tools,
    openai_messages,
    openai_tools,
    parse_arguments,
    render_turn,
)
from evolve.llm.prices import BUILTIN_PRICES, Price, cost
from evolve.secrets import lookup

Status = Literal["ok", "rate_limited", "server_error", "timeout", "empty", "error"]

_RETRYABLE: frozenset[Status] = frozenset({"rate_limited", "server_error", "timeout"})
_MAX_RETRY_AFTER_S = 60.0
_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 30.0
# Local servers (vLLM, Ollama, llama.cpp) often want no key, but the SDKs insist on one.
_PLACEHOLDER_KEY = "no-key-needed"


@dataclass(frozen=True)
class LLMCall:
    """One HTTP attempt, as the ledger and the USD budget see it. Holds no API key."""

    provider: str
    model: str
    prompt: str
    response: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    status: Status
    error: str | None = None
    priced: bool = True  # False: the model is in no price table, so cost_usd is 0.0, not real


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


@dataclass(frozen=True)
class _Attempt:
    status: Status
    answer: Any = None  # the reply text, or an AssistantTurn in a conversation
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    retry_after: float | None = None


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
        self._sdk: openai.OpenAI | anthropic.Anthropic | None = None
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

        def ask(sdk: openai.OpenAI | anthropic.Anthropic) -> tuple[str | None, int, int]:
            if isinstance(sdk, openai.OpenAI):
                return self._ask_openai(sdk, system, messages, max_tokens, temperature)
            return self._ask_anthropic(sdk, system, messages, max_tokens)

        prompt = self._clip(_render(system, messages))
        outcome, calls = self._exchange(prompt, ask, lambda text: not (text or "").strip())
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

        def ask(sdk: openai.OpenAI | anthropic.Anthropic) -> tuple[AssistantTurn, int, int]:
            if isinstance(sdk, openai.OpenAI):
                return self._converse_openai(sdk, system, turns, tools, max_tokens, temperature)
            return self._converse_anthropic(sdk, system, turns, tools, max_tokens)

        parts = [f"[system]\n{system}"] if system else []
        prompt = self._clip("\n\n".join([*parts, *map(render_turn, turns)]))
        outcome, calls = self._exchange(prompt, ask, lambda turn: turn is None or turn.empty)
        return Exchange(outcome.answer if outcome.status == "ok" else None, calls)

    def _check_temperature(self, temperature: float | None) -> None:
        if temperature is not None and self.config.provider == "anthropic":
            raise ValueError(
                f"{self.config.label}: the Anthropic Messages API takes no temperature; "
                "leave llm.temperature unset for Anthropic models"
            )

    def _exchange(
        self,
        prompt: str,
        ask: Callable[[Any], tuple[Any, int, int]],
        is_empty: Callable[[Any], bool],
    ) -> tuple[_Attempt, tuple[LLMCall, ...]]:
        """The retry loop, the only one: each attempt becomes an LLMCall."""
        calls: list[LLMCall] = []
        for attempt in range(1, self.max_attempts + 1):
            started = time.monotonic()
            outcome = self._attempt(ask, is_empty)
            calls.append(self._record(prompt, outcome, time.monotonic() - started))
            if outcome.status not in _RETRYABLE or attempt == self.max_attempts:
                break
            self._sleep(_wait(attempt, outcome.retry_after))
        return outcome, tuple(calls)

    def _attempt(
        self, ask: Callable[[Any], tuple[Any, int, int]], is_empty: Callable[[Any], bool]
    ) -> _Attempt:
        if self._sdk is None:
            key = self._read_key()
            if key is None:
                return _Attempt(
                    "error",
                    error=f"no API key for {self.config.label}: set {self.config.key_env}",
                )
            self._connect(key)
        try:
            answer, tokens_in, tokens_out = ask(self._sdk)
        except (openai.APIError, anthropic.APIError) as failure:
            return self._failed(failure)
        if is_empty(answer):
            return _Attempt(
                "empty",
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                error="the model replied with no text",
            )
        return _Attempt("ok", answer, input_tokens=tokens_in, output_tokens=tokens_out)

    def _read_key(self) -> str | None:
        """The key lent to this proposal task, or where none is lent (the driver, a script),
        the environment's: Ray's workers hold none there (evolve/secrets.py)."""
        key = (lookup(self.config.key_env) or "").strip()
        if key:
            return key
        return _PLACEHOLDER_KEY if self.config.base_url is not None else None

    def _connect(self, key: str) -> None:
        sdk = openai.OpenAI if self.config.provider == "openai" else anthropic.Anthropic
        self._sdk = sdk(
            base_url=self.config.base_url, api_key=key, timeout=self.timeout_s, max_retries=0
        )
        self._api_key = key

    def _openai_options(self, max_tokens: int, temperature: float | None) -> dict[str, Any]:
        # OpenAI's reasoning models refuse max_tokens; compatible servers may not know the
        # newer max_completion_tokens.
        limit = "max_tokens" if self.config.base_url else "max_completion_tokens"
        options: dict[str, Any] = {limit: max_tokens}
        if temperature is not None:
            options["temperature"] = temperature
        return options

    def _ask_openai(
        self,
        sdk: openai.OpenAI,
        system: str,
        messages: list[dict[str, str]],
        max_tokens: int,
        temperature: float | None,
    ) -> tuple[str | None, int, int]:
        head = [{"role": "system", "content": system}] if system else []
        reply = sdk.chat.completions.create(
            model=self.config.model,
            messages=[*head, *messages],
            **self._openai_options(max_tokens, temperature),
        )
        usage = reply.usage
        text = reply.choices[0].message.content if reply.choices else None
        return text, usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0

    def _ask_anthropic(
        self, sdk: anthropic.Anthropic, system: str, messages: list[dict[str, str]], max_tokens: int
    ) -> tuple[str | None, int, int]:
        options: dict[str, Any] = {"max_tokens": max_tokens}
        if system:
            options["system"] = system
        reply = sdk.messages.create(model=self.config.model, messages=messages, **options)
        text = "".join(block.text for block in reply.content if block.type == "text")
        return text, reply.usage.input_tokens, reply.usage.output_tokens

    def _converse_openai(
        self,
        sdk: openai.OpenAI,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[Tool],
        max_tokens: int,
        temperature: float | None,
    ) -> tuple[AssistantTurn, int, int]:
        reply = sdk.chat.completions.create(
            model=self.config.model,
            messages=openai_messages(system, turns),  # type: ignore[arg-type]
            tools=openai_tools(tools),  # type: ignore[arg-type]
            **self._openai_options(max_tokens, temperature),
        )
        usage = reply.usage
        tokens = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        if not reply.choices:
            return AssistantTurn(), *tokens
        message = reply.choices[0].message
        uses = tuple(
            parse_arguments(call.id, call.function.name, call.function.arguments)
            for call in message.tool_calls or ()
            if call.type == "function"
        )
        return AssistantTurn(message.content or "", uses), *tokens

    def _converse_anthropic(
        self,
        sdk: anthropic.Anthropic,
        system: str,
        turns: Sequence[Turn],
        tools: Sequence[Tool],
        max_tokens: int,
    ) -> tuple[AssistantTurn, int, int]:
        options: dict[str, Any] = {"max_tokens": max_tokens, "tools": anthropic_tools(tools)}
        if system:
            options["system"] = system
        reply = sdk.messages.create(
            model=self.config.model, messages=anthropic_messages(turns), **options
        )
        text = "".join(block.text for block in reply.content if block.type == "text")
        uses = tuple(
            ToolUse(block.id, block.name, block.input)
            if isinstance(block.input, dict)
            else ToolUse(block.id, block.name, {}, malformed="the input must be a JSON object")
            for block in reply.content
            if block.type == "tool_use"
        )
        return AssistantTurn(text, uses), reply.usage.input_tokens, reply.usage.output_tokens

    def _failed(self, failure: openai.APIError | anthropic.APIError) -> _Attempt:
        where = self.config.base_url or f"the {self.config.provider} API"
        if isinstance(failure, openai.APITimeoutError | anthropic.APITimeoutError):
            return _Attempt("timeout", error=f"no reply from {where} within {self.timeout_s:g} s")
        if isinstance(failure, openai.APIConnectionError | anthropic.APIConnectionError):
            # A server that is down or restarting: its side failed, so worth another try.
            cause = failure.__cause__ or failure
            return _Attempt("server_error", error=f"cannot reach {where}: {cause}")
        if not isinstance(failure, openai.APIStatusError | anthropic.APIStatusError):
            return _Attempt("error", error=self._redact(f"bad reply from {where}: {failure}"))
        code = failure.status_code
        message = f"HTTP {code} from {self.config.label}: {_server_message(failure)}"
        if code in (401, 403):
            message += f" (the key is read from {self.config.key_env}: is it set and valid?)"
        elif code == 404:
            message += f" (is {self.config.model!r} a model that {where} serves?)"
        status: Status = (
            "rate_limited" if code == 429 else "server_error" if code >= 500 else "error"
        )
        retry_after = _retry_after(failure.response.headers.get("retry-after"))
        return _Attempt(status, error=self._redact(message), retry_after=retry_after)

    def _redact(self, text: str) -> str:
        """Servers echo keys back in auth errors; none may reach a record."""
        if self._api_key and self._api_key != _PLACEHOLDER_KEY:
            return text.replace(self._api_key, "[redacted]")
        return text

    def _record(self, prompt: str, outcome: _Attempt, latency_s: float) -> LLMCall:
        return LLMCall(
            provider=self.config.vendor,
            model=self.config.model,
            prompt=prompt,
            response=self._clip(_response_text(outcome.answer)),
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            cost_usd=0.0
            if self.price is None
            else cost(self.price, outcome.input_tokens, outcome.output_tokens),
            latency_s=latency_s,
            status=outcome.status,
            error=outcome.error,
            priced=self.price is not None,
        )

    def _clip(self, text: str) -> str:
        if len(text) <= self.max_stored_chars:
            return text
        dropped = len(text) - self.max_stored_chars
        return f"{text[: self.max_stored_chars]}\n[... {dropped} more characters not stored]"


def _render(system: str, messages: list[dict[str, str]]) -> str:
    """The conversation as one readable text, for the ledger (not for the wire)."""
    parts = [f"[system]\n{system}"] if system else []
    parts += [f"[{message['role']}]\n{message['content']}" for message in messages]
    return "\n\n".join(parts)


def _response_text(answer: Any) -> str:
    if isinstance(answer, AssistantTurn):
        return render_turn(answer).removeprefix("[assistant]\n")
    return answer or ""


def _server_message(failure: openai.APIStatusError | anthropic.APIStatusError) -> str:
    """The provider's own words, from either error shape ({error: {message}} or {message})."""
    body = failure.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return failure.message


def _retry_after(header: str | None) -> float | None:
    """Seconds from a Retry-After header; the HTTP-date form falls back to backoff."""
    try:
        return max(0.0, float(header)) if header is not None else None
    except ValueError:
        return None


def _wait(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, _MAX_RETRY_AFTER_S)
    ceiling = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (attempt - 1))
    return ceiling * random.uniform(0.5, 1.0)
