"""Cleaning up after a driver that could not: what a stopped or killed run leaves behind.

A driver that ends cleanly stops its workers (and shuts its Ray instance down, if it
started one), but Ray's workers die only when they notice, a worker that a candidate
stopped never notices, and a busy worker killed on Ctrl-C leaves its Docker container to
no one. After `kill -9` the driver does nothing at
all, and its run still says `running`. So:

- `clean_up` kills what is left of a Ray instance (its workers and agents, found by the
  files they hold open in its session directory) and then removes sandbox containers whose
  owning worker is gone (`reap_sandboxes`, the second half alone, for a run without Ray).
  The driver runs it after its workers are gone (evolve/executors/), and the guardian
  (evolve/runtime/guardian.py) runs it when the driver ends without doing so;
- `sweep`, which `evolve run` runs first (the commands that only read change nothing, and
  show such a run as `killed` once its lease lapses: evolve/views/run_states.py), marks as `killed`
  each run that says `running` but whose driver on this host is gone (as its lapsed lease
  shows it anywhere, evolve/views/run_states.py; `stopped` is for a driver that stopped
  cleanly), closes the proposals it left in flight as `interrupted` (their paid calls are
  already stored), and cleans up after it. Runs driven from other hosts are left alone:
  only their host can tell.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from evolve.plugin import registry
from evolve.plugin.sandbox import backend
from evolve.runtime.processes import ProcessId, kill, ray_processes

if TYPE_CHECKING:  # the guardian imports this module and must stay small: no SQLAlchemy
    from evolve.store import Store

log = logging.getLogger("evolve.runtime.orphans")

KILL_WAIT_S = 5.0


def clean_up(session: str | None = None) -> int:
    """Kill the processes of the Ray instance whose session directory is `session` (None:
    of every instance whose raylet is gone), then remove the containers they owned; how
    many containers."""
    stuck = kill(ray_processes(session), KILL_WAIT_S)
    if stuck:
        pids = ", ".join(str(process.pid) for process in stuck)
        log.warning("Ray processes still alive %g s after SIGKILL: %s", KILL_WAIT_S, pids)
    return reap_sandboxes()


def reap_sandboxes() -> int:
    """Remove what sandbox jobs of owners that are gone left on this host (containers); how
    many."""
    return sum(backend(name).reap_orphans() for name in registry.registered("sandbox backend"))


def sweep(store: Store) -> None:
    """Mark this host's runs whose driver is gone as killed, and clean up after them."""
    dead: list[tuple[str, ProcessId]] = []
    for run in store.list_runs():
        if run.status == "running" and run.driver is not None:
            driver = ProcessId.from_json(run.driver)
            if driver.gone():
                dead.append((run.name, driver))
    for name, driver in dead:
        store.set_run_status(name, "killed")
        store.interrupt_proposals(name)
        log.warning(
            "run %s was left running by a driver that is gone (pid %d): marked killed; "
            "continue it with: evolve run --resume %s",
            name,
            driver.pid,
            name,
        )
    if dead and (removed := clean_up()):
        log.warning("removed %d sandbox container(s) left behind", removed)
