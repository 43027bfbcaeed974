"""An evaluator that runs nothing: it scores a program by its numeric knobs.

It exists to measure and test the engine, store and search on their own: with it, the
cost of a candidate is the framework's own overhead, and the best score is known. Its
suspects play a cheat, for testing the champion policy: a candidate that claims a near
perfect distance and a hundredfold speedup, maybe flags itself, and maybe does worse each
time it is measured again.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evolve.plugin.evaluator import Evaluator
from evolve.plugin.knobs import find_knobs
from evolve.plugin.plausibility import FLAG_PREFIX, FLAGGED_METRIC
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.plugin.sandbox import Limits, Sandbox


class SyntheticParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    target: float = Field(0.0, description="the knob sum that scores best")
    delay_s: float = Field(0.0, ge=0, description="pretend each evaluation takes this long")
    fail_above: float | None = Field(None, description="knob sums above this fail the check")
    suspect_above: float | None = Field(
        None, description="knob sums above this are suspects; metric speedup is reported"
    )
    suspect_flagged: bool = Field(False, description="the evaluator flags its suspects")
    suspect_drift: float = Field(
        1.0, gt=0, description="a suspect's distance grows this much per measurement on a worker"
    )
    flaky_first: int = Field(
        0, ge=0, description="the first N evaluations on each worker time out, as on a loaded node"
    )
    flaky_again: int = Field(
        0,
        ge=0,
        description="a program measured before on a worker times out its next N measurements "
        "there, as a re-measurement on a loaded node",
    )


SUSPECT_DISTANCE = 1e-6
SUSPECT_SPEEDUP = 100.0


class SyntheticEvaluator(Evaluator):
    name = "synthetic"
    Params = SyntheticParams  # what the task loader checks a typo against

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = SyntheticParams.model_validate(dict(params))
        self.limits = Limits()
        # Measurements so far by code hash; each worker counts on its own copy, so a test
        # of the drift runs one worker.
        self.measured: Counter[str] = Counter()
        self.seen: Counter[str] = Counter()  # evaluations of each program on this worker
        self.evaluations = 0  # on this worker

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        find_knobs(seed)

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        started = time.perf_counter()
        self.evaluations += 1
        before = self.seen[program.code_hash]
        self.seen[program.code_hash] += 1
        if self.evaluations <= self.params.flaky_first:
            stage = StageResult("check", False, 0.0, "timed out (flaky_first)", timed_out=True)
            return EvalResult.from_stages([stage])
        if 0 < before <= self.params.flaky_again:
            stage = StageResult("check", False, 0.0, "timed out (flaky_again)", timed_out=True)
            return EvalResult.from_stages([stage])
        if self.params.delay_s:
            time.sleep(self.params.delay_s)
        total = sum(float(k.value) for k in find_knobs(program) if k.kind != "choice")
        seconds = time.perf_counter() - started
        limit = self.params.fail_above
        if limit is not None and total > limit:
            stage = StageResult("check", False, seconds, f"knob sum {total} exceeds {limit}")
            return EvalResult.from_stages([stage])
        metrics = {"distance": abs(total - self.params.target), "knob_sum": total}
        stage = StageResult("check", True, seconds, metrics=metrics)
        suspect = self.params.suspect_above
        if suspect is not None:
            metrics["speedup"] = 1.0
            if total > suspect:
                self._play_suspect(program, stage, f"knob sum {total} is above {suspect}")
        return EvalResult.from_stages([stage])

    def _play_suspect(self, program: Program, stage: StageResult, why: str) -> None:
        times = self.measured[program.code_hash]
        self.measured[program.code_hash] += 1
        stage.metrics["distance"] = SUSPECT_DISTANCE * self.params.suspect_drift**times
        stage.metrics["speedup"] = SUSPECT_SPEEDUP
        if self.params.suspect_flagged:
            stage.metrics[FLAGGED_METRIC] = 1.0
            stage.feedback = f"{FLAG_PREFIX}{why}: too good to be true"
