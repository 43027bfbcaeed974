"""An evaluator that runs nothing: it scores a program by its numeric knobs.

It exists to measure and test the engine, store and search on their own: with it, the
cost of a candidate is the framework's own overhead, and the best score is known.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evolve.knobs import find_knobs
from evolve.program import Program
from evolve.results import EvalResult, StageResult
from evolve.sandbox import Limits, Sandbox


class SyntheticParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: float = Field(0.0, description="the knob sum that scores best")
    delay_s: float = Field(0.0, ge=0, description="pretend each evaluation takes this long")
    fail_above: float | None = Field(None, description="knob sums above this fail the check")


class SyntheticEvaluator:
    name = "synthetic"

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = SyntheticParams.model_validate(dict(params))
        self.limits = Limits()

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        find_knobs(seed)

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        started = time.perf_counter()
        if self.params.delay_s:
            time.sleep(self.params.delay_s)
        total = sum(float(k.value) for k in find_knobs(program) if k.kind != "choice")
        seconds = time.perf_counter() - started
        limit = self.params.fail_above
        if limit is not None and total > limit:
            stage = StageResult("check", False, seconds, f"knob sum {total} exceeds {limit}")
            return EvalResult.from_stages([stage])
        metrics = {"distance": abs(total - self.params.target), "knob_sum": total}
        return EvalResult.from_stages([StageResult("check", True, seconds, metrics=metrics)])
