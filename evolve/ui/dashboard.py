"""Two watchers of a run: a live rich dashboard for terminals, plain lines for logs."""

from __future__ import annotations

import time
from collections import deque

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from evolve.engine.events import Event, Snapshot
from evolve.engine.verification import WORD
from evolve.store import Store
from evolve.ui.budget_lines import BudgetLines, Gauge
from evolve.ui.tables import leaderboard
from evolve.views.figures import RunFigures
from evolve.views.objective_terms import Terms

STYLES = {"best": "bold green", "failure": "red", "warning": "yellow", "remeasure": "cyan"}
REFRESH_S = 0.5
# The table is read from the store when the engine says its top changed, and at least this
# often, for what the engine does not follow (another run's writes, Pareto marks).
TABLE_REFRESH_S = 10.0


class Dashboard:
    """Progress against the budget, the top 10, and the latest events, redrawn twice a second;
    the top 10 is read again only when it changed."""

    def __init__(
        self, store: Store, run_name: str, console: Console, *, unverified: bool = False
    ) -> None:
        self.store, self.run_name = store, run_name
        self.unverified = unverified
        self.events: deque[Text] = deque(maxlen=8)
        self.live = Live(console=console, auto_refresh=False, transient=False)
        self.drawn = 0.0
        self.snapshot: Snapshot | None = None
        self.table: RenderableType = Text("")
        self.table_read: tuple[int, float] | None = None  # (leaders' version, when)
        self.figures: RunFigures | None = None  # read with the run, the first time it is
        self.best: tuple[tuple[int | None, float | None], Text | None] = ((None, None), None)

    def __enter__(self) -> Dashboard:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.table_read = None  # the last picture shows the store as the run left it
        self._draw()
        self.live.__exit__(None, None, None)

    def event(self, event: Event) -> None:
        stamp = time.strftime("%H:%M:%S")
        text = told(event, self.unverified)
        self.events.append(Text(f"{stamp} {text}", style=STYLES.get(event.kind, "")))

    def tick(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        if time.monotonic() - self.drawn >= REFRESH_S:
            self._draw()

    def _draw(self) -> None:
        self.drawn = time.monotonic()
        table = self._table()  # first: it reads the run, which the best's line needs
        top = self._top(self.snapshot) if self.snapshot is not None else Text("")
        self.live.update(Group(top, table, Text("recent events", style="bold"), *self.events))
        self.live.refresh()

    def _top(self, s: Snapshot) -> BudgetLines:
        """The budgets' bars, the run's state and its best."""
        wall = (
            f"{s.elapsed_s:.0f}s of {s.budget_wall_s:.0f}s"
            if s.budget_wall_s
            else f"{s.elapsed_s:.0f}s (no limit)"
        )
        gauges = [
            Gauge("candidates", s.candidates, s.budget_candidates,
                  f"{s.candidates}/{s.budget_candidates or 'no limit'}"),
            Gauge("wall time", s.elapsed_s, s.budget_wall_s, wall),
        ]  # fmt: skip
        state = [Text(f"{s.evaluated} evaluated, {s.failed} failed, {s.in_flight} running")]
        state += [Text(part) for part in (s.search, s.spend) if part]
        state += [Text(s.outage, style="bold red")] * bool(s.outage)
        state += [Text(s.workers, style="bold yellow")] * bool(s.workers)
        return BudgetLines(gauges, state, self._best(s))

    def _best(self, s: Snapshot) -> Text | None:
        """The champion beside the seed, read again only when the champion changed."""
        key, line = self.best
        if key != (s.best_id, s.best_score):
            line = None
            if s.best_id is not None and self.figures is not None:
                told = f"best #{s.best_id}: {self.figures.headline(s.best_id)}"
                line = Text(told + (f" ({WORD})" if self.unverified else ""), style="bold green")
            self.best = ((s.best_id, s.best_score), line)
        return line

    def _table(self) -> RenderableType:
        version = self.snapshot.leaders if self.snapshot else -1
        read = self.table_read
        if read is None or read[0] != version or time.monotonic() - read[1] >= TABLE_REFRESH_S:
            run = self.store.get_run(self.run_name)
            if run is not None and self.figures is None:
                self.figures = RunFigures(self.store, run)
            self.table = Text("") if run is None else leaderboard(self.store, run, self.figures)
            self.table_read = (version, time.monotonic())
        return self.table


class PlainLog:
    """For pipes and CI logs: noteworthy events as lines, and progress every 10 seconds."""

    def __init__(
        self, console: Console, *, unverified: bool = False, terms: Terms | None = None
    ) -> None:
        self.console = console
        self.last = 0.0
        self.unverified = unverified
        self.terms = terms or Terms()  # how the best is named

    def __enter__(self) -> PlainLog:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def event(self, event: Event) -> None:
        if event.kind != "remeasure":
            text = told(event, self.unverified)
            self.console.print(f"[{event.kind}] {text}", markup=False, highlight=False)

    def tick(self, snapshot: Snapshot) -> None:
        if time.monotonic() - self.last >= 10:
            self.last = time.monotonic()
            line = snapshot.progress_line(self.terms)
            line += f" ({WORD} scores)" if self.unverified else ""
            self.console.print(f"[progress] {line}", markup=False, highlight=False)


def told(event: Event, unverified: bool) -> str:
    """The event's text, a new best of a run with unverified scores marked so."""
    return f"{event.text} ({WORD})" if unverified and event.kind == "best" else event.text
