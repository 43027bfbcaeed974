"""Which model to call and where: parsed from a task's `provider:model` or base_url entry.

A ModelConfig names the env var that holds the key, never the key itself, so it can be
logged, stored and shipped to Ray workers without leaking a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Provider = Literal["openai", "anthropic"]

_DEFAULT_KEY_ENV: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

_MAPPING_KEYS = {"model", "base_url", "api_key_env"}


@dataclass(frozen=True)
class ModelConfig:
    provider: Provider
    model: str
    base_url: str | None = None
    api_key_env: str | None = None

    @property
    def label(self) -> str:
        """How prices, records and the leaderboard name this model."""
        return f"{self.vendor}:{self.model}"

    @property
    def vendor(self) -> str:
        """Who serves the model: a self-hosted OpenAI-compatible server is not OpenAI, so it is
        neither priced nor reported as OpenAI."""
        if self.provider == "openai" and self.base_url is not None:
            return "openai-compatible"
        return self.provider

    @property
    def key_env(self) -> str:
        """The env var the key is read from, at call time, on whichever machine calls."""
        return self.api_key_env or _DEFAULT_KEY_ENV[self.provider]


class ModelSpecError(ValueError):
    """A model entry that cannot be used; `field` is its key at fault, so that the task
    loader can point at the line of `base_url` rather than of `model`."""

    def __init__(self, message: str, field: str = "model") -> None:
        super().__init__(message)
        self.field = field


def parse_model(spec: str | Mapping[str, Any]) -> ModelConfig:
    """`"openai:MODEL"`, `"anthropic:MODEL"`, or `{model, base_url, api_key_env?}` for any
    OpenAI-compatible server (vLLM, Ollama, llama.cpp, SGLang). In the mapping form,
    `anthropic:MODEL` means an Anthropic Messages endpoint at base_url (a gateway or proxy)."""
    if isinstance(spec, str):
        return _parse_label(spec)
    if isinstance(spec, Mapping):
        return _parse_mapping(spec)
    raise ModelSpecError(f"a model is a 'provider:model' string or a mapping, not {spec!r}")


def _parse_label(spec: str) -> ModelConfig:
    provider, sep, model = spec.partition(":")
    if not sep or not model.strip() or provider not in _DEFAULT_KEY_ENV:
        raise ModelSpecError(
            f"model {spec!r}: write 'openai:MODEL' or 'anthropic:MODEL', or give "
            "{model: MODEL, base_url: URL} for an OpenAI-compatible server"
        )
    return ModelConfig(provider, model.strip())  # type: ignore[arg-type]


def _parse_mapping(spec: Mapping[str, Any]) -> ModelConfig:
    unknown = sorted(set(spec) - _MAPPING_KEYS)
    if unknown:
        raise ModelSpecError(
            f"model {dict(spec)!r}: unknown key(s) {', '.join(unknown)}; "
            f"the keys are {', '.join(sorted(_MAPPING_KEYS))}"
        )
    model, base_url, key_env = spec.get("model"), spec.get("base_url"), spec.get("api_key_env")
    if not isinstance(model, str) or not model.strip():
        raise ModelSpecError("'model' must be a non-empty string")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        given = "missing" if base_url is None else f"{base_url!r} is not an http(s) URL"
        raise ModelSpecError(
            f"{given}: give the server's address, e.g. http://localhost:8000/v1", "base_url"
        )
    if key_env is not None and (not isinstance(key_env, str) or not key_env.strip()):
        raise ModelSpecError("must name an environment variable", "api_key_env")
    vendor, sep, name = model.strip().partition(":")
    if sep and vendor == "anthropic" and name.strip():
        return ModelConfig("anthropic", name.strip(), base_url, key_env)
    return ModelConfig("openai", model.strip(), base_url, key_env)
