"""The c_kernel evaluator: a C kernel with EVOLVE-BLOCKs, linked with the driver and a
harness (the evaluator's, written from the task's `signature:`, or the task's own).

Only candidate code (its compilation and the kernel binary) and the trusted timer that
watches it run in the sandbox. Inputs, the reference answer, every comparison and the
scoring stay in this trusted process.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evolve.evaluators.c_kernel import counter_sizes, metrics, reference_check
from evolve.evaluators.c_kernel import signature as prototype
from evolve.evaluators.c_kernel.build import build, compile_object, link
from evolve.evaluators.c_kernel.check import check
from evolve.evaluators.c_kernel.code_size import code_bytes
from evolve.evaluators.c_kernel.counter_budget import CounterBudget
from evolve.evaluators.c_kernel.counters import cost_metrics, count
from evolve.evaluators.c_kernel.harness_gen import Harness, generate
from evolve.evaluators.c_kernel.measure import measure, sets_needed
from evolve.evaluators.c_kernel.oracle import CHECK, COUNTED, SANITIZED, Oracle, Trial
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.evaluators.c_kernel.sanitize import sanitize
from evolve.evaluators.task_files import finishes_in_time
from evolve.plugin.counters import CACHEGRIND, PERF, detect_source
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.peaks import CpuPeak, cpu_peak
from evolve.plugin.program import Program
from evolve.plugin.results import Counter, EvalResult, StageResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.stages import Runner, StageFailed, stage
from evolve.plugin.taskpaths import read_task_file

PREPARE_SEED = 0


class CKernelEvaluator(Evaluator):
    """Cascade build -> check -> sanitize (if on) -> measure -> counters; metrics code_bytes
    (the object's machine code), speedup (over the seed, timed beside it), time_s,
    throughputs and spreads, a roofline flag, and hardware counters (perf or cachegrind)
    that inform but never fail, with the deterministic est_cycles under cachegrind.

    `limits` bounds every sandbox run (compiler, nm, kernel); the worker sets it from the
    task's sandbox section before `prepare`. The instance holds only text and numbers,
    so it pickles for Ray; `prepare` then fills in what belongs to the worker's machine.
    """

    name = "c_kernel"
    Params = CKernelParams

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        """Validate the params, then run the reference once (reference_check.py), so that
        everything wrong with the task is found while it loads."""
        self.params = CKernelParams.model_validate(dict(params))
        self.harness = self._harness(task_dir)
        text = read_task_file(task_dir, self.params.reference, "reference")
        self.oracle = Oracle(text, str(task_dir / self.params.reference), self.params)
        finishes_in_time(
            lambda: reference_check.vet(self.oracle),
            (text, self.oracle.filename, repr(self.params)),
            "reference",
            self.params.reference,
        )
        reference_check.vet(self.oracle)
        self.has_flops = self.oracle.defines("flops")
        self.has_work = self.oracle.defines("work")
        self.limits = Limits()
        self.reference_binary: bytes | None = None  # the seed, built on the worker
        self.peak: CpuPeak | None = None
        self.counter_source: str | None = None  # None: no counters stage
        self.counted_sizes = self.params.counted_sizes()  # prepare fits them (counter_sizes.py)
        self.seed_counters: dict[str, Counter] = {}
        self.counter_budget = CounterBudget(self.params)
        self.salt = secrets.randbits(64)  # see oracle.py: no two runs draw the same inputs

    def _harness(self, task_dir: Path) -> Harness:
        params = self.params
        if params.signature is None:
            return Harness(read_task_file(task_dir, params.harness or "", "harness"))
        inputs = [spec.name for spec in params.inputs or ()]
        outputs = [spec.name for spec in params.outputs or ()]
        return generate(prototype.parse(params.signature), inputs, outputs)

    def metric_problem(self, name: str) -> str | None:
        """Why an objective named `name` could not be scored, checked when the task loads."""
        return metrics.problem(name, self.params, self.has_flops, self.has_work)

    def prompt_rules(self) -> str:
        """What the build and the check hold a candidate to, for the model's prompt."""
        p = self.params
        entry = f"`{p.signature}`" if p.signature else f"`{p.entry}`, called by the task's harness"
        sizes = ", ".join(f"{name}={value}" for name, value in p.sizes.items())
        sanitized = "; then once more under ASan and UBSan" if p.sanitize else ""
        return "\n".join(
            [
                f"- The kernel is {entry}, the only global symbol allowed: make helpers and "
                "data `static`.",
                f"- Compiler flags come from a `// cflags: ...` comment (default "
                f"`{p.default_flags}`); {p.compiler} accepts only: {' '.join(p.allowed_flags)}",
                f"- Every call gets fresh inputs ({sizes}) and its outputs are compared with "
                f"the reference (floats to rtol {p.rtol:g}, atol {p.atol:g}){sanitized}.",
            ]
        )

    def advice(self, result: EvalResult) -> list[str]:
        """A warning where counting took longer than the timing: every counted candidate
        pays it, and a smaller `counter_sizes` (or `counters: promising`) pays less."""
        took = {stage.name: stage.seconds for stage in result.stages}
        if "counters" not in took or took["counters"] <= took.get("measure", 0.0):
            return []
        sizes = ", ".join(f"{name}={value}" for name, value in self.counted_sizes.items())
        return [
            f"the counters stage took {took['counters']:.1f}s, longer than the timing "
            f"({took.get('measure', 0.0):.1f}s), counting one call at {sizes}: every counted "
            "candidate pays it; set evaluator.params.counter_sizes smaller (or counters: "
            "promising, or never)"
        ]

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Build the seed, which every candidate is timed beside, and count its events once:
        the binary, the roofline and whether the CPU's counters are readable all belong to
        the machine that measures (workdir unused). The seed is not evaluated here: it is a
        run's first candidate, evaluated like any other, and a seed that fails ends the run
        with its feedback; evaluating it here too would only double the set-up time."""
        if self.params.counters != "never":
            tools = (
                (CACHEGRIND,) if self.params.counter_tool == "cachegrind" else (PERF, CACHEGRIND)
            )
            self.counter_source = detect_source(sandbox, self.limits, tools)
        self.peak = cpu_peak(self.params.threads)
        run = Runner(sandbox, self.limits)
        try:
            self.reference_binary = build(run, seed, self.params, self.harness)
        except StageFailed as failure:
            raise RuntimeError(f"the seed program does not build:\n{failure.feedback}") from None
        if self.counter_source is not None:
            self.counted_sizes, self.seed_counters = counter_sizes.fit(
                self.oracle, lambda sizes: self._count_seed(run, sizes)
            )

    def _count_seed(self, run: Runner, sizes: dict[str, int]) -> dict[str, Counter]:
        if self.reference_binary is None or self.counter_source is None:
            raise RuntimeError("the seed is counted only once it is built and a tool is found")
        trial = self.oracle.trial((self.salt, PREPARE_SEED, COUNTED, 0), sizes)
        counters, _ = count(
            run, self.reference_binary, trial, self.params, self.counter_source, {}, sizes
        )
        return counters

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        return self._cascade(program, sandbox, seed)

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """Build, check and sanitize only, for the agent's drafts: no timing, so no seed."""
        return self._cascade(program, sandbox, seed, measured=False)

    def _cascade(
        self,
        program: Program,
        sandbox: Sandbox,
        seed: int,
        *,
        measured: bool = True,
    ) -> EvalResult:
        run = Runner(sandbox, self.limits)
        stages: list[StageResult] = []
        counters: dict[str, Counter] = {}
        with suppress(StageFailed):
            with stage(stages, "build") as building:
                obj = compile_object(run, program, self.params, self.harness)
                size = code_bytes(obj)
                building.metrics = {"code_bytes": float(size)}
                building.feedback = (
                    f"code_bytes {size}: the executable sections of the compiled object, "
                    "read from its ELF section headers"
                )
                binary = link(run, obj, self.params, self.harness)
            with stage(stages, "check"):
                trial = self._trial(seed, CHECK)
                check(run, binary, trial, self.params)
            if self.params.sanitize:
                with stage(stages, "sanitize") as sanitizing:
                    trial = self._trial(seed, SANITIZED)
                    sanitizing.feedback = sanitize(run, program, self.params, self.harness, trial)
            if not measured:
                return EvalResult.from_stages(stages, sandbox=run.summary())
            with stage(stages, "measure") as timing:
                timing.metrics, timing.feedback = self._measure(run, binary, seed)
            if self.counter_source is not None:
                with stage(stages, "counters") as counting:
                    skipped = self.counter_budget.skip_reason(timing.metrics)
                    if skipped:
                        counting.feedback = skipped
                    else:
                        counters, counting.feedback = count(
                            run,
                            binary,
                            self._counter_trial(seed),
                            self.params,
                            self.counter_source,
                            self.seed_counters,
                            self.counted_sizes,
                        )
                        counting.metrics = cost_metrics(counters, self.seed_counters)
        return EvalResult.from_stages(stages, counters=counters, sandbox=run.summary())

    def _trial(self, seed: int, purpose: int) -> Trial:
        """The one input set of a single-call stage (check, sanitize)."""
        return self.oracle.trial((self.salt, seed, purpose, 0), self.params.sizes)

    def _measure(self, run: Runner, binary: bytes, seed: int) -> tuple[dict[str, float], str]:
        if self.reference_binary is None:
            raise RuntimeError("prepare() must build the seed before anything is measured")
        count = sets_needed(self.params)

        def draw(purpose: int) -> list[Trial]:
            return self.oracle.trials((self.salt, seed), purpose, count, self.params.sizes)

        peak = self.peak or cpu_peak(self.params.threads)
        return measure(run, binary, self.reference_binary, self.params, draw, peak, str(seed))

    def _counter_trial(self, seed: int) -> Trial:
        """Fresh inputs of its own at the (perhaps smaller) counter sizes: a counted run must
        not be able to reuse an answer from the check or the timed calls."""
        return self.oracle.trial((self.salt, seed, COUNTED, 0), self.counted_sizes)
