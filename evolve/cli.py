"""The `evolve` command: run a task, resume it, and look at what it found."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console

from evolve import cluster
from evolve.runs import new_run_name, run_dir
from evolve.store import CandidateRecord, RunRecord, Store, default_url
from evolve.taskfile import LoadedTask, TaskFileError, load_task, make_evaluator, parse_task
from evolve.ui.tables import latest_ok

LATEST = "__latest__"
# Pipes and CI logs get a wide page rather than rich's 80 columns, so tables stay readable.
console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True, soft_wrap=True)


def _store(db: str | None, results: Path) -> Store:
    return Store(db or default_url(results))


db_option = click.option("--db", help="Database URL (default: sqlite file results/evolve.db).")
results_option = click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Folder for the store and each run's files.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Make programs faster and smaller by evolution."""


@main.command()
@click.argument("task_file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--resume",
    is_flag=False,
    flag_value=LATEST,
    default=None,
    metavar="[RUN]",
    help="Continue a stopped or killed run (the latest one if RUN is not given).",
)
@click.option(
    "--workers", type=click.IntRange(min=1), help="Evaluations in flight (default: CPUs - 1)."
)
@click.option("--seed", type=int, help="Fixes every random choice (default 0).")
@click.option("--name", help="Run name (default: TASK-DATE-TIME).")
@click.option("--ray-address", help="Join this Ray cluster instead of starting a local one.")
@click.option("--plain", is_flag=True, help="Plain log lines instead of the live dashboard.")
@db_option
@results_option
def run(
    task_file: Path | None,
    resume: str | None,
    workers: int | None,
    seed: int | None,
    name: str | None,
    ray_address: str | None,
    plain: bool,
    db: str | None,
    results: Path,
) -> None:
    """Evolve the program of TASK_FILE (a task.yaml) within its budget."""
    if (task_file is None) == (resume is None):
        raise click.UsageError("give a TASK_FILE, or --resume [RUN] to continue a run")
    if resume is not None and (seed is not None or name is not None):
        raise click.UsageError("a resumed run keeps its name and seed: drop --name and --seed")
    try:
        task = load_task(task_file) if task_file else None
    except TaskFileError as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)
    results.mkdir(parents=True, exist_ok=True)
    owns_ray = _connect_ray(ray_address)
    try:
        _start_or_resume(task, resume, workers, seed, name, plain, db, results)
    finally:
        if owns_ray:
            cluster.shutdown()


