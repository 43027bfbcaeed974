"""Two watchers of a run: a live rich dashboard for terminals, plain lines for logs."""

from __future__ import annotations

import time
from collections import deque

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from evolve.events import Event, Snapshot
from evolve.store import Store
from evolve.ui.tables import leaderboard
from evolve.verification import WORD

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
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[shown]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.candidates = self.progress.add_task("candidates", total=None, shown="")
        self.wall = self.progress.add_task("wall time ", total=None, shown="")
        self.live = Live(console=console, auto_refresh=False, transient=False)
        self.drawn = 0.0
        self.snapshot: Snapshot | None = None
        self.table: RenderableType = Text("")
        self.table_read: tuple[int, float] | None = None  # (leaders' version, when)

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
        s = self.snapshot
        if s is not None:
            self.progress.update(
                self.candidates,
                completed=s.candidates,
                total=s.budget_candidates,
                shown=f"{s.candidates}/{s.budget_candidates or 'no limit'}  "
                f"{s.evaluated} evaluated, {s.failed} failed, {s.in_flight} running"
                + (f"; {s.search}" if s.search else "")
                + (f"; {s.spend}" if s.spend else "")
                + (f"; [bold red]{s.outage}[/bold red]" if s.outage else "")
                + (f"; [bold yellow]{s.workers}[/bold yellow]" if s.workers else ""),
            )
            self.progress.update(
                self.wall,
                completed=s.elapsed_s,
                total=s.budget_wall_s,
                shown=f"{s.elapsed_s:.0f}s of {s.budget_wall_s:.0f}s"
                if s.budget_wall_s
                else f"{s.elapsed_s:.0f}s (no limit)",
            )
        self.live.update(
            Group(self.progress, self._table(), Text("recent events", style="bold"), *self.events)
        )
        self.live.refresh()

    def _table(self) -> RenderableType:
        version = self.snapshot.leaders if self.snapshot else -1
        read = self.table_read
        if read is None or read[0] != version or time.monotonic() - read[1] >= TABLE_REFRESH_S:
            run = self.store.get_run(self.run_name)
            self.table = leaderboard(self.store, run) if run is not None else Text("")
            self.table_read = (version, time.monotonic())
        return self.table


class PlainLog:
    """For pipes and CI logs: noteworthy events as lines, and progress every 10 seconds."""

    def __init__(self, console: Console, *, unverified: bool = False) -> None:
        self.console = console
        self.last = 0.0
        self.unverified = unverified

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
            line = snapshot.progress_line() + (f" ({WORD} scores)" if self.unverified else "")
            self.console.print(f"[progress] {line}", markup=False, highlight=False)


def told(event: Event, unverified: bool) -> str:
    """The event's text, a new best of a run with unverified scores marked so."""
    return f"{event.text} ({WORD})" if unverified and event.kind == "best" else event.text
