"""`evolve runs`: every run of a store in one table, with what each found and spent."""

from __future__ import annotations

import re
import time

import yaml
from rich.table import Table
from rich.text import Text

from evolve.engine.champion import champion_of
from evolve.engine.verification import WORD, run_reason
from evolve.llm.prices import shown_cost
from evolve.store import RunRecord, Store
from evolve.store.records import RunTotals
from evolve.views.figures import RunFigures
from evolve.views.run_states import shown_status


def runs_table(
    records: list[RunRecord], totals: dict[str, RunTotals], bests: dict[str, str], now: float
) -> Table:
    """Newest first: the run one looks for is most often the latest. `bests`: each run's
    best as `best_figure` tells it."""
    table = Table(title=f"runs, newest first ({len(records)})")
    for column in ("name", "task", "status", "candidates", "best, against the seed"):
        table.add_column(column, justify="right" if column == "candidates" else "left")
    for column in ("spend", "started"):
        table.add_column(column)
    for record in sorted(records, key=lambda r: r.created_at, reverse=True):
        total = totals.get(record.name, RunTotals())
        status = shown_status(record, now)
        style = {"running": "green", "failed": "red", "killed": "bold red"}.get(status, "")
        table.add_row(
            Text(record.name),  # stored text, not rich markup
            Text(task_name(record)),
            Text(status, style=style),
            str(total.candidates),
            Text(bests.get(record.name, "-") + (f" ({WORD})" if run_reason(record) else "")),
            _spend(total),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at)),
        )
    return table


def task_name(record: RunRecord) -> str:
    """The top-level `name:` of the task's YAML as stored with the run, else its path.
    That one line is read rather than the whole YAML, so a store of many runs lists fast,
    and read as plain strings, so that no stored text can make it slow (YAML's base-60
    numbers convert in quadratic time); an OpenEvolve run's config names no task."""
    line = re.search(r"^name:[ \t]*(.+)$", record.task_yaml, re.MULTILINE)
    try:
        name = yaml.load(line.group(1), Loader=yaml.BaseLoader) if line else None
    except yaml.YAMLError:
        name = None
    return name if isinstance(name, str) and name else record.task_path


def _spend(total: RunTotals) -> str:
    if not total.calls:
        return "-"
    return f"{shown_cost(total.cost_usd, total.tokens)}, {total.tokens:,} tokens"


def best_figure(store: Store, run: RunRecord) -> str:
    """The run's champion (evolve/engine/champion.py), not its top score, which may be measured
    once: `#54 run_wall_s 0.05282 s, 37x faster`; `-` where none is crowned."""
    champion = champion_of(store, run)
    if champion is None:
        return "-"
    return f"#{champion.id} {RunFigures(store, run).brief(champion.id)}"
