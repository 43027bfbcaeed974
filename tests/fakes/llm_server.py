"""A scripted LLM server on 127.0.0.1, so the real openai and anthropic SDKs can be tested offline.

It speaks OpenAI Chat Completions (`POST /v1/chat/completions`, SDK base_url `.openai_url`)
and Anthropic Messages (`POST /v1/messages`, SDK base_url `.anthropic_url`). Each request
consumes the next step of one shared script, so a test reads like the conversation it stages:

    with ScriptedLLMServer(Fail(429, retry_after=1), Reply("done", output_tokens=7)) as server:
        ...  # point a client at server.openai_url
        assert [r.api_key for r in server.requests] == ["sk-test", "sk-test"]

A step may also be a function of the request body that returns a step, for a "model" that
answers what it was shown. When the script runs out, the `default` step answers, or a 500.

A reply's `cached_tokens` and `cache_write_tokens` are reported in each API's own usage shape:
OpenAI counts cached tokens inside `prompt_tokens`, Anthropic's `input_tokens` leaves both out.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Api = Literal["openai", "anthropic"]

_PATHS: dict[str, Api] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
_AUTH_HEADERS = {"authorization", "x-api-key"}
_ANTHROPIC_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Reply:
    """The model answers with text; `truncated` means it stopped at max_tokens. The token
    counts are the call's: `input_tokens` is all of its input, cached and written included."""

    text: str
    input_tokens: int = 10
    output_tokens: int = 10
    truncated: bool = False
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class ToolCall:
    """The model asks to call a tool (with optional text before the call)."""

    name: str
    arguments: Mapping[str, Any]
    id: str | None = None
    text: str | None = None
    input_tokens: int = 10
    output_tokens: int = 10
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Fail:
    """An HTTP error with a body in the provider's own error shape."""

    status: int
    message: str = "scripted failure"
    retry_after: float | None = None


@dataclass(frozen=True)
class Empty:
    """A well-formed reply with no content at all."""

    input_tokens: int = 10
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class Stall:
    """Wait before answering with `then`, to outlast a client's timeout. Waits on an event, so
    other requests go on and the server still stops at once."""

    seconds: float
    then: Reply | ToolCall | Fail | Empty = Reply("a reply that came too late")


Answer = Reply | ToolCall | Fail | Empty | Stall
Step = Answer | Callable[[dict[str, Any]], Answer]


@dataclass(frozen=True)
class Request:
    """What an SDK sent. Auth headers are kept out of `headers`; the key is in `api_key`."""

    api: Api
    path: str
    headers: Mapping[str, str]  # lower-case names
    api_key: str | None
    body: dict[str, Any]
    received_at: float  # time.monotonic()


def prompt_text(body: Mapping[str, Any]) -> str:
    """Every piece of text in a request (system prompt, messages and tool results) in order, in
    either API's shape: what a scripted "model" reads to compute its answer."""
    system = body.get("system")
    texts = [system] if isinstance(system, str) else []
    if isinstance(system, list):  # Anthropic's block form, as prompt caching sends it
        texts += [block["text"] for block in system if block.get("type") == "text"]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [block["text"] for block in content if block.get("type") == "text"]
            texts += [
                block["content"]
                for block in content
                if block.get("type") == "tool_result" and isinstance(block.get("content"), str)
            ]
    return "\n".join(texts)


