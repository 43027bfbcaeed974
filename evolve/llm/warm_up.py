"""What a process pays once for a provider's SDK, paid before its first proposal.

A proposal worker's first model request took 100 to 150 ms longer than the next ones: the
SDK client built its HTTP client's SSL context (40 to 70 ms, and again for each client),
and pydantic built the SDK's response types (about 65 ms), all of it holding the GIL. The
first round of requests, sent together, waited for all of it: at a 2 s model, 0.5 to 0.7%
of a 20 s run. Now every SDK client in a process shares one HTTP client, the SDK's own
default one (connections are pooled per endpoint, so endpoints and keys do not mix), and
one request answered in memory, never sent, builds the response types while the seed is
evaluated.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

log = logging.getLogger("evolve.llm.warm_up")

_SHARED: dict[str, Any] = {}  # the SDK's name: its HTTP client
_LOCK = threading.Lock()


def shared_http(sdk: ModuleType) -> Any:
    """The HTTP client under every client of `sdk` in this process; the SDK's default one,
    with its limits and timeouts (each request still carries the run's timeout)."""
    with _LOCK:
        if sdk.__name__ not in _SHARED:
            _SHARED[sdk.__name__] = sdk.DefaultHttpxClient()
        return _SHARED[sdk.__name__]


def warm(
    sdk: ModuleType, client: Callable[[Any], Any], request: Callable[[Any], Any], answer: dict
) -> None:
    """`request` made once through the SDK `client` built on an HTTP client whose transport
    answers `answer` in memory. Best effort: an SDK that cannot be warmed so pays on its
    first real request, as before."""
    shared_http(sdk)
    try:
        http = _http_library(sdk)
        transport = http.MockTransport(lambda _: http.Response(200, json=answer))
        with sdk.DefaultHttpxClient(transport=transport) as answered:
            request(client(answered))
    except Exception:
        log.info("the %s SDK could not be warmed up", sdk.__name__, exc_info=True)


def _http_library(sdk: ModuleType) -> ModuleType:
    """The HTTP library the SDK is built on (httpx, or a successor with its interface)."""
    return sys.modules[type(shared_http(sdk)).__mro__[1].__module__.split(".")[0]]
