"""What the engine tells its watchers: discrete events plus a periodic snapshot."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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

    def progress_line(self) -> str:
        best = "-" if self.best_score is None else f"#{self.best_id} {self.best_score:.4g}"
        spent = f", {self.spend}" if self.spend else ""
        return (
            f"{self.candidates}/{self.budget_candidates or '∞'} candidates, "
            f"{self.failed} failed, {self.elapsed_s:.0f}s, best {best}{spent}"
        )


class Observer(Protocol):
    def event(self, event: Event) -> None: ...

    def tick(self, snapshot: Snapshot) -> None: ...
