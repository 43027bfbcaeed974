"""A local Ray instance without the processes a run never talks to.

Beside the GCS and the raylet (with its two agents) that a run needs, `ray.init` starts:
- the autoscaler's monitor, but a local instance never scales;
- the log monitor, which streams what workers print to the driver, but evolve starts
  Ray with `log_to_driver=False` and keeps that output in Ray's log files;
- the dashboard's API server, which `include_dashboard=False` only shrinks.

Together they held about 250 MB of RSS. Left out, a local start took 1.3 s instead of about
2 s on a 2-core machine, and `ray.shutdown` 0.3 s instead of 1.4 s. Ray's public `ray.init`
has no switch for them, so the methods of Ray's `Node` that start them do nothing while
this module starts an instance. Those are Ray internals: a Ray that lacks one of them
starts everything, as before.

The API server is left out only where the dashboard's dependencies are missing (`pip
install ray`, as evolve installs it). With `ray[default]`, the dashboard agent loads
modules that wait for the API server's address, and would retry for it forever.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    from ray._private.node import Node
    from ray._private.utils import get_dashboard_dependency_error
except ImportError:  # a Ray that moved them
    Node = None
    get_dashboard_dependency_error = None

log = logging.getLogger("evolve.lean_ray")

ALWAYS_LEFT_OUT = ("start_monitor", "start_log_monitor")
API_SERVER = "start_api_server"


def left_out() -> tuple[str, ...]:
    """The `Node` methods that do nothing during a lean start, with this Ray."""
    minimal = get_dashboard_dependency_error is not None and get_dashboard_dependency_error()
    return (*ALWAYS_LEFT_OUT, API_SERVER) if minimal else ALWAYS_LEFT_OUT


@contextmanager
def lean_start() -> Iterator[None]:
    """For the length of one local `ray.init`: the processes above are not started."""
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
        yield
    finally:
        for name, method in originals.items():
            setattr(Node, name, method)
