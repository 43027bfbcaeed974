"""LLMClient through the real openai and anthropic SDKs, over HTTP, to the scripted server."""

from __future__ import annotations

import os
import pickle
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from evolve.llm import BUILTIN_PRICES, LLMCall, ModelConfig, Price, cost, parse_model
from evolve.llm.client import Completion, LLMClient
from evolve.llm.config import ModelSpecError
from evolve.llm.conversation import Tool
from evolve.plugin.clipping import middle_truncate
from evolve.task.loading import load_task
from tests.conftest import write_synthetic_task
from tests.fakes.llm_server import (
    Empty,
    Fail,
    Reply,
    ScriptedLLMServer,
    Stall,
    ToolCall,
    prompt_text,
)

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
    cached_system = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]
    assert (to_anthropic["system"], to_anthropic["messages"]) == (cached_system, conversation)
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
def test_a_rejected_key_is_refused_not_retried_and_the_error_names_the_env_var(
    server: ScriptedLLMServer, waits: list[float], model: str
) -> None:
    provider = model.split(":")[0]
    server.then(Fail(401, f"Incorrect API key provided: {KEYS[provider]}"), Reply("unused"))

    completion = ask(client(model, waits))

    assert completion.text is None
    (call,) = completion.calls
    assert call.status == "refused"
    assert call.error == (
        f"{model} refused the key in {KEY_ENVS[provider]} (HTTP 401: Incorrect API key "
        "provided: [redacted]): set a valid key"
    )
    assert len(server.requests) == 1 and waits == []


@pytest.mark.parametrize("status", [403, 404])
def test_a_key_without_access_or_an_unknown_model_is_refused(
    server: ScriptedLLMServer, waits: list[float], status: int
) -> None:
    server.then(Fail(status, "no such model for you"), Reply("unused"))

    (call,) = ask(client(MODELS[0], waits)).calls

    assert call.status == "refused"
    assert f"(HTTP {status}: no such model for you)" in (call.error or "")
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 422])
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

    assert call.status == "refused"
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
    assert statuses(completion.calls) == ["rate_limited", "refused"]
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
    assert len(call.response) <= 1000 and call.response.startswith("r" * 400)
    assert call.response.endswith("r" * 400) and "characters omitted ...]" in call.response


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


@pytest.mark.parametrize("model", MODELS)
def test_copies_of_a_client_on_many_threads_share_one_sdk_and_each_gets_its_own_reply(
    server: ScriptedLLMServer, model: str
) -> None:
    """As a proposal worker's threads do: each has its own copy of the mutators."""
    server.default = lambda body: Reply("echo: " + prompt_text(body).rsplit("\n", 1)[-1])
    copies = [pickle.loads(pickle.dumps(LLMClient(parse_model(model)))) for _ in range(8)]

    def asks(n: int) -> list[str | None]:
        return [ask(copies[n], f"thread {n} ask {i}").text for i in range(5)]

    with ThreadPoolExecutor(len(copies)) as pool:
        answers = list(pool.map(asks, range(len(copies))))

    assert answers == [[f"echo: thread {n} ask {i}" for i in range(5)] for n in range(8)]
    assert len({id(copy._sdk) for copy in copies}) == 1


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


@pytest.mark.parametrize(
    ("model", "written", "expected_usd"),
    [
        # 2,000 plain at $0.40, 8,000 cached at $0.10 (0.25x), 100 out at $1.60, per million
        ("openai:gpt-4.1-mini", 0, (2_000 * 0.40 + 8_000 * 0.10 + 100 * 1.60) / 1e6),
        # 1,000 plain at $1, 8,000 read at $0.10, 1,000 written at $1.25, 100 out at $5
        ("anthropic:claude-haiku-4-5", 1_000, (1_000 + 8_000 * 0.1 + 1_000 * 1.25 + 500) / 1e6),
    ],
)
def test_cached_tokens_are_read_from_either_api_and_charged_at_their_own_rates(
    server: ScriptedLLMServer, waits: list[float], model: str, written: int, expected_usd: float
) -> None:
    server.then(
        Reply("ok", input_tokens=10_000, output_tokens=100, cached_tokens=8_000,
              cache_write_tokens=written)
    )  # fmt: skip

    (call,) = ask(client(model, waits)).calls

    assert (call.input_tokens, call.cached_tokens, call.cache_write_tokens) == (
        10_000,
        8_000,
        written,
    )
    assert call.cost_usd == pytest.approx(expected_usd)
    assert call.cost_usd < cost(BUILTIN_PRICES[model], 10_000, 100)


