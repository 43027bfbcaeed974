"""An SDK's exception, read as an attempt's status: which failures are worth another try,
and a message that tells the user what to fix.

A refused key (401, 403) or a model the server does not know (404) is "refused": nothing
sent with them can work, so its message is the one line the run ends with, naming the
model, the variable the key is read from and what to change.

Both SDKs raise the same hierarchy of errors, by name (APIError, APITimeoutError,
APIConnectionError, APIStatusError), so the SDK is passed in: this module loads neither."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from evolve.llm.config import ModelConfig
from evolve.llm.records import Status
from evolve.llm.retry import Attempt

if TYPE_CHECKING:
    import anthropic
    import openai


def classify(
    failure: openai.APIError | anthropic.APIError,
    sdk: ModuleType,
    config: ModelConfig,
    timeout_s: float,
    redact: Callable[[str], str],
) -> Attempt:
    """`sdk`: the module that raised `failure`; `redact` scrubs the key from messages the
    server wrote, which may echo it back."""
    where = config.base_url or f"the {config.provider} API"
    if isinstance(failure, sdk.APITimeoutError):
        return Attempt("timeout", error=f"no reply from {where} within {timeout_s:g} s")
    if isinstance(failure, sdk.APIConnectionError):
        # A server that is down or restarting: its side failed, so worth another try.
        cause = failure.__cause__ or failure
        return Attempt("server_error", error=f"cannot reach {where}: {cause}")
    if not isinstance(failure, sdk.APIStatusError):
        return Attempt("error", error=redact(f"bad reply from {where}: {failure}"))
    code = failure.status_code
    said = f"HTTP {code}: {_server_message(failure)}"
    if code in (401, 403, 404):
        return Attempt("refused", error=redact(_refusal(code, said, config, where)))
    message = f"HTTP {code} from {config.label}: {_server_message(failure)}"
    status: Status = "rate_limited" if code == 429 else "server_error" if code >= 500 else "error"
    retry_after = _retry_after(failure.response.headers.get("retry-after"))
    return Attempt(status, error=redact(message), retry_after=retry_after)


def _refusal(code: int, said: str, config: ModelConfig, where: str) -> str:
    if code == 401:
        return f"{config.label} refused the key in {config.key_env} ({said}): set a valid key"
    if code == 403:
        return (
            f"{config.label} refused the key in {config.key_env} ({said}): use a key that may "
            f"call {config.model!r}"
        )
    also = " and that base_url is the API's address" if config.base_url else ""
    return f"{where} does not serve {config.label} ({said}): check the model's name{also}"


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
