"""What the engine tells its watchers: discrete events plus a periodic snapshot."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from evolve.views.objective_terms import Terms

log = logging.getLogger("evolve.engine.loop")


@dataclass(frozen=True)
class Event:
    kind: str  # "best", "remeasure", "failure", "migration", "info", "warning"
    text: str
    candidate_id: int | None = None


@dataclass(frozen=True)
class Snapshot:
    run_name: str
    candidates: int  # in the store, including pending ones
    budget_candidates: int | None
    elapsed_s: float
    budget_wall_s: float | None
    evaluated: int
    failed: int
    in_flight: int
    best_id: int | None
    best_score: float | None
    spend: str = ""  # what models cost so far, when a model is configured
    outage: str = ""  # providers whose circuit is open, and until when
    search: str = ""  # how the population stands (islands, cells, front)
    workers: str = ""  # how many evaluation workers are ready, when not all are
    leaders: int = 0  # moves when the top of the leaderboard changed (evolve/engine/leaders.py)

    def progress_line(self, terms: Terms | None = None) -> str:
        """One line for a log; `terms` name the best's figure (a bare score without)."""
        named = terms or Terms()
        best = "-"
        if self.best_score is not None:
            best = f"#{self.best_id} {named.figure(self.best_score)}"
        spent = f", {self.spend}" if self.spend else ""
        spent += f", {self.search}" if self.search else ""
        spent += f", {self.outage}" if self.outage else ""
        spent += f", {self.workers}" if self.workers else ""
        return (
            f"{self.candidates}/{self.budget_candidates or '∞'} candidates, "
            f"{self.failed} failed, {self.elapsed_s:.0f}s, best {best}{spent}"
        )


class Observer(Protocol):
    def event(self, event: Event) -> None: ...

    def tick(self, snapshot: Snapshot) -> None: ...


class EventLog:
    """Every event goes to the run's log, and to the watcher (the live board) if there is
    one: so what the board showed can be read again after the run."""

    def __init__(self, observer: Observer | None) -> None:
        self.observer = observer

    def emit(self, event: Event) -> None:
        level = logging.WARNING if event.kind in ("warning", "failure") else logging.INFO
        log.log(level, "%s: %s", event.kind, event.text)
        if self.observer is not None:
            self.observer.event(event)

    def tick(self, snapshot: Callable[[], Snapshot]) -> None:
        """`snapshot` is called only when someone watches."""
        if self.observer is not None:
            self.observer.tick(snapshot())
