"""Requests in Anthropic's Messages shape, which takes the system prompt apart and no
sampling parameters."""

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


def complete(
    sdk: anthropic.Anthropic,
    config: ModelConfig,
    system: str,
    messages: list[dict[str, str]],
    max_tokens: int,
) -> tuple[str | None, int, int]:
    """The reply text and the tokens in and out."""
    options: dict[str, Any] = {"max_tokens": max_tokens}
    if system:
        options["system"] = system
    reply = sdk.messages.create(model=config.model, messages=messages, **options)
    text = "".join(block.text for block in reply.content if block.type == "text")
    return text, reply.usage.input_tokens, reply.usage.output_tokens


def converse(
    sdk: anthropic.Anthropic,
    config: ModelConfig,
    system: str,
    turns: Sequence[Turn],
    tools: Sequence[Tool],
    max_tokens: int,
) -> tuple[AssistantTurn, int, int]:
    """The assistant's turn, its tool calls read from `tool_use` blocks, and the tokens."""
    options: dict[str, Any] = {"max_tokens": max_tokens, "tools": anthropic_tools(tools)}
    if system:
        options["system"] = system
    reply = sdk.messages.create(model=config.model, messages=anthropic_messages(turns), **options)
    text = "".join(block.text for block in reply.content if block.type == "text")
    uses = tuple(
        ToolUse(block.id, block.name, block.input)
        if isinstance(block.input, dict)
        else ToolUse(block.id, block.name, {}, malformed="the input must be a JSON object")
        for block in reply.content
        if block.type == "tool_use"
    )
    return AssistantTurn(text, uses), reply.usage.input_tokens, reply.usage.output_tokens
