"""The c_kernel evaluator with real gcc, the real process sandbox and the real matmul_c task.

Most candidates run at n=64 to keep the suite fast; only the seed test uses the task's 512.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.evaluators.c_kernel.measure import summarise
from evolve.evaluators.c_kernel.oracle import CHECK
from evolve.plugin.program import Program
from evolve.sandboxes import ProcessSandbox
from evolve.task.schema import TaskSpec

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "matmul_c"

SIGNATURE = (
    "void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C)"
)


def kernel(*, before: str = "", after: str = "", prelude: str = "") -> str:
    """A correct naive matmul with hooks to break it: code before and after the loops."""
    return f"""{prelude}
{SIGNATURE} {{
  {before}
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {{
      float sum = 0.0f;
      for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
      C[i * n + j] = sum;
    }}
  {after}
}}"""


def candidate(body: str, flags: str = "-O2") -> Program:
    return Program(
        {"kernel.c": f"// EVOLVE-BLOCK-START\n// cflags: {flags}\n{body}\n// EVOLVE-BLOCK-END\n"}
    )


@pytest.fixture(scope="module")
def spec() -> TaskSpec:
    return TaskSpec.model_validate(yaml.safe_load((TASK_DIR / "task.yaml").read_text()))


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def make_evaluator(spec: TaskSpec, **overrides: Any) -> CKernelEvaluator:
    evaluator = CKernelEvaluator({**spec.evaluator.params, **overrides}, TASK_DIR)
    evaluator.limits = spec.sandbox.limits()
    return evaluator


def seed_program(spec: TaskSpec) -> Program:
    return Program.from_paths([TASK_DIR / path for path in spec.seed], TASK_DIR)


@pytest.fixture(scope="module")
def small(spec: TaskSpec, sandbox: ProcessSandbox) -> CKernelEvaluator:
    """Prepared, as every worker's evaluator is: the seed built, to be timed beside."""
    evaluator = make_evaluator(spec, sizes={"n": 64}, counters="never")
    evaluator.prepare(seed_program(spec), sandbox, TASK_DIR)
    return evaluator


def test_the_seed_passes_every_stage_with_metrics(spec: TaskSpec, sandbox: ProcessSandbox) -> None:
    evaluator = make_evaluator(spec, counter_sizes={"n": 128})  # cachegrind takes ~7 s at 512
    seed = seed_program(spec)
    evaluator.prepare(seed, sandbox, TASK_DIR)
    assert evaluator.reference_binary is not None

    result = evaluator.evaluate(seed, sandbox, seed=1)
    assert result.status == "ok", result.feedback
    names = [s.name for s in result.stages]
    assert names[:2] == ["build", "check"] and names[-2:] == ["measure", "counters"]
    assert {"time_s", "time_spread", "gflops", "speedup", "seed_time_s"} <= set(result.metrics)
    assert result.metrics["gflops"] > 0 and result.metrics["time_spread"] >= 0
    assert result.metrics["flagged"] == 0.0
    # Timed beside itself in the same job, the seed is about as fast as itself.
    assert 0.5 < result.metrics["speedup"] < 2.0
    assert "every output checked" in result.feedback
    assert result.sandbox["backend"] == "process"


