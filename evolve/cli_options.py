"""What the `evolve` commands share: where the store is (`--db`, `--results`), and which run
a command that reads one means.

Kept apart from evolve/cli.py so that the commands that look back at runs
(evolve/history_cli.py) can use them without importing the command line itself.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from evolve.ui.console import errors

if TYPE_CHECKING:
    from evolve.store import RunRecord, Store

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
