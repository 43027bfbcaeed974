"""What `evolve run` does once its task file has loaded: choose the sandbox, start Ray
without the secrets, create or resume the run, and drive the engine to the end.

Kept apart from evolve/cli.py so that the command line answers a bad task file before it
imports any of this: Ray and the store alone take most of a second to import.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evolve import cluster, orphans
from evolve.engine import Engine
from evolve.mutators.llm import key_names
from evolve.pool import SetupFailed
from evolve.processes import ProcessId
from evolve.runlog import run_log
from evolve.runs import new_run_name, run_dir
from evolve.sandbox_choice import usable_sandbox
from evolve.store import CandidateRecord, RunRecord, Store, default_url
from evolve.taskfile import LoadedTask, TaskFileError, changed_files, make_evaluator, parse_task
from evolve.ui.console import console, errors
from evolve.ui.dashboard import Dashboard, PlainLog
from evolve.ui.tables import latest_ok

log = logging.getLogger("evolve.launch")


def open_store(db: str | None, results: Path) -> Store:
    """The store, after marking runs whose driver was killed as stopped and cleaning up
    what they left (evolve/orphans.py): every command that reads runs sees them as they are."""
    store = Store(db or default_url(results))
    orphans.sweep(store)
    return store


def new_run(
    task: LoadedTask,
    workers: int | None,
    seed: int | None,
    name: str | None,
    plain: bool,
    ray_address: str | None,
    backend: str | None,
    db: str | None,
    results: Path,
    log_level: str = "INFO",
) -> None:
    task = usable_sandbox(task, backend)
    results.mkdir(parents=True, exist_ok=True)
    with _ray(ray_address, task), open_store(db, results) as store:
        run_name = name or new_run_name(task.spec.name)
        if store.get_run(run_name):
            errors.print(
                f"[red]error:[/red] a run named {run_name!r} exists: use --resume {run_name}"
            )
            sys.exit(2)
        record = store.create_run(
            run_name,
            task_path=str(task.path),
            task_yaml=task.text,
            seed=seed or 0,
            settings={
                "workers": workers,
                "task_sha256": task.digest,
                "task_files": dict(task.files),
            },
        )
        execute(task, store, record, workers, plain, results, log_level)


def resumed_run(
    resume: str | None,
    workers: int | None,
    plain: bool,
    ray_address: str | None,
    backend: str | None,
    db: str | None,
    results: Path,
    log_level: str = "INFO",
) -> None:
    """Resume the run named `resume` (None: the latest). Every reason not to is found before
    Ray starts, and exits 2."""
    with open_store(db, results) as store:
        record = store.latest_run() if resume is None else store.get_run(resume)
    if record is None:
        wanted = "to resume" if resume is None else repr(resume)
        errors.print(f"[red]error:[/red] no run {wanted} in the store")
        sys.exit(2)
    try:
        task = parse_task(record.task_yaml, Path(record.task_path))
    except TaskFileError as exc:
        errors.print(f"[red]error:[/red] the stored task no longer loads: {exc}", highlight=False)
        sys.exit(2)
    # A run from before fingerprints were kept has none to compare against.
    changed = changed_files(task, record.settings.get("task_files", task.files))
    if changed:
        errors.print(
            f"[red]error:[/red] {task.path}: cannot resume {record.name}: "
            f"{', '.join(changed)} changed since it started; start a new run instead",
            highlight=False,
        )
        sys.exit(2)
    task = usable_sandbox(task, backend)
    console.print(f"resuming run [bold]{record.name}[/bold]")
    with _ray(ray_address, task), open_store(db, results) as store:
        workers = workers or record.settings.get("workers")
        execute(task, store, record, workers, plain, results, log_level)


@contextmanager
def _ray(address: str | None, task: LoadedTask) -> Iterator[None]:
    """Ray for the length of a run, started with the task's model keys withheld; a cluster
    that cannot be started or joined exits 1 before the store is touched."""
    try:
        owned = cluster.connect(address, key_names(task.spec.llm))
    except (ConnectionError, RuntimeError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        errors.print(f"[red]error:[/red] could not start or join {where}: {exc}", highlight=False)
        sys.exit(1)
    try:
        yield
    finally:
        if owned:
            cluster.shutdown()


def execute(
    task: LoadedTask,
    store: Store,
    record: RunRecord,
    workers: int | None,
    plain: bool,
    results: Path,
    log_level: str = "INFO",
) -> None:
    run_name = record.name
    folder = run_dir(results, run_name)
    folder.mkdir(parents=True, exist_ok=True)
    console.print(f"run [bold]{run_name}[/bold]: results in {folder}/, store {store.display_url}")
    console.print(f"log: {folder / 'run.log'} (--log-level {log_level})")
    if task.spec.llm is None:
        console.print(
            "no model configured: the autotuner runs alone, offline. To let a model propose "
            "edits, add an `llm:` section and a `diff` or `rewrite` mutator (see the README)."
        )
    else:
        models = ", ".join(m.model for m in task.spec.llm.models)
        console.print(
            f"models: {models}; mutators: {', '.join(m.name for m in task.spec.mutators)}"
        )
    workers = workers or max(1, cluster.cpu_count() - 1)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops as Ctrl-C does
    store.set_run_status(run_name, "running", driver=ProcessId.here().to_json())
    live = not plain and console.is_terminal
    observer = Dashboard(store, run_name, console) if live else PlainLog(console)
    try:
        with observer, run_log(folder, log_level):
            log.info("run %s starts with %d worker(s)", run_name, workers)
            if ray_logs := cluster.logs_folder():
                log.info("what Ray's workers print is kept in %s", ray_logs)
            evaluator = make_evaluator(task)
            engine = Engine(
                task, store, record, evaluator, workers=workers, results_dir=results,
                observer=observer,
            )  # fmt: skip
            outcome = engine.run()
    except KeyboardInterrupt:
        store.set_run_status(run_name, "stopped")
        console.print(f"\nstopped. Continue with: evolve run --resume {run_name}")
        sys.exit(130)
    except SetupFailed as exc:
        store.set_run_status(run_name, "failed")
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        console.print("Nothing was evolved: fix the above on the evaluation machines first.")
        sys.exit(1)
    except Exception as exc:
        store.set_run_status(run_name, "failed")
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        console.print(
            f"The store keeps what finished. Continue with: evolve run --resume {run_name}"
        )
        sys.exit(1)
    store.set_run_status(run_name, "finished")
    console.print(f"finished: {outcome.reason}")
    best = outcome.best
    if best is None:
        errors.print(
            "[red]error:[/red] no candidate was crowned (none passed, or none measured "
            f"consistently); see: evolve show {outcome.seed_id}"
        )
        sys.exit(1)
    seed = store.candidate(outcome.seed_id)
    evaluation = latest_ok(store, best.id)
    metrics = ", ".join(
        f"{k} {v:.4g}" for k, v in (evaluation.metrics if evaluation else {}).items()
    )
    console.print(
        f"best: candidate #{best.id}, score {best.score:.4g} (seed: {_score(seed)}), {metrics}\n"
        f"written to {folder / 'best'}/\n"
        f"see it with: evolve show {best.id}    the board: evolve leaderboard {run_name}"
    )


def _score(candidate: CandidateRecord | None) -> str:
    return "-" if candidate is None or candidate.score is None else f"{candidate.score:.4g}"
