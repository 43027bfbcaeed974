"""The `evolve` command: run a task, resume it, and look at what it found.

Only what every command needs is imported up here. The rest (Ray, the store, the engine)
is imported inside the command that uses it, so that a mistake in a task file is answered
in a fraction of a second rather than after the second those imports take.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from evolve.cli import history as history_cli
from evolve.cli.options import chosen_run, db_option, ending, reading_store, results_option
from evolve.cli.scaffold import scaffold, starters
from evolve.runtime.runlog import LEVELS
from evolve.task.loading import LoadedTask, TaskFileError, load_task
from evolve.task.run_names import is_run_name
from evolve.ui.console import console, errors

LATEST = "__latest__"  # --resume without a run name

RUN_EPILOG = """\b
Ctrl-C (or SIGTERM) stops cleanly: the run is marked stopped and what
finished is kept. Continue it with `evolve run --resume [RUN]`: nothing
finished is repeated, and candidates that were in flight run again.
\b
Exit codes:
  0    the run finished and crowned a best candidate
  1    it failed: the seed or the evaluator's set-up failed, Ray did
       not start, nothing could be proposed, or no candidate was crowned
  2    a bad task file, option or run name, or a task in which nothing
       could propose a change (nothing was started)
  130  stopped by Ctrl-C or SIGTERM
"""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="evolve-programs", prog_name="evolve")
def main() -> None:
    """Make programs faster and smaller by evolution."""


def _run_name(name: str | None) -> str | None:
    """A run's name names its folder of results, so it may not be a path."""
    if name is not None and not is_run_name(name):
        raise click.BadParameter(
            f"{name!r}: a run's name is letters, digits, '_', '.' and '-', starting with a "
            "letter or digit (it names the run's folder)"
        )
    return name


def _load(task_file: Path, *, running: bool = False) -> LoadedTask:
    """The task, or exit 2 with every problem on its line; its warnings said once. For a
    run, they follow the first line, which says who proposes children (evolve/engine/launch.py)."""
    try:
        task = load_task(task_file)
    except TaskFileError as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)
    if running:
        from evolve.engine.launch import introduce  # imported once the task file has loaded

        with ending():
            introduce(task)
    for warning in task.warnings:
        errors.print(f"[yellow]warning:[/yellow] {task.path}: {warning}", highlight=False)
    return task


@main.command(short_help="Evolve a task's program within its budget.", epilog=RUN_EPILOG)
@click.argument("task_file", required=False, type=click.Path(path_type=Path))
@click.option(
    "--resume",
    is_flag=False,
    flag_value=LATEST,
    default=None,
    metavar="[RUN]",
    help="Continue a stopped or killed run (the latest one if RUN is not given).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Evaluations in flight (default: an OpenEvolve config's "
    "evaluator.parallel_evaluations, else CPUs - 1).",
)
@click.option(
    "--seed",
    type=int,
    help="Fixes every random choice (default: an OpenEvolve config's random_seed, else 0).",
)
@click.option(
    "--name",
    callback=lambda _ctx, _param, value: _run_name(value),
    help="Run name: letters, digits, '_', '.', '-' (default: TASK-DATE-TIME).",
)
@click.option(
    "--ray-address",
    help="Run the workers on this Ray cluster ('local': a private Ray instance here). "
    "Without it they are this machine's processes, and Ray is not used.",
)
@click.option("--plain", is_flag=True, help="Plain log lines instead of the live dashboard.")
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    help="How much goes to results/RUN/run.log.",
)
@click.option(
    "--sandbox",
    "backend",
    metavar="BACKEND",
    help="Run candidates in this sandbox instead of the task's: docker, process (where Docker "
    "is not), or a sandbox plugin's name.",
)
@click.option(
    "--candidates",
    type=click.IntRange(min=1),
    help="Stop after this many candidates, instead of the task's budget (for a quick try).",
)
@click.option(
    "--wall-time",
    "wall_time",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop after this many seconds, instead of the task's budget.",
)
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
    log_level: str,
    backend: str | None,
    candidates: int | None,
    wall_time: float | None,
    db: str | None,
    results: Path | None,
) -> None:
    """Evolve the program of TASK_FILE within its budget: a task.yaml, or a folder holding
    one, or an OpenEvolve folder (or its config.yaml)."""
    if (task_file is None) == (resume is None):
        raise click.UsageError("give a TASK_FILE, or --resume [RUN] to continue a run")
    if resume is not None and (seed is not None or name is not None):
        raise click.UsageError("a resumed run keeps its name and seed: drop --name and --seed")
    task = _load(task_file, running=True) if task_file is not None else None
    from evolve.engine import launch  # imported once the task file has loaded: see the docstring

    options = launch.RunOptions(
        workers, plain, ray_address, backend, log_level.upper(), candidates, wall_time
    )
    with ending():
        if task is not None:
            launch.new_run(options, task, seed, name, db, results)
        else:
            launch.resumed_run(options, None if resume == LATEST else resume, db, results)


@main.command(short_help="Build the seed, check and measure it once, and say what broke.")
@click.argument("task_file", type=click.Path(path_type=Path))
@click.option(
    "--sandbox",
    "backend",
    metavar="BACKEND",
    help="Run the seed in this sandbox instead of the task's (docker, process, or a plugin's).",
)
def check(task_file: Path, backend: str | None) -> None:
    """Check TASK_FILE without running it: validate the file, then build, check and measure
    the seed once in the task's sandbox (no Ray), and print its metrics and feedback.

    \b
    Exit codes: 0 the seed passes; 2 the task file, its reference or harness,
    or the seed is broken (one line says what); 1 the sandbox cannot run here.
    """
    task = _load(task_file)
    from evolve.task.seed_check import check_seed  # imported once the task file has loaded

    with ending():
        code = check_seed(task, backend)
    sys.exit(code)


