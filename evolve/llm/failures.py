"""An SDK's exception, read as an attempt's status: which failures are worth another try,
and a message that tells the user what to fix.

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
    message = f"HTTP {code} from {config.label}: {_server_message(failure)}"
    if code in (401, 403):
        message += f" (the key is read from {config.key_env}: is it set and valid?)"
    elif code == 404:
        message += f" (is {config.model!r} a model that {where} serves?)"
    status: Status = "rate_limited" if code == 429 else "server_error" if code >= 500 else "error"
    retry_after = _retry_after(failure.response.headers.get("retry-after"))
    return Attempt(status, error=redact(message), retry_after=retry_after)


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