def test_a_price_without_cache_rates_charges_cached_tokens_as_plain_input(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    server.then(Reply("ok", input_tokens=1_000_000, output_tokens=0, cached_tokens=900_000))
    llm = client(MODELS[0], waits, prices={MODELS[0]: Price(2.0, 0.0)})
    assert ask(llm).calls[0].cost_usd == pytest.approx(2.0)


def test_anthropic_requests_mark_the_system_prompt_for_the_cache_and_openai_sends_nothing_new(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    server.then(Reply("a"), ToolCall("look", {}), Reply("b"), ToolCall("look", {}))
    tool = Tool("look", "Look around.", {"type": "object", "properties": {}})
    system = "You edit C code. " * 50
    for model in MODELS:
        client(model, waits).complete(system, [{"role": "user", "content": "go"}], max_tokens=9)
        client(model, waits).converse(system, ["go"], [tool], max_tokens=9)

    to_openai = [r.body for r in server.requests if r.api == "openai"]
    to_anthropic = [r.body for r in server.requests if r.api == "anthropic"]
    assert len(to_openai) == len(to_anthropic) == 2
    marked = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    assert [body["system"] for body in to_anthropic] == [marked, marked]
    assert all(body["messages"][0] == {"role": "system", "content": system} for body in to_openai)
    assert "cache_control" not in str(to_openai)
    assert all(prompt_text(body).startswith(system) for body in to_anthropic)


def test_each_attempt_records_when_it_was_made(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    server.then(Fail(500), Reply("ok"))
    before = time.time()
    calls = ask(client(MODELS[0], waits)).calls
    after = time.time()

    assert statuses(calls) == ["server_error", "ok"]
    assert before <= calls[0].started_at <= calls[1].started_at <= after


def test_stored_texts_lose_their_middle_not_their_end(
    server: ScriptedLLMServer, waits: list[float]
) -> None:
    lines = [f"line {number:03d}: int x{number} = {number};" for number in range(300)]
    server.then(Reply("\n".join(lines)))

    completion = ask(client(MODELS[0], waits, max_stored_chars=2_000), "Speed it up, keep the API.")

    assert completion.text == "\n".join(lines)
    stored = completion.calls[0].response
    head, marker, tail = stored.partition("\n[... ")
    assert marker and len(stored) <= 2_000
    assert head.startswith(lines[0]) and tail.endswith(lines[-1])
    assert set(head.split("\n")) <= set(lines), "the head was cut inside a line"
    omitted_line, _, kept_tail = tail.partition("\n")
    assert set(kept_tail.split("\n")) <= set(lines), "the tail was cut inside a line"
    counted = re.fullmatch(r"(\d+) characters omitted \.\.\.\]", omitted_line)
    assert counted is not None
    assert len(head) + 1 + int(counted.group(1)) + len(kept_tail) == len(completion.text)
    assert completion.calls[0].prompt.endswith("Speed it up, keep the API.")


@pytest.mark.parametrize(
    ("text", "limit"),
    [("x" * 500, 100), ("a\nb\n" * 300, 50), ("one line " * 40, 60), ("short", 5)],
)
def test_middle_truncate_keeps_both_ends_within_the_limit(text: str, limit: int) -> None:
    clipped = middle_truncate(text, limit)
    assert len(clipped) <= limit
    if len(text) <= limit:
        assert clipped == text
    else:
        assert "characters omitted ...]" in clipped
        assert clipped[:5] == text[:5] and clipped[-5:] == text[-5:]


def test_a_limit_too_small_for_the_marker_keeps_the_start() -> None:
    assert middle_truncate("abcdefghij" * 10, 8) == "abcdefgh"


UNPRICED_TASK = """\
name: unpriced
seed: seed.py
evaluator: {{name: synthetic, params: {{target: 100}}}}
objectives: [{{name: distance, direction: minimize}}]
budget: {{candidates: 5, usd: 1.0}}
sandbox: {{backend: process}}
mutators:
  - name: diff
llm:
  models:
    - model: openai:gpt-4.1-mini
    - {{model: qwen3, base_url: "http://127.0.0.1:9/v1"}}
{prices}"""


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.system
def test_a_usd_budget_with_an_unpriced_model_is_refused_at_load(
    tmp_path: Path, command: str
) -> None:
    task = write_synthetic_task(tmp_path)
    task.write_text(UNPRICED_TASK.format(prices=""))
    env = {**os.environ, "OPENAI_API_KEY": OPENAI_KEY, "EVOLVE_DB": f"sqlite:///{tmp_path}/e.db"}

    done = subprocess.run(
        [sys.executable, "-m", "evolve", command, str(task)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip

    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    key = '{"openai-compatible:qwen3": {input_per_mtok: 0, output_per_mtok: 0}}'
    assert "task.yaml:12: llm.models[1].model: openai-compatible:qwen3 has no price" in said
    assert f"set llm.prices: {key}" in said
    assert "gpt-4.1-mini" not in said  # the built-in table prices that one
    assert not (tmp_path / "e.db").exists()


def test_a_priced_local_model_loads_under_a_usd_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    task = write_synthetic_task(tmp_path)
    price = "{input_per_mtok: 0, output_per_mtok: 0, cached_input_per_mtok: 0}"
    task.write_text(
        UNPRICED_TASK.format(prices=f'  prices: {{"openai-compatible:qwen3": {price}}}\n')
    )

    llm = load_task(task).spec.llm

    assert llm is not None and llm.prices["openai-compatible:qwen3"].cached_input_per_mtok == 0
