"""What a process pays once for a provider's SDK, paid before its first proposal.

A proposal worker's first model request took 100 to 150 ms longer than the next ones: the
SDK client built its HTTP client's SSL context (35 to 70 ms, and again for each client),
and pydantic built the SDK's response types (about 65 ms), all of it holding the GIL. The
first round of requests, sent together, waited for all of it: at a 2 s model, 0.5 to 0.7%
of a 20 s run. Now the SDK clients of a process share one SSL context (each keeps its own
HTTP client, so connections and cookies stay with one endpoint and key), and one request
answered in memory, never sent, builds the response types while the seed is evaluated.
"""

from __future__ import annotations

import logging
import ssl
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

log = logging.getLogger("evolve.llm.warm_up")

_CONTEXTS: dict[str, ssl.SSLContext] = {}  # the SDK's name: the SSL context its clients share
_LOCK = threading.Lock()


def http_client(sdk: ModuleType) -> Any | None:
    """A new HTTP client for one client of `sdk`: the SDK's default one (its limits and
    timeouts; each request carries the run's timeout), on the process's shared SSL context.
    None where no context can be built (a broken certificate setting): the SDK then builds
    its own and reports the error on the proposal's first request, as it always did."""
    try:
        return sdk.DefaultHttpxClient(verify=_shared_context(sdk))
    except Exception:
        log.info("no shared SSL context for the %s SDK", sdk.__name__, exc_info=True)
        return None


def warm(
    sdk: ModuleType,
    client: Callable[[Any], Any],
    request: Callable[[Any], Any],
    answer: dict[str, Any],
) -> None:
    """`request` made once through the SDK `client` built on an HTTP client whose transport
    answers `answer` in memory. Best effort: an SDK that cannot be warmed so pays its
    one-time costs on its first real request."""
    try:
        _shared_context(sdk)
        http = _http_library(sdk)
        transport = http.MockTransport(lambda _: http.Response(200, json=answer))
        with sdk.DefaultHttpxClient(transport=transport) as answered:
            request(client(answered))
    except Exception:
        log.info("the %s SDK could not be warmed up", sdk.__name__, exc_info=True)


def _shared_context(sdk: ModuleType) -> ssl.SSLContext:
    """Built once per SDK, as its HTTP library builds one (the environment's certificate
    settings included); raises what building it raised."""
    with _LOCK:
        if sdk.__name__ not in _CONTEXTS:
            _CONTEXTS[sdk.__name__] = _http_library(sdk).create_ssl_context()
        return _CONTEXTS[sdk.__name__]


def _http_library(sdk: ModuleType) -> ModuleType:
    """The HTTP library the SDK is built on (httpx, or a successor with its interface)."""
    return sys.modules[sdk.DefaultHttpxClient.__mro__[1].__module__.split(".")[0]]
