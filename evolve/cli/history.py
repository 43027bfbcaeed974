"""The commands that look back at runs: list them, trace a candidate's lineage, diff two
programs, export a run, and write its report.

They only read the store, and import it (and the rest) inside each command, as
evolve/cli/commands.py explains; evolve/cli/commands.py adds them to the `evolve` group.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import click
from rich.markup import escape

from evolve.cli.options import chosen_run, db_option, found_store, reading_store, results_option
from evolve.ui.console import console, errors


@click.command(short_help="List every run in the store, newest first.")
@db_option
@results_option
def runs(db: str | None, results: Path | None) -> None:
    """List every run in the store, newest first: its task, status, candidates, best (in
    its objective's terms, against the seed), model spend and start time.

    A run whose driver died without a word (kill -9, a lost machine) is shown as killed
    once its lease has lapsed; `evolve run --resume RUN` continues it.
    """
    import time

    from evolve.ui.runs_view import best_figure, runs_table

    with reading_store(db, results) as store:
        records = store.list_runs()
        if not records:
            where = store.display_url
            console.print(f"no runs in {where} yet: `evolve run TASK` starts one", markup=False)
            return
        bests = {record.name: best_figure(store, record) for record in records}
        console.print(runs_table(records, store.run_totals(), bests, time.time()))


@click.command(short_help="Write a run's records out: JSON lines, CSV, or its programs.")
@click.argument("run_name", required=False)
@click.option(
    "--format",
    "form",
    type=click.Choice(["jsonl", "csv", "dir"]),
    default="jsonl",
    show_default=True,
    help="jsonl: every record; csv: a row per candidate; dir: each candidate's files.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="The file to write (default: stdout); for dir, a new or empty folder (required).",
)
@db_option
@results_option
def export(
    run_name: str | None, form: str, output: Path | None, db: str | None, results: Path | None
) -> None:
    """Write the records of RUN (default: the latest run) out for other tools.

    \b
    jsonl  the run, then every candidate (files included), evaluation,
           proposal, model call (prompt and response included) and island
           migration of it: one JSON object a line, named by its "type"
    csv    a row per candidate: lineage, status, score, operator, model,
           change summary, and the metrics of the evaluation that scored it
    dir    each candidate's files in DIR/<id>/, and DIR/manifest.json
    """
    if form == "dir" and output is None:
        raise click.UsageError("--format dir needs -o DIR: a new or empty folder to write into")
    from evolve.views.export import write_csv, write_dir, write_jsonl

    with reading_store(db, results) as store:
        record = chosen_run(store, run_name)
        if form == "dir":
            assert output is not None  # checked above, before the store was opened
            try:
                candidates, files = write_dir(store, record, output, _warn)
            except FileExistsError as exc:
                errors.print(f"[red]error:[/red] {escape(str(exc))}: name a new or empty folder")
                sys.exit(2)
            console.print(
                f"wrote {candidates} candidates, {files} files and a manifest to {output}",
                markup=False,
            )
            return
        write = write_jsonl if form == "jsonl" else write_csv
        if output is None:
            write(store, record, sys.stdout)
            return
        try:
            out = output.open("w", encoding="utf-8", newline="")
        except OSError as exc:
            _cannot_write(output, exc)
        with out:
            write(store, record, out)
        console.print(f"wrote run {record.name} to {output}", markup=False, highlight=False)


def _cannot_write(path: Path, exc: OSError) -> NoReturn:
    errors.print(
        f"[red]error:[/red] cannot write {escape(str(path))}: {escape(exc.strerror or str(exc))}",
        highlight=False,
    )
    sys.exit(2)


def _warn(message: str) -> None:
    errors.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)


@click.command(short_help="Show a candidate's ancestry, or its descendants, as a tree.")
@click.argument("candidate_id", type=int)
@click.option("--descendants", is_flag=True, help="Show what descends from it instead.")
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    help="Levels to show (default: the whole ancestry, or 3 levels of descendants).",
)
@db_option
@results_option
def lineage(
    candidate_id: int, descendants: bool, depth: int | None, db: str | None, results: Path | None
) -> None:
    """Show the ancestry of CANDIDATE_ID back to the seed, crossover parents included, or
    with --descendants every candidate descending from it: each with its status and score,
    the operator and model that made it, its change against its first parent, and what
    it changed."""
    from evolve.ui.lineage_view import lineage_view
    from evolve.views.lineage_tree import lineage_tree

    if depth is None and descendants:
        depth = 3
    with reading_store(db, results) as store:
        try:
            tree = lineage_tree(store, candidate_id, descendants=descendants, depth=depth)
        except LookupError as exc:
            errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            sys.exit(2)
    console.print(lineage_view(tree))


@click.command(short_help="Show what changed between two candidates' programs.")
@click.argument("first", metavar="A", type=int)
@click.argument("second", metavar="[B]", type=int, required=False)
@click.option(
    "--color/--no-color", default=None, help="Colour the diff (default: only on a terminal)."
)
@db_option
@results_option
def diff(
    first: int, second: int | None, color: bool | None, db: str | None, results: Path | None
) -> None:
    """Show a unified diff of A's program against B's, file by file, or with A alone, of A
    against its first parent. Piped, it is plain text that `patch -p1` and `git apply` take.
    Exit 0 also when the programs are the same (stdout is then empty)."""
    from evolve.views.program_diff import compared, file_diffs, painted, plain, visible

    with reading_store(db, results) as store:
        try:
            old, new = compared(store, first, second)
        except LookupError as exc:
            errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            sys.exit(2)
    diffs = file_diffs(old, new)
    if not diffs:
        errors.print(f"no difference between #{old.id} and #{new.id}", highlight=False)
        return
    terminal = sys.stdout.isatty()
    coloured = terminal if color is None else color
    if terminal or coloured:  # read by a person: a program's own escapes are shown, not run
        diffs = visible(diffs)
    # color=True: click would otherwise strip escapes that a program's own text may hold
    click.echo(painted(diffs) if coloured else plain(diffs), nl=False, color=True)


@click.command(short_help="Write a run's report: one HTML file of plots, to open offline.")
@click.argument("run_name", metavar="[RUN]", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write (default: report.html in the run's folder of results, else "
    "report-RUN.html here).",
)
@db_option
@results_option
def report(run_name: str | None, output: Path | None, db: str | None, results: Path | None) -> None:
    """Write the report of RUN (default: the latest run): one HTML file that opens in any
    browser, offline, with the best score over candidates and time, what each operator and
    model bought and cost, why candidates failed and proposals were dropped, the best's
    lineage with every change, the Pareto front, counters, the task, hardware and budgets."""
    import re

    from evolve.report import write_report
    from evolve.task.run_names import is_run_name, run_dir

    location = found_store(db, results)
    with reading_store(db, results) as store:
        record = chosen_run(store, run_name)
        if output is None:
            # A stored name that is no run name (an absolute path, `..`) names no folder.
            folder = run_dir(location.results, record.name) if is_run_name(record.name) else None
            here = Path("report-" + re.sub(r"[^\w.-]", "_", record.name) + ".html")
            output = folder / "report.html" if folder is not None and folder.is_dir() else here
        try:
            written = write_report(store, record.name, output)
        except OSError as exc:
            _cannot_write(output, exc)
    console.print(f"wrote {written}", markup=False, highlight=False)
