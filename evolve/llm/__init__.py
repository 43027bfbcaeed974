"""Model calls: which model (config), what it costs (prices), what a call leaves behind
(records), and one request with retries (client).

The client is not imported here, and it loads a provider's SDK (a second or more) only
when a request or `preload` needs it: most commands (`evolve show`, `evolve leaderboard`,
loading a task) never call a model. Code that does imports `evolve.llm.client` itself.
"""

from evolve.llm.config import ModelConfig, parse_model
from evolve.llm.prices import BUILTIN_PRICES, Price, cost
from evolve.llm.records import LLMCall, Status

__all__ = [
    "BUILTIN_PRICES",
    "LLMCall",
    "ModelConfig",
    "Price",
    "Status",
    "cost",
    "parse_model",
]
