"""The scripted server itself: each step type as the real SDKs parse it."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request

import anthropic
import openai
import pytest

from tests.fakes.llm_server import Fail, Reply, ScriptedLLMServer, Stall, ToolCall, prompt_text

USER = [{"role": "user", "content": "x = 21"}]


def openai_sdk(server: ScriptedLLMServer, timeout: float = 5) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_url, api_key="k", timeout=timeout, max_retries=0)


def anthropic_sdk(server: ScriptedLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.anthropic_url, api_key="k", max_retries=0)


def chat(sdk: openai.OpenAI) -> openai.types.chat.ChatCompletion:
    return sdk.chat.completions.create(model="m", messages=USER)  # type: ignore[arg-type]


def message(sdk: anthropic.Anthropic) -> anthropic.types.Message:
    return sdk.messages.create(model="m", max_tokens=9, messages=USER)  # type: ignore[arg-type]


def test_tool_calls_parse_in_both_sdks() -> None:
    call = ToolCall("evaluate", {"draft": "int f();"}, text="Let me check.")
    with ScriptedLLMServer(call, call) as server:
        choice = chat(openai_sdk(server)).choices[0]
        reply = message(anthropic_sdk(server))

    (tool_call,) = choice.message.tool_calls or []
    assert choice.finish_reason == "tool_calls"
    assert tool_call.function.name == "evaluate"  # type: ignore[union-attr]
    assert json.loads(tool_call.function.arguments) == {"draft": "int f();"}  # type: ignore[union-attr]
    assert reply.stop_reason == "tool_use"
    text, use = reply.content
    assert (text.type, use.type) == ("text", "tool_use")
    assert (use.name, use.input) == ("evaluate", {"draft": "int f();"})  # type: ignore[union-attr]


def test_a_truncated_reply_says_it_hit_max_tokens() -> None:
    cut = Reply("int f(", truncated=True)
    with ScriptedLLMServer(cut, cut) as server:
        assert chat(openai_sdk(server)).choices[0].finish_reason == "length"
        assert message(anthropic_sdk(server)).stop_reason == "max_tokens"


def test_a_step_can_compute_its_reply_from_the_prompt() -> None:
    def doubler(body: dict) -> Reply:
        (number,) = re.findall(r"\d+", prompt_text(body))
        return Reply(f"x = {2 * int(number)}")

    with ScriptedLLMServer(doubler, doubler) as server:
        assert chat(openai_sdk(server)).choices[0].message.content == "x = 42"
        assert message(anthropic_sdk(server)).content[0].text == "x = 42"  # type: ignore[union-attr]


def test_errors_come_in_each_providers_shape_with_retry_after() -> None:
    with ScriptedLLMServer(Fail(429, "slow", retry_after=2), Fail(529, "busy")) as server:
        with pytest.raises(openai.RateLimitError) as limited:
            chat(openai_sdk(server))
        with pytest.raises(anthropic.APIStatusError) as overloaded:
            message(anthropic_sdk(server))

    assert limited.value.response.headers["retry-after"] == "2"
    assert limited.value.body == {
        "message": "slow", "type": "invalid_request_error", "param": None,
        "code": "rate_limit_exceeded",
    }  # fmt: skip
    assert overloaded.value.status_code == 529
    assert overloaded.value.body == {
        "type": "error", "error": {"type": "overloaded_error", "message": "busy"}
    }  # fmt: skip


def test_an_exhausted_script_answers_500_or_the_default() -> None:
    with ScriptedLLMServer() as bare, pytest.raises(openai.InternalServerError, match="exhausted"):
        chat(openai_sdk(bare))
    with ScriptedLLMServer(default=Reply("again")) as server:
        assert [chat(openai_sdk(server)).choices[0].message.content for _ in "ab"] == ["again"] * 2


def test_a_stall_blocks_neither_other_requests_nor_shutdown() -> None:
    server = ScriptedLLMServer(Stall(30), Reply("quick")).start()
    failures: list[Exception] = []

    def stalled() -> None:
        try:
            chat(openai_sdk(server, timeout=60))
        except openai.APIConnectionError as error:
            failures.append(error)

    waiter = threading.Thread(target=stalled)
    waiter.start()
    while not server.requests:
        time.sleep(0.01)
    assert chat(openai_sdk(server)).choices[0].message.content == "quick"
    started = time.monotonic()
    server.stop()
    waiter.join(timeout=15)

    assert time.monotonic() - started < 10  # not the stall's 30 s, with room for a slow machine
    assert not waiter.is_alive() and len(failures) == 1


def test_requests_are_recorded_without_their_auth_headers() -> None:
    with ScriptedLLMServer(Reply("a"), Reply("b")) as server:
        chat(openai_sdk(server))
        message(anthropic_sdk(server))

    assert [(r.api, r.path, r.api_key) for r in server.requests] == [
        ("openai", "/v1/chat/completions", "k"),
        ("anthropic", "/v1/messages", "k"),
    ]
    assert all("authorization" not in r.headers for r in server.requests)
    assert server.requests[1].headers["anthropic-version"]


def test_an_unknown_path_is_a_404() -> None:
    with ScriptedLLMServer() as server:
        request = urllib.request.Request(f"{server.openai_url}/responses", data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(request, timeout=5)
    assert missing.value.code == 404
