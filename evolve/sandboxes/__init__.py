"""Sandbox backends, plugins registered under the "evolve.sandboxes" entry points and
chosen by the task's `sandbox.backend` (evolve/plugin/registry.py); each backend module
offers `open_sandbox`, `readiness` and
`reap_orphans` (the `Backend` protocol there). The names below load their backend when
first asked for: a process that uses one backend does not load the other's (the Docker
SDK, for one)."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "DockerSandbox": "evolve.sandboxes.docker",
    "docker_available": "evolve.sandboxes.docker",
    "ProcessSandbox": "evolve.sandboxes.process",
}
__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'sandboxes' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
