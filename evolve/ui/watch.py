"""`evolve leaderboard --watch`: a run followed from another terminal, or from any machine
that reaches its store, while its driver (perhaps a cluster's) writes it."""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import replace

from rich.console import Group
from rich.live import Live

from evolve.store import Store
from evolve.ui.console import console
from evolve.ui.tables import leaderboard as board
from evolve.ui.tables import run_summary
from evolve.views.run_states import shown_status


def watch(store: Store, run_name: str, limit: int, interval: float) -> None:
    """Until the run is over, or Ctrl-C: a live table on a terminal; into a pipe or a file,
    where redrawing in place would be noise, each reading printed after the last. A run
    that vanishes from the store meanwhile (a PostgreSQL schema dropped) ends it too."""
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    try:
        with live or nullcontext():
            while True:
                record = store.get_run(run_name)
                if record is None:
                    return
                shown = replace(record, status=shown_status(record, time.time()))
                view = Group(board(store, shown, limit=limit), run_summary(store, shown))
                if live is None:
                    console.print(view)
                else:
                    live.update(view, refresh=True)
                if shown.status != "running":
                    return
                time.sleep(interval)
    except KeyboardInterrupt:
        return
