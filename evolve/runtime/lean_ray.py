"""A local Ray instance without the processes a run never talks to.

Beside the GCS and the raylet that a run needs, `ray.init` starts:
- the autoscaler's monitor, but a local instance never scales;
- the log monitor, which streams what workers print to the driver, but evolve starts
  Ray with `log_to_driver=False` and keeps that output in Ray's log files;
- the dashboard's API server, which `include_dashboard=False` only shrinks.

Together they hold a few hundred megabytes of RSS and make a local start and
`ray.shutdown` slower. Ray's public `ray.init` has no switch for them, so the methods of
Ray's `Node` that start them do nothing while this module starts an instance. Those are
Ray internals: a Ray that lacks one of them starts everything.

The API server is left out only where the dashboard's dependencies are missing (`pip
install ray`, as evolve installs it). With `ray[default]`, the dashboard agent loads
modules that wait for the API server's address, and would retry for it forever.

Where they are missing, the raylet's two agents can be left out too: the dashboard agent
then loads no module and serves no port, and the runtime-env agent serves only runtime
environments, which evolve never asks for. The raylet still waits for each agent's port
files and ends when an agent ends, so a stand-in (evolve/runtime/ray_agent_stand_in.sh, a shell
script) writes the files, every port "not served" (-1), and waits for the raylet to end. The
two agents are Python processes that import Ray, so leaving them out spares a local
instance their memory and roughly halves a bare `ray.init`; a stand-in holds under 2 MB of
RSS.

What that gives up: a task or actor with a runtime environment would wait for an agent
that serves none, and the raylet ends 30 s later. Ray makes one for the whole job where a
RAY_RUNTIME_ENV_HOOK is set, or under `uv run` (evolve/runtime/cluster.py turns that off unless the
user turned it on); where either would, the real agents start. The stand-ins also lean on
the names of the raylet's flags and port files: a Ray that names them otherwise fails the
start only at its 30 s deadline, so a caller that retries a failed start should retry
without them.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

try:
    from ray._private import ray_constants, services
    from ray._private.node import Node
    from ray._private.utils import get_dashboard_dependency_error
except ImportError:  # a Ray that moved them
    ray_constants = None
    services = None
    Node = None
    get_dashboard_dependency_error = None
try:
    from ray._raylet import (
        DASHBOARD_AGENT_LISTEN_PORT_NAME,
        METRICS_AGENT_PORT_NAME,
        METRICS_EXPORT_PORT_NAME,
        RUNTIME_ENV_AGENT_PORT_NAME,
        get_port_filename,
    )

    # Each agent's flag on the raylet's command line, and the ports it writes files for.
    AGENT_PORTS: dict[str, tuple[str, ...]] = {
        "--dashboard_agent_command=": (
            METRICS_AGENT_PORT_NAME,
            METRICS_EXPORT_PORT_NAME,
            DASHBOARD_AGENT_LISTEN_PORT_NAME,
        ),
        "--runtime_env_agent_command=": (RUNTIME_ENV_AGENT_PORT_NAME,),
    }
except ImportError:  # a Ray whose raylet learns its agents' ports some other way
    AGENT_PORTS = {}

log = logging.getLogger("evolve.runtime.lean_ray")

ALWAYS_LEFT_OUT = ("start_monitor", "start_log_monitor")
API_SERVER = "start_api_server"
STAND_IN = Path(__file__).with_name("ray_agent_stand_in.sh")  # run by /bin/sh


def left_out() -> tuple[str, ...]:
    """The `Node` methods that do nothing during a lean start, with this Ray."""
    minimal = get_dashboard_dependency_error is not None and get_dashboard_dependency_error()
    return (*ALWAYS_LEFT_OUT, API_SERVER) if minimal else ALWAYS_LEFT_OUT


def with_stand_in_agents(raylet_command: Sequence[str]) -> list[str]:
    """The raylet's command with each agent's command replaced by a stand-in's; unchanged
    where the command lacks what the stand-ins need to know."""
    flags = dict(argument.split("=", 1) for argument in raylet_command if "=" in argument)
    session, node = flags.get("--session_dir"), flags.get("--node_id")
    if session is None or node is None:
        return list(raylet_command)
    changed = []
    for argument in raylet_command:
        flag = next((f for f in AGENT_PORTS if argument.startswith(f)), None)
        if flag is not None:
            files = [
                str(Path(session, get_port_filename(node, port))) for port in AGENT_PORTS[flag]
            ]
            stand_in = ["/bin/sh", str(STAND_IN), *files]
            argument = flag + subprocess.list2cmdline(stand_in)
        changed.append(argument)
    return changed


@contextmanager
def _agents_stood_in() -> Iterator[None]:
    """While it lasts, a raylet that Ray starts gets stand-ins for its agents."""
    original = services.start_ray_process

    def start(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if process_type == ray_constants.PROCESS_TYPE_RAYLET:
            command = with_stand_in_agents(command)
        return original(command, process_type, *args, **kwargs)

    services.start_ray_process = start
    try:
        yield
    finally:
        services.start_ray_process = original


def stands_in_for_agents() -> bool:
    """Whether this Ray's agents can be left out: it lacks the dashboard's dependencies (its
    dashboard agent serves nothing), it has the names the stand-ins rely on, and it would
    not make the job a runtime environment (see above)."""
    return (
        API_SERVER in left_out()
        and bool(AGENT_PORTS)
        and callable(getattr(services, "start_ray_process", None))
        and not os.environ.get(ray_constants.RAY_RUNTIME_ENV_HOOK)
        and not getattr(ray_constants, "RAY_ENABLE_UV_RUN_RUNTIME_ENV", False)
    )


@contextmanager
def quick_stop() -> Iterator[None]:
    """For the length of one `ray.shutdown` of a local instance: its processes are killed at
    once. Ray otherwise asks each to stop and waits up to a second for it, and the raylet
    takes that second whole. What the run keeps is in its store by then; the raylet's
    children, which a raylet killed at once does not stop, are the caller's to kill
    (evolve/runtime/cluster.py)."""
    original = getattr(Node, "kill_all_processes", None)
    if original is None:
        yield
        return

    def at_once(self: object, *args: Any, **kwargs: Any) -> Any:
        return original(self, *args, **{**kwargs, "allow_graceful": False})

    Node.kill_all_processes = at_once
    try:
        yield
    finally:
        Node.kill_all_processes = original


@contextmanager
def lean_start(stand_in_agents: bool = True) -> Iterator[None]:
    """For the length of one local `ray.init`: the processes above are not started, nor
    (where `stand_in_agents` and this Ray allow it) the raylet's agents."""
    names = left_out()
    originals: dict[str, Any] = {name: getattr(Node, name, None) for name in names}
    if Node is None or None in originals.values():
        log.info("this Ray's node lacks the expected start-up steps: all its processes start")
        yield
        return

    def skipped(self: object, *args: object, **kwargs: object) -> None:
        """Starts nothing."""

    for name in names:
        setattr(Node, name, skipped)
    try:
        with _agents_stood_in() if stand_in_agents and stands_in_for_agents() else nullcontext():
            yield
    finally:
        for name, method in originals.items():
            setattr(Node, name, method)
