"""`evolve report`: one run as one self-contained HTML file, with its plots inline.

The file needs nothing beside it (no server, no network): progress, operators and models,
failures, the best's lineage with each change, the Pareto front, counters, the task, the
hardware and the budgets, read from the store in a few bulk queries (`facts`), drawn by
matplotlib (`plots`) and laid out by `page`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from evolve.report.facts import read_facts
from evolve.report.page import render
from evolve.store import Store

log = logging.getLogger("evolve.report")


def write_report(store: Store, run_name: str, path: Path) -> Path:
    """Write the report of `run_name` to `path` and return it; KeyError for an unknown run.
    The file is written whole or not at all, so a reader never opens half a report."""
    started = time.perf_counter()
    page = render(read_facts(store, run_name))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(path)
    log.info(
        "report of run %s: %s, %.0f kB in %.2f s",
        run_name,
        path,
        len(page.encode()) / 1024,
        time.perf_counter() - started,
    )
    return path


__all__ = ["write_report"]