def test_a_correct_candidate_passes_and_pickles_for_ray(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    shipped = pickle.loads(pickle.dumps(small))
    result = shipped.evaluate(candidate(kernel(), "-O3 -march=native"), sandbox, seed=3)
    assert result.status == "ok", result.feedback
    assert result.metrics["speedup"] > 0 and result.metrics["speedup_spread"] >= 0


@pytest.mark.system
def test_measuring_without_prepare_is_an_evaluator_error(spec: TaskSpec) -> None:
    unprepared = make_evaluator(spec, sizes={"n": 16}, counters="never")
    with pytest.raises(RuntimeError, match="prepare"):
        unprepared.evaluate(candidate(kernel()), ProcessSandbox(), seed=1)


def test_a_compile_error_is_build_failed_with_the_compiler_message(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    result = small.evaluate(candidate(f"{SIGNATURE} {{ return 1 }}"), sandbox, seed=1)
    assert result.status == "build_failed"
    assert "error:" in result.feedback and "kernel.c" in result.feedback


def test_a_disallowed_flag_never_reaches_the_compiler(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    result = small.evaluate(candidate(kernel(), "-O2 -fplugin=x.so"), sandbox, seed=1)
    assert result.status == "build_failed"
    assert "-fplugin=x.so" in result.feedback and "-march=native" in result.feedback
    assert result.sandbox["runs"] == 0


@pytest.mark.parametrize(
    ("prelude", "symbol"),
    [
        ("int helper(void) { return 1; }", "helper"),
        (
            "#include <time.h>\n"
            "int clock_gettime(clockid_t c, struct timespec *t) { t->tv_sec = 0; return 0; }",
            "clock_gettime",
        ),
        ("float scratch[16];", "scratch"),
    ],
)
def test_an_extra_global_symbol_is_build_failed(
    small: CKernelEvaluator, sandbox: ProcessSandbox, prelude: str, symbol: str
) -> None:
    result = small.evaluate(candidate(kernel(prelude=prelude)), sandbox, seed=1)
    assert result.status == "build_failed"
    assert symbol in result.feedback and "static" in result.feedback


def test_a_wrong_value_names_its_row_and_column(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    result = small.evaluate(candidate(kernel(after="C[5 * n + 7] += 1.0f;")), sandbox, seed=1)
    assert result.status == "check_failed"
    assert "row 5, col 7" in result.feedback
    assert "expected" in result.feedback and "got" in result.feedback
    assert "max abs error 1" in result.feedback


def test_nan_output_is_check_failed(small: CKernelEvaluator, sandbox: ProcessSandbox) -> None:
    result = small.evaluate(candidate(kernel(after="C[3] = 0.0f / 0.0f;")), sandbox, seed=1)
    assert result.status == "check_failed"
    assert "NaN" in result.feedback and "row 0, col 3" in result.feedback


def test_all_zero_output_is_check_failed(small: CKernelEvaluator, sandbox: ProcessSandbox) -> None:
    zero = "for (int i = 0; i < n * n; i++) C[i] = 0.0f;"
    result = small.evaluate(candidate(kernel(after=zero)), sandbox, seed=1)
    assert result.status == "check_failed"
    assert "all zeros" in result.feedback


def test_a_hang_is_a_timeout(small: CKernelEvaluator, sandbox: ProcessSandbox) -> None:
    impatient = pickle.loads(pickle.dumps(small))
    impatient.limits = replace(small.limits, timeout_s=2)
    spin = "volatile int spin = 1; while (spin) {}"
    result = impatient.evaluate(candidate(kernel(before=spin)), sandbox, seed=1)
    assert result.status == "timeout"
    (stopped,) = [stage for stage in result.stages if not stage.ok]
    assert re.search(r"its (CPU )?time limit.* 2 s.*\(sandbox\.timeout_s", stopped.feedback)


def test_outputs_past_the_file_size_limit_name_the_limit_and_the_timers_job(
    spec: TaskSpec, sandbox: ProcessSandbox
) -> None:
    """The timer keeps every call's output in one file: 16 calls of 16 KiB at n=64, past a
    200 KiB limit. The trusted timer fails, not the kernel, and the line says which limit
    stopped it, its value, its task key, and what the timer was holding."""
    evaluator = make_evaluator(spec, sizes={"n": 64}, counters="never", sanitize=False)
    evaluator.limits = replace(evaluator.limits, max_file_bytes=200 * 1024)
    evaluator.prepare(seed_program(spec), sandbox, TASK_DIR)
    result = evaluator.evaluate(seed_program(spec), sandbox, seed=1)
    assert result.status == "measure_failed"
    assert result.stages[-1].feedback.splitlines()[0] == (
        "the trusted timer, timing 16 calls (0.5 MB of inputs in, 0.25 MB out): exited with "
        "code 1; its output shows it ran into its file size limit of 204800 bytes per file "
        "(sandbox.max_file_mb)"
    )


def test_a_crash_is_check_failed_with_its_signal(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    crash = "*(volatile float *)0 = 1.0f;"
    result = small.evaluate(candidate(kernel(before=crash)), sandbox, seed=1)
    assert result.status == "check_failed"
    assert "signal 11" in result.feedback


def test_a_kernel_printing_100_mb_does_not_break_the_evaluator(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    flood = (  # 2,000,000 lines of 50 bytes: 100 MB, printed on the first call only
        "static int said; if (!said) { said = 1;"
        " for (long i = 0; i < 2000000; i++) fputs(LINE, stdout); }"
    )
    prelude = (
        '#include <stdio.h>\n#define LINE "0123456789012345678901234567890123456789012345678\\n"'
    )
    result = small.evaluate(candidate(kernel(before=flood, prelude=prelude)), sandbox, seed=1)
    assert result.status == "ok", result.feedback
    assert result.sandbox["output_truncated"] is True


def test_work_skipped_after_the_first_call_fails_measure(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    lazy = "static int calls; if (calls++) return;"
    result = small.evaluate(candidate(kernel(before=lazy)), sandbox, seed=1)
    assert result.status == "measure_failed"
    assert "call 2 of 8" in result.feedback and "fresh inputs" in result.feedback


def test_a_kernel_too_slow_to_win_is_given_up_on_long_before_the_timeout(
    spec: TaskSpec, sandbox: ProcessSandbox
) -> None:
    evaluator = make_evaluator(spec, sizes={"n": 16}, counters="never", give_up_min_s=0.2)
    evaluator.prepare(seed_program(spec), sandbox, TASK_DIR)
    crawl = "static int calls; if (calls++) { struct timespec t = {30, 0}; nanosleep(&t, 0); }"
    program = candidate(kernel(before=crawl, prelude="#include <time.h>"))
    result = evaluator.evaluate(program, sandbox, seed=1)
    assert result.status == "measure_failed"
    assert "gave up" in result.feedback and "seed's" in result.feedback
    assert result.stages[-1].seconds < evaluator.limits.timeout_s / 2


def test_every_seed_draws_fresh_inputs(spec: TaskSpec, sandbox: ProcessSandbox) -> None:
    """A kernel that replays the answer for seed 1's inputs passes seed 1 and fails seed 2."""
    tiny = make_evaluator(spec, sizes={"n": 4})
    answer = tiny.oracle.trial((tiny.salt, 1, CHECK, 0), {"n": 4}).expected[0].values.ravel()
    table = ", ".join(f"{float(x)!r}f" for x in answer)
    body = f"""static const float ANSWER[16] = {{{table}}};
{SIGNATURE} {{
  for (int i = 0; i < n * n; i++) C[i] = ANSWER[i];
}}"""
    replayed = tiny.draft(candidate(body), sandbox, seed=1)
    assert [s.ok for s in replayed.stages[:2]] == [True, True], replayed.feedback
    assert tiny.draft(candidate(body), sandbox, seed=2).status == "check_failed"


def test_two_runs_with_the_same_seed_draw_different_inputs(spec: TaskSpec) -> None:
    """A cache kept between runs (in /dev/shm, say) must not pay off on a rerun."""
    first, second = (make_evaluator(spec, sizes={"n": 8}) for _ in range(2))
    assert first._trial(1, CHECK).inputs == first._trial(1, CHECK).inputs
    assert first._trial(1, CHECK).inputs != second._trial(1, CHECK).inputs


def test_a_broken_seed_stops_the_run_in_prepare(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    fresh = pickle.loads(pickle.dumps(small))
    with pytest.raises(RuntimeError, match="seed program does not build"):
        fresh.prepare(candidate(f"{SIGNATURE} {{ oops }}"), sandbox, TASK_DIR)


def test_bad_params_fail_at_construction(spec: TaskSpec) -> None:
    with pytest.raises(ValidationError, match="repz"):
        make_evaluator(spec, repz=9)
    with pytest.raises(ValidationError, match="reps"):
        make_evaluator(spec, reps=2)
    with pytest.raises(ValidationError, match="default_flags"):
        make_evaluator(spec, default_flags="-O2 -fplugin=x.so")
    with pytest.raises(ValueError, match=r"nowhere\.py"):
        make_evaluator(spec, reference="nowhere.py")


def _call(program: str, pair: int | None, wall: float, cpu: float) -> dict[str, object]:
    return {"program": program, "set": 0, "pair": pair, "seconds": wall, "cpu_seconds": cpu}


def test_a_candidate_waiting_off_the_cpu_is_flagged_and_timed_by_the_wall_clock(
    spec: TaskSpec,
) -> None:
    """CPU time decides one-thread kernels, unless the candidate's calls mostly wait for
    something the seed's do not: work done elsewhere would not show in its CPU time."""
    evaluator = make_evaluator(spec, sizes={"n": 8})
    params, trial = evaluator.params, evaluator.oracle.trial(1, {"n": 8})
    honest = [_call("reference", i, 0.010, 0.009) for i in range(5)]
    busy = {"calls": [*honest, *(_call("candidate", i, 0.005, 0.0045) for i in range(5))]}
    timing = summarise(busy, trial, params)
    assert timing.flags == [] and timing.metrics["time_s"] == 0.0045
    assert timing.metrics["speedup"] == pytest.approx(2.0)
    waiting = {"calls": [*honest, *(_call("candidate", i, 0.008, 0.0005) for i in range(5))]}
    timing = summarise(waiting, trial, params)
    assert len(timing.flags) == 1 and "off the CPU" in timing.flags[0]
    assert timing.metrics["time_s"] == 0.008 and "wall-clock" in timing.lines[0]


def test_a_time_under_the_roofline_is_timed_again_and_flagged(
    spec: TaskSpec, sandbox: ProcessSandbox
) -> None:
    """A task's stated peak that no kernel could respect makes every time impossible."""
    evaluator = make_evaluator(spec, sizes={"n": 16}, counters="never", peak_gflops=1e-6)
    evaluator.prepare(seed_program(spec), sandbox, TASK_DIR)
    result = evaluator.evaluate(candidate(kernel()), sandbox, seed=2)
    assert result.status == "ok", result.feedback
    assert result.metrics["flagged"] == 1.0
    assert result.metrics["roofline_floor_s"] == pytest.approx(2 * 16**3 / 1e3)
    assert "FLAGGED: " in result.feedback and "roofline" in result.feedback
    assert "timed twice on fresh inputs" in result.feedback and "task's peaks" in result.feedback
    assert result.sandbox["runs"] >= 5  # build (3), check, and two timed jobs


def test_a_kernel_that_dies_before_its_first_timed_call_says_so(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    prelude = """#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void leave(void) {
  if (fcntl(5, F_GETFD) != -1) { fputs("leaving early\\n", stderr); exit(3); }
}"""
    result = small.evaluate(candidate(kernel(prelude=prelude)), sandbox, seed=1)
    assert result.status == "measure_failed"
    assert "start-up" in result.feedback and "exited with code 3" in result.feedback
    assert "leaving early" in result.feedback