class ScriptedLLMServer:
    """Start with `with`, or `start()`/`stop()`. Thread-safe: requests may arrive together."""

    def __init__(self, *steps: Step, default: Step | None = None) -> None:
        self.script: deque[Step] = deque(steps)
        self.default = default
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.owner = self
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(0.05,), name="scripted-llm", daemon=True
        )

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def then(self, *steps: Step) -> ScriptedLLMServer:
        """Append steps to the script."""
        with self._lock:
            self.script.extend(steps)
        return self

    def start(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def _take(self, request: Request) -> tuple[Answer, int]:
        """Record the request and pick its answer; the number names the reply's ids."""
        with self._lock:
            self.requests.append(request)
            step = self.script.popleft() if self.script else self.default
            number = next(self._ids)
        if step is None:
            return Fail(500, "the scripted LLM server's script is exhausted"), number
        return (step(request.body) if callable(step) else step), number


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # a provider takes a burst of connections; 5 reset some
    owner: ScriptedLLMServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    # Connections stay open between requests, as a provider's do: with HTTP/1.0 each
    # request paid for a new connection, on the client and here. A reply's headers and
    # body are two writes, so Nagle's algorithm is off: on a kept connection it held the
    # body back until the client's delayed ACK, tens of milliseconds.
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        api = _PATHS.get(self.path)
        if api is None:
            self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        except ValueError:
            self._send(400, _error_body(api, 400, "the request body is not JSON"), {})
            return
        owner = self.server.owner
        answer, number = owner._take(self._request(api, body))
        if isinstance(answer, Stall):
            if owner._stopping.wait(answer.seconds):
                self.close_connection = True  # unanswered: the client sees it drop
                return
            answer = answer.then
        status, payload, headers = _render(api, answer, str(body.get("model", "")), number)
        self._send(status, payload, headers)

    def _request(self, api: Api, body: dict[str, Any]) -> Request:
        headers = {name.lower(): value for name, value in self.headers.items()}
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        return Request(
            api=api,
            path=self.path,
            headers={k: v for k, v in headers.items() if k not in _AUTH_HEADERS},
            api_key=headers.get("x-api-key") or bearer or None,
            body=body,
            received_at=time.monotonic(),
        )

    def _send(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nobody is left to answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: pytest shows the assertions, not an access log."""


def _render(
    api: Api, answer: Reply | ToolCall | Fail | Empty, model: str, number: int
) -> tuple[int, dict[str, Any], dict[str, str]]:
    if isinstance(answer, Fail):
        headers = {} if answer.retry_after is None else {"Retry-After": f"{answer.retry_after:g}"}
        return answer.status, _error_body(api, answer.status, answer.message), headers
    render = _openai_reply if api == "openai" else _anthropic_reply
    return 200, render(answer, model, number), {}


def _openai_reply(answer: Reply | ToolCall | Empty, model: str, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    finish = "stop"
    if isinstance(answer, Reply):
        message["content"] = answer.text
        finish = "length" if answer.truncated else "stop"
    elif isinstance(answer, ToolCall):
        message["content"] = answer.text
        message["tool_calls"] = [
            {
                "id": answer.id or f"call_{number}",
                "type": "function",
                "function": {"name": answer.name, "arguments": json.dumps(answer.arguments)},
            }
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": answer.input_tokens,
            "completion_tokens": answer.output_tokens,
            "total_tokens": answer.input_tokens + answer.output_tokens,
            "prompt_tokens_details": {"cached_tokens": answer.cached_tokens},
        },
    }


def _anthropic_reply(answer: Reply | ToolCall | Empty, model: str, number: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    stop = "end_turn"
    if isinstance(answer, Reply):
        content.append({"type": "text", "text": answer.text})
        stop = "max_tokens" if answer.truncated else "end_turn"
    elif isinstance(answer, ToolCall):
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        content.append(
            {
                "type": "tool_use",
                "id": answer.id or f"toolu_{number}",
                "name": answer.name,
                "input": dict(answer.arguments),
            }
        )
        stop = "tool_use"
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": answer.input_tokens - answer.cached_tokens - answer.cache_write_tokens,
            "output_tokens": answer.output_tokens,
            "cache_read_input_tokens": answer.cached_tokens,
            "cache_creation_input_tokens": answer.cache_write_tokens,
        },
    }


def _error_body(api: Api, status: int, message: str) -> dict[str, Any]:
    if api == "anthropic":
        fallback = "api_error" if status >= 500 else "invalid_request_error"
        kind = _ANTHROPIC_ERROR_TYPES.get(status, fallback)
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = "server_error" if status >= 500 else "invalid_request_error"
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
