"""What the `evolve` commands share: where the store is (`--db`, `--results`), the store
that a command which only reads opens (read-only: it neither writes nor cleans up after
dead drivers, which only `evolve run` does, and it imports neither Ray nor the engine),
which run such a command means, and how a command ends (`ending`).

Kept apart from evolve/cli/commands.py so that the commands that look back at runs
(evolve/cli/history.py) can use them without importing the command line itself.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from evolve.engine.ending import Ended
from evolve.ui.console import console, errors

if TYPE_CHECKING:
    from evolve.store import RunRecord, Store
    from evolve.store.location import StoreLocation

db_option = click.option(
    "--db",
    help="Database URL, or set EVOLVE_DB (default: the SQLite file results/evolve.db).",
)
results_option = click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the store and each run's files (default: ./results; commands that "
    "only read look for results/evolve.db here and in every folder above).",
)


@contextmanager
def ending() -> Iterator[None]:
    """Where the library ends a command short of success (evolve/engine/ending.py): its line and
    hint said, the process exits with its code."""
    try:
        yield
    except Ended as ended:
        if ended.message:
            errors.print(f"[red]error:[/red] {escape(ended.message)}", highlight=False)
        if ended.hint:
            console.print(ended.hint, markup=False, highlight=False)
        sys.exit(ended.exit_code)


def found_store(db: str | None, results: Path | None) -> StoreLocation:
    """The existing store a reading command means (evolve/store/location.py), or exit 2
    saying where it looked; never a new, empty one."""
    from evolve.store import location as store_location

    try:
        return store_location.for_reading(db, results)
    except store_location.StoreNotFound as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(2)


def reading_store(db: str | None, results: Path | None) -> Store:
    """The store a reading command means, opened read-only; exit 2 where it cannot be."""
    from evolve.store import Store, StoreNotReadable

    try:
        return Store(found_store(db, results).url, read_only=True)
    except StoreNotReadable as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        sys.exit(2)


def chosen_run(store: Store, run_name: str | None) -> RunRecord:
    """RUN, or the latest run without one; exit 2 saying what the store holds if neither is
    there."""
    record = store.get_run(run_name) if run_name else store.latest_run()
    if record is None:
        where = escape(store.display_url)
        errors.print(
            f"[red]error:[/red] no run {escape(repr(run_name))} in {where}: `evolve runs` lists "
            "its runs"
            if run_name
            else f"[red]error:[/red] no runs in {where} yet: `evolve run TASK` starts one",
            highlight=False,
        )
        sys.exit(2)
    return record
