"""Sandbox backends, chosen by the task's `sandbox.backend`."""

from __future__ import annotations

from evolve.sandbox import Sandbox
from sandboxes.docker import DockerSandbox, SandboxUnavailable, docker_available
from sandboxes.process import ProcessSandbox

__all__ = [
    "DockerSandbox",
    "ProcessSandbox",
    "SandboxUnavailable",
    "docker_available",
    "open_sandbox",
]

BACKENDS = ("docker", "process")


def open_sandbox(backend: str, *, image: str | None = None, gpus: bool = False) -> Sandbox:
    """The sandbox named `backend`; a process sandbox that cannot isolate announces itself.

    Raises SandboxUnavailable, naming the fix, when Docker is asked for but cannot work here.
    `image` and `gpus` apply to Docker: the process sandbox passes the host's GPUs through.
    """
    if backend == "docker":
        ok, why = docker_available()
        if not ok and image is None:
            raise SandboxUnavailable(why)
        return DockerSandbox(image, gpus=gpus)
    if backend == "process":
        return ProcessSandbox()
    raise ValueError(f"unknown sandbox backend {backend!r} (known: {', '.join(BACKENDS)})")