def _connect_ray(address: str | None) -> bool:
    """Ray first, so that a cluster we cannot join leaves no half-made run in the store."""
    try:
        return cluster.connect(address)
    except (ConnectionError, RuntimeError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        errors.print(f"[red]error:[/red] could not start or join {where}: {exc}", highlight=False)
        sys.exit(1)


def _start_or_resume(
    task: LoadedTask | None,
    resume: str | None,
    workers: int | None,
    seed: int | None,
    name: str | None,
    plain: bool,
    db: str | None,
    results: Path,
) -> None:
    with _store(db, results) as store:
        if task is not None:
            run_name = name or new_run_name(task.spec.name)
            if store.get_run(run_name):
                raise click.UsageError(f"a run named {run_name!r} exists: use --resume {run_name}")
            record = store.create_run(
                run_name,
                task_path=str(task.path),
                task_yaml=task.text,
                seed=seed or 0,
                settings={"workers": workers},
            )
        else:
            record = store.latest_run() if resume == LATEST else store.get_run(str(resume))
            if record is None:
                wanted = "to resume" if resume == LATEST else repr(resume)
                errors.print(f"[red]error:[/red] no run {wanted} in the store")
                sys.exit(2)
            try:
                task = parse_task(record.task_yaml, Path(record.task_path))
            except TaskFileError as exc:
                errors.print(
                    f"[red]error:[/red] the stored task no longer loads: {exc}", highlight=False
                )
                sys.exit(2)
            workers = workers or record.settings.get("workers")
            console.print(f"resuming run [bold]{record.name}[/bold]")
        _execute(task, store, record, workers, plain, results)


def _execute(
    task: LoadedTask,
    store: Store,
    record: RunRecord,
    workers: int | None,
    plain: bool,
    results: Path,
) -> None:
    from evolve.engine import Engine, SetupFailed
    from evolve.ui.dashboard import Dashboard, PlainLog

    run_name = record.name
    folder = run_dir(results, run_name)
    folder.mkdir(parents=True, exist_ok=True)
    console.print(f"run [bold]{run_name}[/bold]: results in {folder}/, store {store.display_url}")
    task = _usable_sandbox(task)
    if task.spec.sandbox.backend == "process":
        errors.print(
            "[yellow]warning:[/yellow] sandbox 'process': candidates run as plain processes on "
            "this machine, limited by rlimits but NOT isolated from its files or network."
        )
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
    store.set_run_status(run_name, "running")
    engine = Engine(task, store, record, make_evaluator(task), workers=workers, results_dir=results)
    live = not plain and console.is_terminal
    observer = Dashboard(store, run_name, console) if live else PlainLog(console)
    engine.observer = observer
    try:
        with observer:
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


def _usable_sandbox(task: LoadedTask) -> LoadedTask:
    """The task, switched to the process sandbox, loudly, where Docker cannot work."""
    if task.spec.sandbox.backend != "docker":
        return task
    from sandboxes import docker_available

    ok, why = docker_available()
    if ok:
        console.print(f"sandbox: {why}")
        return task
    errors.print(f"[yellow]warning:[/yellow] the docker sandbox cannot run here: {why}")
    errors.print("[yellow]warning:[/yellow] falling back to the process sandbox")
    sandbox = task.spec.sandbox.model_copy(update={"backend": "process"})
    return replace(task, spec=task.spec.model_copy(update={"sandbox": sandbox}))


def _score(candidate: CandidateRecord | None) -> str:
    return "-" if candidate is None or candidate.score is None else f"{candidate.score:.4g}"


@main.command()
@click.argument("run_name", required=False)
@click.option("-n", "--limit", default=10, show_default=True, help="Rows to show.")
@db_option
@results_option
def leaderboard(run_name: str | None, limit: int, db: str | None, results: Path) -> None:
    """Show the best candidates of RUN (default: the latest run)."""
    from evolve.ui.tables import leaderboard as board

    with _store(db, results) as store:
        record = store.get_run(run_name) if run_name else store.latest_run()
        if record is None:
            errors.print(f"[red]error:[/red] no run {run_name or ''} in the store")
            sys.exit(2)
        counts = store.status_counts(record.name)
        console.print(board(store, record.name, limit))
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        console.print(f"run {record.name} ({record.status}): {summary}")


@main.command()
@click.argument("candidate_id", type=int)
@db_option
@results_option
def show(candidate_id: int, db: str | None, results: Path) -> None:
    """Show a candidate: code, metrics, counters, feedback and lineage to the seed."""
    from evolve.ui.tables import candidate_view

    with _store(db, results) as store:
        candidate = store.candidate(candidate_id)
        if candidate is None:
            errors.print(f"[red]error:[/red] no candidate #{candidate_id} in the store")
            sys.exit(2)
        console.print(candidate_view(store, candidate))


@main.group()
def sandbox() -> None:
    """Build and check the Docker sandbox image."""


@sandbox.command()
@click.option("--force", is_flag=True, help="Rebuild even if the image exists.")
def build(force: bool) -> None:
    """Build the sandbox image offline (debootstrap + docker import); cached by its recipe."""
    from sandboxes.images.build import build_image

    try:
        tag = build_image(force=force, progress=lambda line: console.print(line, highlight=False))
    except Exception as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(1)
    console.print(f"sandbox image ready: {tag}")


@sandbox.command()
def check() -> None:
    """Report what works: engine, image, a trivial job, perf counters, GPU."""
    from sandboxes.images.check import check as run_check

    findings = run_check()
    for finding in findings:
        mark = "[green]ok[/green]  " if finding.ok else "[red]FAIL[/red]"
        if not finding.ok and not finding.required:
            mark = "[yellow]no[/yellow]  "
        console.print(f"{mark} {finding.name}: {finding.detail}", highlight=False)
    sys.exit(0 if all(f.ok or not f.required for f in findings) else 1)
