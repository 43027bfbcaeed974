"""Requests in Anthropic's Messages shape, which takes the system prompt apart and no
sampling parameters.

The system prompt is marked for Anthropic's prompt cache: it is the fixed part of every
prompt of a run (and of every turn of a conversation), so later requests read it, with the
tools before it, at a tenth of the input price. A prompt shorter than the model's minimum
(1024 tokens for most) is simply not cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic

from evolve.llm.config import ModelConfig
from evolve.llm.conversation import (
    AssistantTurn,
    Tool,
    ToolUse,
    Turn,
    anthropic_messages,
    anthropic_tools,
)
from evolve.llm.records import Usage
from evolve.llm.warm_up import http_client, warm

SDK = anthropic  # whose errors evolve/llm/failures.py reads


def connect(config: ModelConfig, key: str, timeout_s: float) -> anthropic.Anthropic:
    """The SDK's client, with its own retries off: every attempt passes through
    evolve/llm/retry.py, so that each becomes a record."""
    return anthropic.Anthropic(
        base_url=config.base_url,
        api_key=key,
        timeout=timeout_s,
        max_retries=0,
        http_client=http_client(anthropic),
    )


def warm_up() -> None:
    """See evolve/llm/warm_up.py."""
    answer = {
        "id": "warm-up",
        "type": "message",
        "role": "assistant",
        "model": "warm-up",
        "content": [{"type": "text", "text": ""}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    warm(
        anthropic,
        lambda http: anthropic.Anthropic(
            base_url="http://warm-up.invalid", api_key="warm-up", http_client=http
        ),
        lambda sdk: _usage(
            sdk.messages.create(
                model="warm-up", max_tokens=1, messages=[{"role": "user", "content": ""}]
            ).usage
        ),
        answer,
    )


def complete(
    sdk: anthropic.Anthropic,
    config: ModelConfig,
    system: str,
    messages: list[dict[str, str]],
    max_tokens: int,
) -> tuple[str | None, Usage]:
    """The reply text and its tokens."""
    options: dict[str, Any] = {"max_tokens": max_tokens}
    if system:
        options["system"] = _cached(system)
    reply = sdk.messages.create(model=config.model, messages=messages, **options)
    text = "".join(block.text for block in reply.content if block.type == "text")
    return text, _usage(reply.usage)


def converse(
    sdk: anthropic.Anthropic,
    config: ModelConfig,
    system: str,
    turns: Sequence[Turn],
    tools: Sequence[Tool],
    max_tokens: int,
) -> tuple[AssistantTurn, Usage]:
    """The assistant's turn, its tool calls read from `tool_use` blocks, and the tokens."""
    options: dict[str, Any] = {"max_tokens": max_tokens, "tools": anthropic_tools(tools)}
    if system:
        options["system"] = _cached(system)
    reply = sdk.messages.create(model=config.model, messages=anthropic_messages(turns), **options)
    text = "".join(block.text for block in reply.content if block.type == "text")
    uses = tuple(
        ToolUse(block.id, block.name, block.input)
        if isinstance(block.input, dict)
        else ToolUse(block.id, block.name, {}, malformed="the input must be a JSON object")
        for block in reply.content
        if block.type == "tool_use"
    )
    return AssistantTurn(text, uses), _usage(reply.usage)


def _cached(system: str) -> list[dict[str, Any]]:
    """The system prompt as one text block that ends a cached prefix."""
    return [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]


def _usage(usage: anthropic.types.Usage) -> Usage:
    """Anthropic's `input_tokens` leaves out the tokens read from or written to the cache,
    so the call's whole input is the sum of the three."""
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    return Usage(usage.input_tokens + read + written, usage.output_tokens, read, written)
