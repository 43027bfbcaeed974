"""What an evaluation produces, in plain dataclasses so that Ray can ship them between nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

OK = "ok"
TIMEOUT = "timeout"
ERROR = "error"  # the evaluator itself failed, not the candidate
UNAVAILABLE = "sandbox_unavailable"  # the sandbox could not run anything: retried, never recorded


def failed(stage: str) -> str:
    """Status of a candidate whose cascade stopped at `stage` (e.g. "build_failed")."""
    return f"{stage}_failed"


@dataclass(frozen=True)
class Counter:
    """One hardware-counter reading; `source` says who counted it (perf, cachegrind, ncu...)."""

    value: float
    source: str


@dataclass
class StageResult:
    name: str
    ok: bool
    seconds: float
    feedback: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    timed_out: bool = False


@dataclass
class EvalResult:
    """The outcome of one cascade. `status` is "ok" only when every stage passed."""

    status: str
    stages: list[StageResult] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    counters: dict[str, Counter] = field(default_factory=dict)
    feedback: str = ""
    artifacts: dict[str, str] = field(default_factory=dict)
    sandbox: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @classmethod
    def from_stages(cls, stages: list[StageResult], **extra: Any) -> EvalResult:
        """Status, metrics and feedback derived from the stages, so no evaluator repeats it."""
        status = OK
        for stage in stages:
            if not stage.ok:
                status = TIMEOUT if stage.timed_out else failed(stage.name)
                break
        metrics: dict[str, float] = {}
        for stage in stages:
            metrics.update(stage.metrics)
        feedback = "\n\n".join(f"[{s.name}] {s.feedback}" for s in stages if s.feedback)
        return cls(status=status, stages=stages, metrics=metrics, feedback=feedback, **extra)
