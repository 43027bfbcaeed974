"""The cuda_kernel evaluator: a .cu candidate, a trusted runner on the GPU, a trusted verifier.

Cascade: static (rules on the source) -> build (nvcc, symbol vetting, link) -> check
(at least five rounds of fresh inputs over at least three shapes) -> time (candidate and
reference alternately, same session) -> counters (ncu, optional). The sandbox runs only
the compiler and the runner; inputs, the reference answers and every judgement stay here.
The first three stages need no GPU, so they run (and are tested) anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from evolve.evaluators.cuda_kernel import clocks, counters, rules, timing
from evolve.evaluators.cuda_kernel.build import (
    Built,
    TaskSources,
    build,
    compile_harness,
    static_check,
)
from evolve.evaluators.cuda_kernel.gpu import Gpu, probe
from evolve.evaluators.cuda_kernel.params import CudaKernelParams
from evolve.evaluators.cuda_kernel.problem import Problem, Round
from evolve.evaluators.cuda_kernel.tensors import encode, outputs
from evolve.evaluators.cuda_kernel.toolchain import Toolchain, find_toolchain
from evolve.evaluators.cuda_kernel.verify import Tolerance, judge
from evolve.evaluators.task_files import finishes_in_time
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.plausibility import flag_lines
from evolve.plugin.program import Program
from evolve.plugin.results import ERROR, Counter, EvalResult, StageResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.stages import Runner, StageFailed, require_ok, stage
from evolve.plugin.taskpaths import read_task_file

PREPARE_SEED = 0
TIMING_ROUND_BASE = 1000  # timing sets draw from rounds past every correctness round
GPU_STAGES = "the correctness rounds, timing and counters"


class CudaKernelEvaluator(Evaluator):
    """Metrics: correct, speedup (over the task's reference kernel, same session), time_ms
    with p10/p90, fast_1/fast_1.5/fast_2, registers and spills, clocks, flags; ncu counters.

    The instance holds text, numbers and object files, so it pickles for Ray; the toolchain,
    the GPU and the harness objects are found on first use in each worker's own sandbox.
    """

    name = "cuda_kernel"
    Params = CudaKernelParams  # what the task loader checks a typo against

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = CudaKernelParams.model_validate(dict(params))
        reference = read_task_file(task_dir, self.params.reference, "reference")
        filename = str(task_dir / self.params.reference)
        finishes_in_time(
            lambda: Problem(reference, filename), (reference, filename), "reference",
            self.params.reference,
        )  # fmt: skip
        self.problem = Problem(reference, str(task_dir / self.params.reference))
        self.sources = TaskSources(
            launch=read_task_file(task_dir, self.params.launch, "launch"),
            reference_kernel=read_task_file(
                task_dir, self.params.reference_kernel, "reference_kernel"
            ),
        )
        self.fp32 = np.dtype(self.problem.dtype) == np.float32
        self.tolerance = Tolerance.for_dtype(
            self.problem.dtype, self.params.rtol, self.params.atol, self.params.rel_l2
        )
        self.limits = Limits()
        self.toolchain: Toolchain | None = None
        self.gpu: Gpu | None = None
        self.harness: dict[str, bytes] = {}
        self.ncu: str | None = None

    @property
    def arch(self) -> str:
        """The task's arch, else the GPU's own, else the compile-only target."""
        if self.params.arch != "auto":
            return self.params.arch
        return (self.gpu.arch if self.gpu else None) or self.params.offline_arch

    def prompt_rules(self) -> str:
        """What the static rules and the symbol vetting refuse, for the model's prompt."""
        lines = [
            f'- Keep `extern "C" {self.params.entry}` with the signature it has: the task\'s '
            "adapter calls it. No other global C name: make helpers `static`.",
            f"- nvcc builds it with {' '.join(self.params.nvcc_flags)}. #include only CUDA, "
            "math and C/C++ utility headers, no local files; no `##` token pasting.",
        ]
        lines += [f"- [{r.name}] {r.why}" for r in rules.RULES if self.fp32 or not r.fp32_only]
        return "\n".join(lines)

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Find nvcc and the GPU, build the harness, vet the reference kernel and the seed.
        Without a GPU it stops here, saying what could run (workdir unused)."""
        run = Runner(sandbox, self.limits)
        self._set_up(run)
        _, gpu = self._found()
        if not gpu.present:
            raise RuntimeError(self._no_gpu_message(seed, run))
        if self.params.counters:
            self.ncu = counters.find_ncu(run)
        self._vet_reference_kernel(seed, run)
        result = self._cascade(seed, run, PREPARE_SEED)
        if not result.ok:
            raise RuntimeError(f"the seed program fails ({result.status}):\n{result.feedback}")

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        run = Runner(sandbox, self.limits)
        self._set_up(run)
        return self._cascade(program, run, seed)

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """For the agent's drafts: static checks, build, and the correctness rounds where a
        GPU is present; never timed."""
        run = Runner(sandbox, self.limits)
        self._set_up(run)
        _, gpu = self._found()
        stages: list[StageResult] = []
        with suppress(StageFailed):
            built = self._build_stages(program, run, stages)
            if gpu.present:
                with stage(stages, "check") as checking:
                    checking.feedback = self._check(run, built, seed, target="candidate")
        return EvalResult.from_stages(stages, sandbox=run.summary())

    # -- set-up ---------------------------------------------------------------------------

    def _set_up(self, run: Runner) -> None:
        if self.toolchain is None:
            self.toolchain = find_toolchain(run)
        if self.gpu is None:
            self.gpu = probe(run, self.toolchain)
        if not self.harness:
            self.harness = compile_harness(
                run, self.sources, self.toolchain, self.arch, self.params.nvcc_flags
            )

    def _found(self) -> tuple[Toolchain, Gpu]:
        """What `_set_up` found; every entry point runs it first, so None here is a bug."""
        if self.toolchain is None or self.gpu is None:
            raise RuntimeError("cuda_kernel: the toolchain and GPU are used before _set_up ran")
        return self.toolchain, self.gpu

    def _no_gpu_message(self, seed: Program, run: Runner) -> str:
        toolchain, gpu = self._found()
        stages: list[StageResult] = []
        with suppress(StageFailed):
            self._build_stages(seed, run, stages)
        ran = "; ".join(
            f"{s.name} {'passed' if s.ok else 'failed'}"
            + (f" ({s.feedback.splitlines()[0]})" if s.feedback else "")
            for s in stages
        )
        driver = "" if Path("/dev/nvidiactl").exists() else " (no NVIDIA driver on this host)"
        return (
            f"cuda_kernel needs a CUDA GPU, and none is usable in the {run.sandbox.name} "
            f"sandbox{driver}: {gpu.detail}.\n"
            f"  Could run here: static checks, nvcc ({toolchain.version}) and the "
            f"verifier; on the seed: {ran}.\n"
            f"  Needs a GPU: {GPU_STAGES}.\n"
            "  Run this task on a machine with an NVIDIA GPU and driver; for the docker "
            "sandbox, build evolve/sandboxes/images/Dockerfile.cuda and set the task's sandbox "
            "`image:` to it and `gpus: true`."
        )

    def _vet_reference_kernel(self, seed: Program, run: Runner) -> None:
        """The task's CUDA reference is timed as the baseline, so it must be right too."""
        stages: list[StageResult] = []
        try:
            built = self._build_stages(seed, run, stages)
            self._check(run, built, PREPARE_SEED, target="reference")
        except StageFailed as failure:
            raise RuntimeError(
                f"the task's reference kernel cannot be vetted: {failure.feedback}"
            ) from None

    # -- the cascade ----------------------------------------------------------------------

    def _build_stages(self, program: Program, run: Runner, stages: list[StageResult]) -> Built:
        toolchain, _ = self._found()
        with stage(stages, "static"):
            static_check(program, fp32=self.fp32)
        with stage(stages, "build") as building:
            built, building.feedback = build(
                run,
                program,
                toolchain,
                self.arch,
                self.params.nvcc_flags,
                self.harness,
                self.params.entry,
                fp32=self.fp32,
            )
            building.metrics = built.metrics()
        return built

    def _cascade(self, program: Program, run: Runner, seed: int) -> EvalResult:
        _, gpu = self._found()
        stages: list[StageResult] = []
        found: dict[str, Counter] = {}
        with suppress(StageFailed):
            built = self._build_stages(program, run, stages)
            if not gpu.present:
                result = EvalResult.from_stages(stages, sandbox=run.summary())
                result.status = ERROR
                result.feedback += f"\n\nno CUDA GPU ({gpu.detail}): {GPU_STAGES} need one"
                return result
            with stage(stages, "check") as checking:
                checking.feedback = self._check(run, built, seed, target="candidate")
                checking.metrics = {"correct": 1.0}
            with stage(stages, "time") as timed:
                timed.metrics, timed.feedback = self._time(run, built, seed)
            if self.ncu is not None:
                with stage(stages, "counters") as counting:
                    found, counting.feedback = self._count(run, built, seed)
        return EvalResult.from_stages(stages, counters=found, sandbox=run.summary())

    def _rounds(self, seed: int) -> list[Round]:
        shapes = self.params.shapes
        return [
            self.problem.make_round(seed, index, shapes[index % len(shapes)])
            for index in range(self.params.rounds)
        ]

    def _timing_sets(self, seed: int) -> list[Round]:
        shape = self.params.timing_shape
        return [
            self.problem.make_round(seed, TIMING_ROUND_BASE + k, shape)
            for k in range(self.params.timing_sets)
        ]

    def _judge_all(self, rounds: list[Round], files: Mapping[str, bytes]) -> str | None:
        for k, round_ in enumerate(rounds):
            problem = judge(
                round_, files.get(f"out_{k}.bin"), files.get(f"back_{k}.bin"), self.tolerance
            )
            if problem:
                return problem
        return None

    def _check(self, run: Runner, built: Built, seed: int, *, target: str) -> str:
        rounds = self._rounds(seed)
        files = {**encode(rounds, self.params.dims), "runner": built.runner}
        result = run(["./runner", "check", target], files, collect=outputs(len(rounds)))
        require_ok(result, f"the runner ({target})")
        problem = self._judge_all(rounds, result.files)
        if problem:
            raise StageFailed(problem)
        shapes = len({tuple(r.dims.values()) for r in rounds})
        return f"{len(rounds)} rounds over {shapes} shapes (randn and uniform(-8, 8)) all correct"

    def _time(self, run: Runner, built: Built, seed: int) -> tuple[dict[str, float], str]:
        sets = self._timing_sets(seed)
        rng = np.random.default_rng([seed, TIMING_ROUND_BASE])
        reps = int(rng.integers(self.params.min_reps, self.params.max_reps + 1))
        files = {**encode(sets, self.params.dims), "runner": built.runner}
        argv = ["./runner", "time", str(self.params.warmup), str(reps), str(seed)]
        result = run(argv, files, collect=[*outputs(len(sets)), "times.txt", "device.txt"])
        require_ok(result, "the timed runner")
        problem = self._judge_all(sets, result.files)
        if problem:
            raise StageFailed(f"a timed call's output is wrong: {problem}")
        table = timing.parse_times(result.files.get("times.txt"), reps, len(sets))
        device = timing.parse_device(result.files.get("device.txt"))
        shape = self.params.timing_shape
        floor = timing.roofline_ms(
            self.problem.flops(shape),
            self.problem.bytes_moved(shape),
            device,
            self.params.peak_gflops,
            self.params.peak_gbps,
        )
        verdict = timing.assess(
            table,
            floor_ms=floor,
            speedup_flag=self.params.speedup_flag,
            outside_wall_s=result.wall_s,
        )
        clock_metrics, clock_line = clocks.read(run)
        m = verdict.metrics
        lines = [
            f"{device.get('name', 'GPU')}, shape {shape}, {reps} reps after {self.params.warmup} "
            f"warm-up, L2 flushed: {m['time_ms']:.4f} ms (p10 {m['time_p10_ms']:.4f}, p90 "
            f"{m['time_p90_ms']:.4f}) vs reference {m['ref_time_ms']:.4f} ms: speedup "
            f"{m['speedup']:.2f}x",
            clock_line,
            *flag_lines(verdict.flags),
        ]
        return {**m, **clock_metrics}, "\n".join(lines)

    def _count(self, run: Runner, built: Built, seed: int) -> tuple[dict[str, Counter], str]:
        if self.ncu is None:
            raise RuntimeError("cuda_kernel: the counters stage runs only once prepare found ncu")
        sets = self._timing_sets(seed)[:1]
        files = {**encode(sets, self.params.dims), "runner": built.runner}
        return counters.count(
            run,
            self.ncu,
            files,
            outputs(1),
            lambda got: self._judge_all(sets, got),
            self.params.counter_timeout_s,
        )
