"""evolve from Python: what the `evolve` command does, as functions that return or raise.

    from evolve import api

    finished = api.run("tasks/matmul_c/task.yaml", workers=2, candidates=20)
    with api.open_store() as store:
        print(store.candidate(finished.best_id))

Nothing here exits the process or asks for input. A bad task file raises TaskFileError
(file, line and field in its message); a run or check that cannot start, fails or is
stopped raises evolve.engine.ending.Ended, whose `exit_code` is the one the command would give
(2 bad input, 1 failed, 130 stopped) and whose `message` says why. Progress goes to the
terminal as plain lines, as `evolve run --plain` prints them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evolve.engine.ending import Ended
from evolve.store import Store, StoreNotReadable
from evolve.store.location import StoreNotFound, for_reading, for_writing
from evolve.task.loading import LoadedTask, TaskFileError, load_task
from evolve.task.run_names import is_run_name

if TYPE_CHECKING:  # Ray and the engine load only when a run starts
    from evolve.engine.launch import Finished

__all__ = [
    "Ended",
    "StoreNotFound",
    "StoreNotReadable",
    "TaskFileError",
    "check",
    "load",
    "open_store",
    "resume",
    "run",
]


def load(task: str | Path) -> LoadedTask:
    """The task at `task` (a task.yaml, a folder holding one, or an OpenEvolve folder or its
    config.yaml), checked as `evolve run` checks it; TaskFileError where it is broken."""
    return load_task(Path(task))


def run(
    task: str | Path | LoadedTask,
    *,
    db: str | None = None,
    results: str | Path | None = None,
    workers: int | None = None,
    sandbox: str | None = None,
    candidates: int | None = None,
    wall_time_s: float | None = None,
    seed: int | None = None,
    name: str | None = None,
    ray_address: str | None = None,
    log_level: str = "INFO",
) -> Finished:
    """Evolve the task's program within its budget (`candidates` and `wall_time_s` replace
    the task's own) and return the finished run: its name, best candidate and folder.
    `db` is a store URL (default: results/evolve.db under `results`, else ./results),
    `sandbox` "docker" or "process" in place of the task's."""
    from evolve.engine import launch

    if name is not None and not is_run_name(name):
        raise Ended(2, f"{name!r}: a run's name is letters, digits, '_', '.' and '-'")
    loaded = task if isinstance(task, LoadedTask) else load(task)
    launch.introduce(loaded)
    options = launch.RunOptions(
        workers, True, ray_address, sandbox, log_level.upper(), candidates, wall_time_s
    )
    folder = None if results is None else Path(results)
    return launch.new_run(options, loaded, seed, name, db, folder)


def resume(
    run_name: str | None = None,
    *,
    db: str | None = None,
    results: str | Path | None = None,
    workers: int | None = None,
    sandbox: str | None = None,
    ray_address: str | None = None,
    log_level: str = "INFO",
) -> Finished:
    """Continue `run_name` (default: the newest run this user started on this host) where
    it stopped: nothing finished is repeated."""
    from evolve.engine import launch

    options = launch.RunOptions(workers, True, ray_address, sandbox, log_level.upper())
    folder = None if results is None else Path(results)
    return launch.resumed_run(options, run_name, db, folder)


def check(task: str | Path | LoadedTask, *, sandbox: str | None = None) -> int:
    """Build, check and measure the seed once in the task's sandbox, printing its metrics
    and feedback: 0 when the seed passes, 2 when the task or its seed is broken."""
    from evolve.task.seed_check import check_seed

    loaded = task if isinstance(task, LoadedTask) else load(task)
    return check_seed(loaded, sandbox)


def open_store(
    db: str | None = None, results: str | Path | None = None, *, read_only: bool = True
) -> Store:
    """The store the commands would use: read-only (the default) finds an existing one as
    `evolve show` does, walking up from the current folder, and never writes; otherwise
    it opens (or creates) the one a new run would write. StoreNotFound where none is."""
    folder = None if results is None else Path(results)
    if read_only:
        return Store(for_reading(db, folder).url, read_only=True)
    return Store(for_writing(db, folder).url)
