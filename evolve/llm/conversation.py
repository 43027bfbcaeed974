"""A tool-using conversation, held in one neutral shape and written in each provider's wire format.

The agent keeps its turns as these dataclasses, so the same loop runs on OpenAI's Chat
Completions (`tool_calls` on the assistant message, one `tool` message per result) and on
Anthropic's Messages (`tool_use` blocks, answered by `tool_result` blocks in a user turn).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]  # a JSON schema for the arguments object


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    arguments: Mapping[str, Any]
    malformed: str | None = None  # why the arguments could not be read, to tell the model


@dataclass(frozen=True)
class AssistantTurn:
    text: str = ""
    tool_uses: tuple[ToolUse, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.text.strip() and not self.tool_uses


@dataclass(frozen=True)
class ToolResults:
    results: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (tool use id, text)


Turn = str | AssistantTurn | ToolResults  # a plain string is the user speaking


def openai_messages(system: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for turn in turns:
        if isinstance(turn, str):
            messages.append({"role": "user", "content": turn})
        elif isinstance(turn, AssistantTurn):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if turn.tool_uses:
                message["tool_calls"] = [
                    {
                        "id": use.id,
                        "type": "function",
                        "function": {"name": use.name, "arguments": json.dumps(use.arguments)},
                    }
                    for use in turn.tool_uses
                ]
            messages.append(message)
        else:
            messages.extend(
                {"role": "tool", "tool_call_id": use_id, "content": text}
                for use_id, text in turn.results
            )
    return messages


def anthropic_messages(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in turns:
        if isinstance(turn, str):
            messages.append({"role": "user", "content": turn})
        elif isinstance(turn, AssistantTurn):
            uses = [
                {"type": "tool_use", "id": use.id, "name": use.name, "input": dict(use.arguments)}
                for use in turn.tool_uses
            ]
            text = [{"type": "text", "text": turn.text}] if turn.text else []
            blocks: list[dict[str, Any]] = [*text, *uses]
            messages.append({"role": "assistant", "content": blocks})
        else:
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use_id, "content": text}
                        for use_id, text in turn.results
                    ],
                }
            )
    return messages


def openai_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


def anthropic_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": dict(tool.parameters)}
        for tool in tools
    ]


def parse_arguments(use_id: str, name: str, raw: str | None) -> ToolUse:
    """OpenAI sends arguments as a JSON string a model may garble; say so, do not crash."""
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError as problem:
        return ToolUse(use_id, name, {}, malformed=f"the arguments are not valid JSON: {problem}")
    if not isinstance(arguments, dict):
        return ToolUse(use_id, name, {}, malformed="the arguments must be a JSON object")
    return ToolUse(use_id, name, arguments)


def render_turn(turn: Turn) -> str:
    """One turn as readable text, for the ledger (never for the wire)."""
    if isinstance(turn, str):
        return f"[user]\n{turn}"
    if isinstance(turn, AssistantTurn):
        uses = [f"[tool call {use.name}] {json.dumps(use.arguments)}" for use in turn.tool_uses]
        return "\n".join(["[assistant]", *([turn.text] if turn.text else []), *uses])
    return "\n".join(f"[tool result {use_id}]\n{text}" for use_id, text in turn.results)
