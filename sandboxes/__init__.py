"""Sandbox backends, chosen by the task's `sandbox.backend` through the table in
evolve/sandbox.py; each backend module offers `open_sandbox`, `readiness` and
`reap_orphans` (the `Backend` protocol there)."""

from __future__ import annotations

from sandboxes.docker import DockerSandbox, docker_available
from sandboxes.process import ProcessSandbox

__all__ = ["DockerSandbox", "ProcessSandbox", "docker_available"]
