"""Model calls: which model (config), what it costs (prices), one request with retries (client).

The client's names load on first use: the SDKs take seconds to import, and most commands
(`evolve show`, `evolve leaderboard`, loading a task) never call a model.
"""

from typing import Any

from evolve.llm.config import ModelConfig, parse_model
from evolve.llm.prices import BUILTIN_PRICES, Price, cost

_CLIENT_NAMES = ("Completion", "LLMCall", "LLMClient", "Status")

__all__ = [
    "BUILTIN_PRICES",
    "Completion",
    "LLMCall",
    "LLMClient",
    "ModelConfig",
    "Price",
    "Status",
    "cost",
    "parse_model",
]


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from evolve.llm import client

        return getattr(client, name)
    raise AttributeError(f"module 'evolve.llm' has no attribute {name!r}")
