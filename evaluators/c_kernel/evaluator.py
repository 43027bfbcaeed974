"""The c_kernel evaluator: a C kernel with EVOLVE-BLOCKs, linked with a task's trusted harness.

Only candidate code (its compilation and the kernel binary) runs in the sandbox. Inputs,
the reference answer, the comparison and the scoring stay in this trusted process.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evaluators.c_kernel.build import build
from evaluators.c_kernel.check import check
from evaluators.c_kernel.counters import count
from evaluators.c_kernel.measure import measure
from evaluators.c_kernel.oracle import Trial, make_trial
from evaluators.c_kernel.params import CKernelParams
from evaluators.c_kernel.stages import Runner, StageFailed, stage
from evaluators.task_files import read_task_file
from evolve.program import Program
from evolve.results import Counter, EvalResult, StageResult
from evolve.sandbox import Limits, Sandbox
from sandboxes.counters import detect_source

PREPARE_SEED = 0


class CKernelEvaluator:
    """Cascade build -> check -> measure -> counters; metrics time_s, time_spread, gflops and
    speedup, and hardware counters (perf or cachegrind) that inform but never fail.

    `limits` bounds every sandbox run (compiler, nm, kernel); the engine sets it from the
    task's sandbox section before `prepare`. The instance holds only text and numbers,
    so it pickles for Ray; `prepare` then fills in what belongs to the worker's machine.
    """

    name = "c_kernel"

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = CKernelParams.model_validate(dict(params))
        self.harness = read_task_file(task_dir, self.params.harness, "c_kernel harness")
        self.reference = read_task_file(task_dir, self.params.reference, "c_kernel reference")
        self.reference_path = str(task_dir / self.params.reference)
        self.limits = Limits()
        self.baseline_s: float | None = None
        self.counter_source: str | None = None  # None: no counters stage
        self.seed_counters: dict[str, Counter] = {}

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Time and count the seed here: baselines, and whether the CPU's counters are
        readable, belong to the machine that measures (workdir unused)."""
        if self.params.counters:
            self.counter_source = detect_source(sandbox, self.limits)
        result = self._cascade(seed, sandbox, PREPARE_SEED)
        if not result.ok:
            raise RuntimeError(f"the seed program fails ({result.status}):\n{result.feedback}")
        self.baseline_s = result.metrics["time_s"]
        self.seed_counters = result.counters

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        return self._cascade(program, sandbox, seed)

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """Build and check only, for the agent's drafts: no baseline needed, no timing."""
        return self._cascade(program, sandbox, seed, measured=False)

    def _cascade(
        self, program: Program, sandbox: Sandbox, seed: int, *, measured: bool = True
    ) -> EvalResult:
        run = Runner(sandbox, self.limits)
        stages: list[StageResult] = []
        counters: dict[str, Counter] = {}
        with suppress(StageFailed):
            with stage(stages, "build"):
                binary = build(run, program, self.params, self.harness)
            with stage(stages, "check"):
                trial = make_trial(self.reference, self.reference_path, seed, self.params.sizes)
                check(run, binary, trial, self.params)
            if not measured:
                return EvalResult.from_stages(stages, sandbox=run.summary())
            with stage(stages, "measure") as timing:
                timing.metrics = measure(run, binary, trial, self.params, self.baseline_s)
            if self.counter_source is not None:
                with stage(stages, "counters") as counting:
                    counters, counting.feedback = count(
                        run,
                        binary,
                        self._counter_trial(trial, seed),
                        self.params,
                        self.counter_source,
                        self.seed_counters,
                    )
        return EvalResult.from_stages(stages, counters=counters, sandbox=run.summary())

    def _counter_trial(self, trial: Trial, seed: int) -> Trial:
        """The measured trial, or one from the same seed at the (smaller) counter sizes."""
        if self.params.counter_sizes is None:
            return trial
        sizes = self.params.counter_sizes
        return make_trial(self.reference, self.reference_path, seed, sizes)
