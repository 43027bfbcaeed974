"""Starting or joining Ray without letting its start-up chatter reach the user's terminal,
or the user's secrets reach Ray's processes."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from collections.abc import Iterable
from contextlib import nullcontext

import ray
from ray._private import ray_constants
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from evolve.plugin.secrets import secret_names, withheld
from evolve.runtime import guardian, orphans, ray_connect_errors, ray_output
from evolve.runtime.lean_ray import lean_start, quick_stop
from evolve.runtime.processes import child_named, descendants, kill, session_dir

REACH_TIMEOUT_S = 5.0
AUDIT_TIMEOUT_S = 30.0
UV_RUN_FLAG = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"  # Ray's: a driver run by `uv run` ships its env
START_TRIES = 3  # a local start that fails on a loaded machine is tried this often
START_BACKOFF_S = 2.0  # after the first failure; doubled after each later one

log = logging.getLogger("evolve.runtime.cluster")

# A local instance holds only what a run uses. Ray would start an idle worker process per
# CPU for the first driver (about 80 MB each, on a 64-core machine 5 GB) that the run never
# asks for: its evaluation workers are actors, which get processes of their own, and its
# proposals need one or two. The object store holds programs and results, which are small;
# unbounded it reserves 30% of the machine's memory. No process reports task events (each
# task's state changes, kept by the GCS for Ray's dashboard and state API, which a local
# instance does not serve): the GCS would grow with every candidate of a run, and every
# task's submitter and executor would pay to send them.
LOCAL_OPTIONS = {
    "_system_config": {"prestart_worker_first_driver": False, "task_events_report_interval_ms": 0},
    "object_store_memory": 256 * 2**20,
}

# The local instance this process started: its session directory, by which its processes
# are found, and the guardian that cleans up after it should this process die first (held
# only so that its handle lives as long as this process does).
_session: str | None = None
_guardian: subprocess.Popen[bytes] | None = None


def connect(address: str | None, withhold: Iterable[str] = ()) -> bool:
    """Join `address`, or start a private local instance; True if we started it (and so
    must shut it down). An instance already running in this process is reused.

    A local instance starts with the secrets (and `withhold`, the task's key variables)
    out of its environment: see evolve/plugin/secrets.py. A joined cluster's processes were
    started elsewhere, so they are only checked, and a warning names what they hold."""
    global _session, _guardian
    if ray.is_initialized():
        return False
    if address and address != "auto":
        _check_reachable(address)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault(UV_RUN_FLAG, "0")
    # Ray read both when it was imported. Its own processes read them from this environment,
    # and ray.init reads the `uv run` one from Ray's constant (a local instance without a
    # runtime-env agent must not be asked for that runtime environment: evolve/runtime/lean_ray.py).
    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = ray_constants.env_bool(UV_RUN_FLAG, True)
    with withheld(withhold):
        _init(address)
        raylet = None if address else child_named("raylet")
        _session = session_dir(raylet) if raylet is not None else None
        if _session is not None:
            _guardian = guardian.start(_session)
    if address:
        _audit_secrets()
    return True


def _init(address: str | None) -> None:
    """ray.init, retried for a local instance: under load its raylet can miss Ray's own
    start-up deadline ("node timed out during startup"), and a second try usually makes it.
    What finally fails is one RuntimeError (a ConnectionError for a cluster) of one line,
    never Ray's traceback; for a cluster, the line names the cause and its fix
    (evolve/runtime/ray_connect_errors.py) and where Ray's own words were kept."""
    tries = 1 if address else START_TRIES
    for attempt in range(1, tries + 1):
        with ray_output.captured() as printed:
            failure = _attempt(address, stand_in_agents=attempt == 1)
        ray_output.hand_to_log(printed.lines(), log)
        if failure is None:
            printed.discard()
            return
        if address:
            raise ConnectionError(
                ray_connect_errors.explain(failure, os.environ.get("RAY_AUTH_MODE"))
                + _kept_at(printed)
            ) from None
        reason = ray_connect_errors.squeezed(failure)
        if attempt == tries:
            raise RuntimeError(
                f"Ray did not start in {tries} tries (load average {_load()}); "
                f"the last error: {reason}{_kept_at(printed)}"
            ) from None
        printed.discard()
        pause = START_BACKOFF_S * 2 ** (attempt - 1)
        log.warning("Ray did not start (try %d of %d); retrying in %.0fs", attempt, tries, pause)
        log.debug("why Ray did not start: %s", reason)
        time.sleep(pause)


def _attempt(address: str | None, stand_in_agents: bool) -> Exception | None:
    """One ray.init, after a probe of the cluster's GCS when there is one to probe; what it
    raised, with what the failed start left running shut down. A local retry starts Ray's
    own agents: the stand-ins of the first try lean on Ray internals that a Ray may change."""
    try:
        if address and address != "auto" and not address.startswith("ray://"):
            _probe(address)
        with nullcontext() if address else lean_start(stand_in_agents):
            ray.init(
                address=address or "local",  # never a stale cluster `ray start` left behind
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,
                configure_logging=True,
                **({} if address else LOCAL_OPTIONS),
            )
    except Exception as exc:  # Ray raises bare Exceptions for start-up failures
        ray.shutdown()
        return exc
    return None


def _probe(address: str) -> None:
    """Ask the cluster's GCS for its id, once. A GCS that refuses this machine's token
    answers at once, but ray.init asks again once a second for twenty seconds (Ray's
    NUM_REDIS_GET_RETRIES) and then says only "Failed to connect"; the probe hears the
    refusal itself in milliseconds. Ray's own token check comes first, as in ray.init:
    without it, a client in token mode that has no token aborts this whole process (a
    failed C++ check). Any other failure ends the join too: a GCS that has not answered
    within the client's own timeout (about 40 s) is not worth Ray's twenty more tries.
    Both are Ray internals, the ones ray.init uses; where a Ray lacks them, ray.init alone
    decides."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            ensure_token_if_auth_enabled,
        )
        from ray._raylet import GcsClient
    except ImportError:
        return
    ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    GcsClient(address=address)


def _kept_at(printed: ray_output.Captured) -> str:
    """Where Ray's own words on a failure were kept, or nothing when it said none."""
    if printed.path is None or not printed.lines():
        printed.discard()
        return ""
    return f" (what Ray printed: {printed.path})"


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def logs_folder() -> str | None:
    """Where Ray keeps what its workers print, for the local instance this process started
    (a joined cluster keeps it on each node)."""
    return f"{_session}/logs" if _session else None


def _check_reachable(address: str) -> None:
    """Fail in seconds: Ray itself retries an unreachable address for minutes."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=REACH_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        raise ConnectionError(
            f"nothing answers at {address} ({exc}): check the address, and that "
            "`ray start --head` runs there"
        ) from None


@ray.remote(num_cpus=0)
def _secrets_here() -> tuple[str, list[str]]:
    return socket.gethostname(), secret_names(os.environ)


def _audit_secrets() -> None:
    """Warn, by name only, of secrets in the environment of a joined cluster's workers,
    which `ray start` gave them and every evaluation worker inherits."""
    probes = [
        _secrets_here.options(  # type: ignore[attr-defined]
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote()
        for node in ray.nodes()
        if node["Alive"]
    ]
    done, _ = ray.wait(probes, num_returns=len(probes), timeout=AUDIT_TIMEOUT_S)
    for host, names in ray.get(done):
        if names:
            log.warning(
                "the Ray workers on %s hold %s in their environment, where a candidate that "
                "escapes its sandbox can read them: restart Ray there (`ray start`) from a "
                "shell without them; evolve sends model keys to its proposal tasks itself",
                host,
                ", ".join(names),
            )


def cpu_count() -> int:
    return int(ray.cluster_resources().get("CPU", 1))


def shutdown() -> None:
    """Disconnect; for a local instance, also kill its processes at once (the raylet and
    everything below it: workers, agents or their stand-ins), and what Ray leaves running
    elsewhere (a busy worker's sandbox container): see evolve/runtime/orphans.py."""
    global _session
    if _session is None:
        ray.shutdown()
        return
    raylet = child_named("raylet")
    below = descendants(raylet) if raylet is not None else []
    with quick_stop():
        ray.shutdown()
    # Not waited for: each ends at once, and the dead count as gone everywhere here even
    # before init reaps them (which, on some machines, takes a second or more).
    kill(below, wait_s=0)
    orphans.clean_up(_session)
    _session = None