@main.command(short_help="Show the best candidates of a run.")
@click.argument("run_name", required=False)
@click.option("-n", "--limit", default=10, show_default=True, help="Rows to show.")
@click.option(
    "--watch",
    is_flag=True,
    help="Follow a run being written elsewhere: redraw every --interval until it ends.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="With --watch: how often to read the store again.",
)
@db_option
@results_option
def leaderboard(
    run_name: str | None,
    limit: int,
    watch: bool,
    interval: float,
    db: str | None,
    results: Path | None,
) -> None:
    """Show the best candidates of RUN (default: the latest run).

    With --watch, follow RUN as another process (a cluster's driver, say) writes it: the
    table is redrawn every --interval seconds, in place on a terminal and as a fresh table
    otherwise, and the command ends by itself once the run has finished, stopped, failed
    or been killed. Ctrl-C ends the watching, never the run.
    """
    from evolve.ui.tables import leaderboard as board
    from evolve.ui.tables import run_summary
    from evolve.ui.watch import watch as follow

    with reading_store(db, results) as store:
        record = chosen_run(store, run_name)
        if watch:
            follow(store, record.name, limit, interval)
            return
        console.print(board(store, record, limit=limit))
        console.print(run_summary(store, record))


@main.command(short_help="Show one candidate: code, metrics, feedback, lineage.")
@click.argument("candidate_id", type=int)
@db_option
@results_option
def show(candidate_id: int, db: str | None, results: Path | None) -> None:
    """Show a candidate: code, metrics, counters, feedback and lineage to the seed."""
    from evolve.ui.tables import candidate_view

    with reading_store(db, results) as store:
        candidate = store.candidate(candidate_id)
        if candidate is None:
            errors.print(
                f"[red]error:[/red] no candidate #{candidate_id} in {store.display_url}",
                highlight=False,
            )
            sys.exit(2)
        console.print(candidate_view(store, candidate))


@main.command(short_help="Write a runnable task folder to start from.")
@click.argument("name", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--template",
    type=click.Choice(starters()),
    default="python",
    show_default=True,
    help="What to evolve: a Python program, a C kernel, any command, or LLVM inlining.",
)
def init(name: Path, template: str) -> None:
    """Write a runnable task folder NAME to start from (every key of its task.yaml explained)."""
    try:
        written = scaffold(name, template)
    except ValueError as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False)
        sys.exit(2)
    console.print(f"wrote {name}/: {', '.join(p.name for p in written)}")
    console.print(f"check it: evolve check {name}/task.yaml    run it: evolve run {name}/task.yaml")


@main.group(short_help="Build and check the sandboxes.")
def sandbox() -> None:
    """Build and check the Docker sandbox image, and the process sandbox's isolation."""


@sandbox.command(short_help="Build the sandbox image offline, cached by its recipe.")
@click.option("--force", is_flag=True, help="Rebuild even if the image exists.")
@click.option(
    "--task",
    "task_file",
    type=click.Path(path_type=Path),
    help="Build this task's image: the sandbox image plus its `sandbox.packages` and `pip`.",
)
def build(force: bool, task_file: Path | None) -> None:
    """Build the sandbox image offline (debootstrap + docker import); cached by its recipe.

    With --task, the task's image, so that `evolve run` finds it ready: the sandbox image (or
    the task's own `sandbox.image`) plus the Debian packages and PyPI requirements the task
    names, built on that base; --force then rebuilds the packages' image, not its base.
    """
    from evolve.sandboxes.images.build import build_image
    from evolve.sandboxes.images.derived import build_derived

    sandbox = None
    if task_file is not None:
        try:
            sandbox = load_task(task_file).spec.sandbox
        except TaskFileError as exc:
            errors.print(f"[red]error:[/red] {exc}", highlight=False)
            sys.exit(2)
    packages = sandbox.packages if sandbox is not None else []
    pip = sandbox.pip if sandbox is not None else []
    image = sandbox.image if sandbox is not None else None
    if image is not None and not packages and not pip:
        console.print(
            f"{task_file} names its own image, {image}, and no packages: nothing to build"
        )
        return

    def progress(line: str) -> None:
        console.print(line, highlight=False, markup=False)

    try:
        tag = image or build_image(force=force and not (packages or pip), progress=progress)
        if packages or pip:
            tag = build_derived(image, packages, pip=pip, force=force, progress=progress)
    except Exception as exc:
        errors.print(f"error: {exc}", style="red", highlight=False, markup=False)
        sys.exit(1)
    console.print(f"sandbox image ready: {tag}")


@sandbox.command(name="check", short_help="Report what works: engine, image, a job, counters, GPU.")
def sandbox_check() -> None:
    """Report what works: engine, image, a trivial job, perf counters, GPU."""
    from evolve.sandboxes.images.check import check as run_check

    findings = run_check()
    for finding in findings:
        mark = "[green]ok[/green]  " if finding.ok else "[red]FAIL[/red]"
        if not finding.ok and not finding.required:
            mark = "[yellow]no[/yellow]  "
        console.print(f"{mark} {finding.name}: {finding.detail}", highlight=False)
    sys.exit(0 if all(f.ok or not f.required for f in findings) else 1)


for looking_back in (
    history_cli.runs,
    history_cli.lineage,
    history_cli.diff,
    history_cli.export,
    history_cli.report,
):
    main.add_command(looking_back)
