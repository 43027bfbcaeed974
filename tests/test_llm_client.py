"""LLMClient through the real openai and anthropic SDKs, over HTTP, to the scripted server."""

from __future__ import annotations

import pickle
import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from evolve.llm import BUILTIN_PRICES, LLMCall, ModelConfig, Price, cost, parse_model
from evolve.llm.client import Completion, LLMClient
from evolve.llm.config import ModelSpecError
from tests.fakes.llm_server import Empty, Fail, Reply, ScriptedLLMServer, Stall

OPENAI_KEY = "sk-test-openai-4f1c"
ANTHROPIC_KEY = "sk-ant-test-9b2e"
MODELS = ["openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5"]
KEYS = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY}
KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLMServer]:
    """Both providers' SDKs pointed at one scripted server, as a user's env would point them."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    with ScriptedLLMServer() as running:
        monkeypatch.setenv("OPENAI_BASE_URL", running.openai_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", running.anthropic_url)
        yield running


@pytest.fixture
def waits() -> list[float]:
    return []


def client(model: str | ModelConfig, waits: list[float], **options: Any) -> LLMClient:
    config = parse_model(model) if isinstance(model, str) else model
    return LLMClient(config, sleep=waits.append, **options)


def ask(llm: LLMClient, prompt: str = "Make it faster.") -> Completion:
    return llm.complete("You edit C code.", [{"role": "user", "content": prompt}], max_tokens=256)


def statuses(calls: tuple[LLMCall, ...]) -> list[str]:
    return [call.status for call in calls]


@pytest.mark.parametrize("model", MODELS)
def test_a_reply_records_the_servers_token_counts_and_their_list_price(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    server.then(Reply("int f(void) { return 1; }", input_tokens=1200, output_tokens=345))

    completion = ask(client(model, waits))

    assert completion.text == "int f(void) { return 1; }"
    (call,) = completion.calls
    assert (call.status, call.input_tokens, call.output_tokens) == ("ok", 1200, 345)
    assert call.cost_usd == pytest.approx(cost(BUILTIN_PRICES[model], 1200, 345))
    assert call.priced and call.cost_usd > 0
    assert (call.provider, call.model) == tuple(model.split(":"))
    assert "You edit C code." in call.prompt and "Make it faster." in call.prompt
    assert call.response == completion.text and call.error is None


def test_each_sdk_sends_its_own_wire_format(server: ScriptedLLMServer, waits: list[float]) -> None:
    server.then(Reply("a"), Reply("b"))
    conversation = [{"role": "user", "content": "hi"}]
    client(MODELS[0], waits).complete("sys", conversation, max_tokens=99, temperature=0.3)
    client(MODELS[1], waits).complete("sys", conversation, max_tokens=99)

    to_openai, to_anthropic = (request.body for request in server.requests)
    assert to_openai["messages"] == [{"role": "system", "content": "sys"}, *conversation]
    assert (to_openai["max_completion_tokens"], to_openai["temperature"]) == (99, 0.3)
    assert (to_anthropic["system"], to_anthropic["messages"]) == ("sys", conversation)
    assert to_anthropic["max_tokens"] == 99 and "temperature" not in to_anthropic


def test_a_temperature_for_anthropic_is_refused_not_dropped(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    with pytest.raises(ValueError, match="no temperature"):
        client(MODELS[1], waits).complete("s", [], max_tokens=9, temperature=0.7)
    assert server.requests == []


@pytest.mark.parametrize("model", MODELS)
def test_a_429_storm_waits_as_long_as_retry_after_says_and_records_every_attempt(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    server.then(*[Fail(429, "slow down", retry_after=1)] * 3, Reply("at last"))

    completion = ask(client(model, waits))

    assert completion.text == "at last"
    assert statuses(completion.calls) == ["rate_limited"] * 3 + ["ok"]
    assert waits == [1.0, 1.0, 1.0]
    assert all("429" in (call.error or "") for call in completion.calls[:3])
    assert len(server.requests) == 4


def test_a_huge_retry_after_is_capped(server: ScriptedLLMServer, waits: list[float]) -> None:
    server.then(Fail(429, retry_after=3600), Reply("ok"))
    ask(client(MODELS[0], waits))
    assert waits == [60.0]


def test_server_errors_back_off_exponentially_then_succeed(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    server.then(Fail(500), Fail(503), Fail(529), Reply("fine"))

    completion = ask(client(MODELS[1], waits))

    assert completion.text == "fine"
    assert statuses(completion.calls) == ["server_error"] * 3 + ["ok"]
    for low, wait in zip([0.5, 1.0, 2.0], waits, strict=True):
        assert low <= wait <= 2 * low


def test_it_gives_up_after_max_attempts(server: ScriptedLLMServer, waits: list[float]) -> None:
    server.then(*[Fail(502)] * 5)

    completion = ask(client(MODELS[0], waits, max_attempts=3))

    assert completion.text is None
    assert statuses(completion.calls) == ["server_error"] * 3
    assert len(waits) == 2 and len(server.requests) == 3


@pytest.mark.parametrize("model", MODELS)
def test_a_stalled_reply_times_out_and_is_retried(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    server.then(Stall(5), Reply("prompt this time"))

    completion = ask(client(model, waits, timeout_s=0.5))

    assert completion.text == "prompt this time"
    assert statuses(completion.calls) == ["timeout", "ok"]
    assert 0.4 < completion.calls[0].latency_s < 3
    assert "0.5 s" in (completion.calls[0].error or "")


def test_an_unreachable_server_is_retried_as_a_server_error(
    monkeypatch: pytest.MonkeyPatch, waits: list[float]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = parse_model({"model": "m", "base_url": f"http://127.0.0.1:{port}/v1"})

    completion = ask(LLMClient(config, max_attempts=2, sleep=waits.append))

    assert statuses(completion.calls) == ["server_error", "server_error"]
    assert f"127.0.0.1:{port}" in (completion.calls[0].error or "")


@pytest.mark.parametrize("model", MODELS)
def test_an_empty_reply_is_returned_at_once_as_none_but_still_paid_for(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    server.then(Empty(input_tokens=700), Reply("never asked for"))

    completion = ask(client(model, waits))

    assert completion.text is None
    (call,) = completion.calls
    assert (call.status, call.input_tokens) == ("empty", 700)
    assert call.cost_usd > 0
    assert len(server.requests) == 1 and waits == []


def test_a_whitespace_reply_counts_as_empty(server: ScriptedLLMServer, waits: list[float]) -> None:
    server.then(Reply("  \n"))
    assert statuses(ask(client(MODELS[0], waits)).calls) == ["empty"]


@pytest.mark.parametrize("model", MODELS)
def test_a_rejected_key_is_not_retried_and_the_error_names_the_env_var(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    provider = model.split(":")[0]
    server.then(Fail(401, f"Incorrect API key provided: {KEYS[provider]}"), Reply("unused"))

    completion = ask(client(model, waits))

    assert completion.text is None
    (call,) = completion.calls
    assert call.status == "error"
    assert "401" in (call.error or "") and KEY_ENVS[provider] in (call.error or "")
    assert len(server.requests) == 1 and waits == []


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_other_client_errors_are_not_retried(
    server: ScriptedLLMServer, waits: list[float], status: int
) -> None:
    server.then(Fail(status, "max_tokens is too large"), Reply("unused"))

    (call,) = ask(client(MODELS[0], waits)).calls

    assert call.status == "error"
    assert f"HTTP {status}" in (call.error or "") and "max_tokens is too large" in (
        call.error or ""
    )
    assert len(server.requests) == 1


def test_a_missing_key_fails_before_any_request_and_says_which_env_var_to_set(
    server: ScriptedLLMServer, waits: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")

    (call,) = ask(client(MODELS[1], waits)).calls

    assert call.status == "error"
    assert "set ANTHROPIC_API_KEY" in (call.error or "")
    assert server.requests == []


@pytest.mark.parametrize("model", MODELS)
def test_the_key_from_the_env_is_sent_and_appears_in_no_record(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    key = KEYS[model.split(":")[0]]
    server.then(Fail(429, f"key {key} is over quota"), Fail(401, f"bad key {key}"))

    completion = ask(client(model, waits))

    assert [request.api_key for request in server.requests] == [key, key]
    assert all(key not in str(value) for request in server.requests for value in request.headers)
    assert statuses(completion.calls) == ["rate_limited", "error"]
    assert key not in repr(completion.calls)


def test_a_custom_key_env_is_read_and_a_local_server_needs_none(
    server: ScriptedLLMServer, waits: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    server.then(Reply("a", input_tokens=100), Reply("b"))
    monkeypatch.setenv("MY_VLLM_KEY", "vllm-secret")
    with_key = parse_model(
        {"model": "qwen", "base_url": server.openai_url, "api_key_env": "MY_VLLM_KEY"}
    )
    without = parse_model({"model": "qwen", "base_url": server.openai_url})
    monkeypatch.delenv("OPENAI_API_KEY")

    first = ask(client(with_key, waits, prices={"openai-compatible:qwen": Price(1.0, 0)}))
    second = ask(client(without, waits))

    assert server.requests[0].api_key == "vllm-secret"
    assert server.requests[1].api_key not in (None, "vllm-secret")
    assert server.requests[0].body["max_tokens"] == 256  # older servers: the classic name
    assert first.calls[0].provider == "openai-compatible"
    assert first.calls[0].cost_usd == pytest.approx(100 / 1e6) and first.calls[0].priced
    assert second.text == "b" and not second.calls[0].priced and second.calls[0].cost_usd == 0


def test_a_user_price_overrides_the_builtin_one(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    server.then(Reply("x", input_tokens=1_000_000, output_tokens=0))
    llm = client(MODELS[0], waits, prices={MODELS[0]: Price(7.0, 0.0)})
    assert ask(llm).calls[0].cost_usd == pytest.approx(7.0)


def test_long_prompts_and_replies_are_stored_truncated(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    server.then(Reply("r" * 5000))

    completion = ask(client(MODELS[0], waits, max_stored_chars=1000), "p" * 5000)

    assert completion.text == "r" * 5000
    call = completion.calls[0]
    assert call.prompt.startswith("[system]") and call.prompt.count("p") < 1000
    assert call.response.startswith("r" * 1000) and "4000 more characters" in call.response


def test_the_client_pickles_without_its_sdk_or_key_and_works_after(
    server: ScriptedLLMServer,
) -> None:
    server.then(Reply("before"), Reply("after"))
    llm = LLMClient(parse_model(MODELS[1]), timeout_s=5)
    assert ask(llm).text == "before"

    data = pickle.dumps(llm)
    clone = pickle.loads(data)

    assert ANTHROPIC_KEY.encode() not in data
    assert ask(clone).text == "after"
    assert server.requests[1].api_key == ANTHROPIC_KEY


@pytest.mark.parametrize(
    ("spec", "expected", "label"),
    [
        ("openai:gpt-4.1-mini", ModelConfig("openai", "gpt-4.1-mini"), "openai:gpt-4.1-mini"),
        ("anthropic:claude-x", ModelConfig("anthropic", "claude-x"), "anthropic:claude-x"),
        (
            {"model": "llama3", "base_url": "http://localhost:11434/v1"},
            ModelConfig("openai", "llama3", "http://localhost:11434/v1"),
            "openai-compatible:llama3",
        ),
    ],
)
def test_parse_model(spec: str | dict[str, str], expected: ModelConfig, label: str) -> None:
    assert parse_model(spec) == expected
    assert parse_model(spec).label == label


@pytest.mark.parametrize(
    ("spec", "complaint", "field"),
    [
        ("gpt-4", "openai:MODEL", "model"),
        ("google:gemini", "openai:MODEL", "model"),
        ("openai:", "openai:MODEL", "model"),
        ({"model": "m"}, "missing: give the server's address", "base_url"),
        ({"model": "m", "base_url": "localhost:8000"}, "'localhost:8000' is not an", "base_url"),
        ({"base_url": "http://x"}, "'model'", "model"),
        ({"model": "m", "base_url": "http://x", "key": "k"}, "unknown key(s) key", "model"),
        ({"model": "m", "base_url": "http://x", "api_key_env": " "}, "environment", "api_key_env"),
        (42, "a mapping", "model"),
    ],
)
def test_parse_model_says_what_is_wrong(spec: object, complaint: str, field: str) -> None:
    """`field` is the key the task loader points at: a bad base_url is on its own line."""
    with pytest.raises(ModelSpecError, match=re.escape(complaint)) as raised:
        parse_model(spec)  # type: ignore[arg-type]
    assert raised.value.field == field
