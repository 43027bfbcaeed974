"""Starting or joining Ray without letting its start-up chatter reach the user's terminal."""

from __future__ import annotations

import logging
import os
import socket

import ray

REACH_TIMEOUT_S = 5.0


def connect(address: str | None) -> bool:
    """Join `address`, or start a private local instance; True if we started it (and so
    must shut it down). An instance already running in this process is reused."""
    if ray.is_initialized():
        return False
    if address and address != "auto":
        _check_reachable(address)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    ray.init(
        address=address or "local",  # never a stale cluster that `ray start` left behind
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        configure_logging=True,
    )
    return True


def _check_reachable(address: str) -> None:
    """Fail in seconds: Ray itself retries an unreachable address for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=REACH_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc})") from None


def cpu_count() -> int:
    return int(ray.cluster_resources().get("CPU", 1))


def shutdown() -> None:
    ray.shutdown()
