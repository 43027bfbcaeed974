"""Requests in OpenAI's Chat Completions shape, which compatible local servers also speak.

OpenAI caches a prompt's stable prefix by itself: nothing is sent for it, and the reply's
usage says how many of the prompt's tokens came from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion

from evolve.llm.config import ModelConfig
from evolve.llm.conversation import (
    AssistantTurn,
    Tool,
    Turn,
    openai_messages,
    openai_tools,
    parse_arguments,
)
from evolve.llm.records import Usage
from evolve.llm.warm_up import http_client, warm

SDK = openai  # whose errors evolve/llm/failures.py reads


def connect(config: ModelConfig, key: str, timeout_s: float) -> openai.OpenAI:
    """The SDK's client, with its own retries off: every attempt passes through
    evolve/llm/retry.py, so that each becomes a record."""
    return openai.OpenAI(
        base_url=config.base_url,
        api_key=key,
        timeout=timeout_s,
        max_retries=0,
        http_client=http_client(openai),
    )


def warm_up() -> None:
    """See evolve/llm/warm_up.py."""
    answer = {
        "id": "warm-up",
        "object": "chat.completion",
        "created": 0,
        "model": "warm-up",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": ""},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    body = {"model": "warm-up", "messages": [{"role": "user", "content": ""}]}
    warm(
        openai,
        lambda http: openai.OpenAI(
            base_url="http://warm-up.invalid/v1", api_key="warm-up", http_client=http
        ),
        lambda sdk: _usage(_create(sdk, body).usage),
        answer,
    )


def complete(
    sdk: openai.OpenAI,
    config: ModelConfig,
    system: str,
    messages: list[dict[str, str]],
    max_tokens: int,
    temperature: float | None,
) -> tuple[str | None, Usage]:
    """The reply text and its tokens."""
    head = [{"role": "system", "content": system}] if system else []
    body = {"model": config.model, "messages": [*head, *messages]}
    reply = _create(sdk, {**body, **_options(config, max_tokens, temperature)})
    text = reply.choices[0].message.content if reply.choices else None
    return text, _usage(reply.usage)


def converse(
    sdk: openai.OpenAI,
    config: ModelConfig,
    system: str,
    turns: Sequence[Turn],
    tools: Sequence[Tool],
    max_tokens: int,
    temperature: float | None,
) -> tuple[AssistantTurn, Usage]:
    """The assistant's turn, its tool calls read from `tool_calls`, and the tokens."""
    body = {
        "model": config.model,
        "messages": openai_messages(system, turns),
        "tools": openai_tools(tools),
    }
    reply = _create(sdk, {**body, **_options(config, max_tokens, temperature)})
    usage = _usage(reply.usage)
    if not reply.choices:
        return AssistantTurn(), usage
    message = reply.choices[0].message
    uses = tuple(
        parse_arguments(call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or ()
        if call.type == "function"
    )
    return AssistantTurn(message.content or "", uses), usage


def _create(sdk: openai.OpenAI, body: dict[str, Any]) -> ChatCompletion:
    """A Chat Completions request through the SDK's documented `post`, which answers with
    the same response type, errors and timeout as `chat.completions.create`. That one first
    walks the whole body through the SDK's type-driven transform: a fifth of a proposal
    worker's CPU with a fast model (a py-spy profile), for bodies that are plain JSON
    already."""
    return sdk.post("/chat/completions", body=body, cast_to=ChatCompletion)


def _usage(usage: CompletionUsage | None) -> Usage:
    """OpenAI counts the cached tokens inside `prompt_tokens`; it reports no cache writes.
    Compatible servers may send no usage at all."""
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details else 0
    return Usage(usage.prompt_tokens, usage.completion_tokens, cached)


def _options(config: ModelConfig, max_tokens: int, temperature: float | None) -> dict[str, Any]:
    # OpenAI's reasoning models refuse max_tokens; compatible servers may not know the
    # newer max_completion_tokens.
    limit = "max_tokens" if config.base_url else "max_completion_tokens"
    options: dict[str, Any] = {limit: max_tokens}
    if temperature is not None:
        options["temperature"] = temperature
    return options
