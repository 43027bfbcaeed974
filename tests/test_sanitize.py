"""The c_kernel sanitize stage with real gcc (and clang-19 where present), the real process
sandbox and, where available, the Docker sandbox; the real matmul_c task at n=32 or 64.

The failing candidates either pass the ordinary check, so that only the sanitizers can stop
them, or are handed to the stage directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.evaluators.c_kernel.check import check_argv
from evolve.evaluators.c_kernel.oracle import SANITIZED, Trial
from evolve.evaluators.c_kernel.sanitize import (
    ADDRESS_UNDEFINED,
    MemorySupport,
    memory_support,
    options_source,
    sanitize,
    sanitized_build,
)
from evolve.evaluators.c_kernel.sanitizer_report import REPORT_CHARS, TRIMMED, trim_report
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.stages import Runner, StageFailed
from evolve.sandboxes import DockerSandbox, ProcessSandbox
from evolve.sandboxes.docker import docker_available
from evolve.task.schema import TaskSpec

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "matmul_c"
SIGNATURE = (
    "void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C)"
)


def kernel(*, before: str = "", inner: str = "", after: str = "", prelude: str = "") -> str:
    """A correct naive matmul with hooks for a bug: code before, inside and after the loops."""
    return f"""{prelude}
{SIGNATURE} {{
  {before}
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {{
      float sum = 0.0f;
      for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
      {inner}
      C[i * n + j] = sum;
    }}
  {after}
}}"""


def candidate(body: str, flags: str = "-O2") -> Program:
    return Program(
        {"kernel.c": f"// EVOLVE-BLOCK-START\n// cflags: {flags}\n{body}\n// EVOLVE-BLOCK-END\n"}
    )


def line_of(program: Program, needle: str) -> int:
    lines = program.files["kernel.c"].splitlines()
    return next(number for number, line in enumerate(lines, 1) if needle in line)


# B[n * n] is one float past the inputs, which the driver allocates exactly (8 KiB at n=32):
# the read lands in ASan's redzone, and multiplied by zero it leaves the answer right.
OUT_OF_BOUNDS = "sum += 0.0f * B[n * n];"
SIGNED_OVERFLOW = "int scaled = n * 0x7fffffff; if (scaled == 12345) C[0] = 0.0f;"
UNINITIALISED = (
    "float *pad = malloc(sizeof(float) * (n + 1));\n"
    "  for (int j = 0; j < n; j++) pad[j] = 0.0f;\n"
    "  if (pad[n] > 1e30f) C[0] += 0.0f;\n"
    "  free(pad);"
)


@pytest.fixture(scope="module")
def spec() -> TaskSpec:
    return TaskSpec.model_validate(yaml.safe_load((TASK_DIR / "task.yaml").read_text()))


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def make_evaluator(spec: TaskSpec, **overrides: Any) -> CKernelEvaluator:
    params = {**spec.evaluator.params, "sizes": {"n": 32}, "counters": False, **overrides}
    evaluator = CKernelEvaluator(params, TASK_DIR)
    evaluator.limits = spec.sandbox.limits()
    return evaluator


@pytest.fixture(scope="module")
def small(spec: TaskSpec) -> CKernelEvaluator:
    return make_evaluator(spec)


@pytest.fixture(scope="module")
def msan(sandbox: ProcessSandbox) -> MemorySupport:
    """What the stage itself finds: skips when MemorySanitizer cannot run here, and why."""
    support = memory_support(sandbox, Limits(address_space_bytes=0))
    if support.symbolizer is None:
        pytest.skip(f"MemorySanitizer does not run here: {support.why_not}")
    return support


def trial(evaluator: CKernelEvaluator) -> Trial:
    """Inputs as the stage draws them, for calling `sanitize` without the check before it."""
    sizes = evaluator.params.sizes
    return evaluator.oracle.trial((1, SANITIZED, 0), sizes)


def stage_names(result: EvalResult) -> list[str]:
    return [stage.name for stage in result.stages]


def test_the_task_turns_the_stage_on_and_other_tasks_leave_it_off(spec: TaskSpec) -> None:
    assert spec.evaluator.params["sanitize"] is True
    assert make_evaluator(spec, sanitize=False).params.sanitize is False
    params = {k: v for k, v in spec.evaluator.params.items() if k != "sanitize"}
    assert CKernelEvaluator(params, TASK_DIR).params.sanitize is False


def test_an_out_of_bounds_read_that_passes_the_check_fails_with_file_and_line(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    program = candidate(kernel(inner=OUT_OF_BOUNDS))
    result = small.draft(program, sandbox, seed=1)
    assert result.status == "sanitize_failed", result.feedback
    assert stage_names(result) == ["build", "check", "sanitize"]
    assert result.stages[1].ok
    feedback = result.stages[-1].feedback
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in feedback
    assert f"matmul kernel.c:{line_of(program, OUT_OF_BOUNDS)}" in feedback
    assert "SUMMARY: AddressSanitizer" in feedback
    assert "Shadow bytes" not in feedback and "==" not in feedback


def test_signed_overflow_fails_with_the_runtime_error(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    program = candidate(kernel(before=SIGNED_OVERFLOW))
    result = small.draft(program, sandbox, seed=1)
    assert result.status == "sanitize_failed", result.feedback
    feedback = result.stages[-1].feedback
    assert "runtime error: signed integer overflow" in feedback
    assert f"kernel.c:{line_of(program, SIGNED_OVERFLOW)}" in feedback


@pytest.mark.usefixtures("msan")
def test_a_read_of_uninitialised_memory_fails_under_memory_sanitizer(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    program = candidate(kernel(prelude="#include <stdlib.h>", before=UNINITIALISED))
    result = small.draft(program, sandbox, seed=1)
    assert result.status == "sanitize_failed", result.feedback
    feedback = result.stages[-1].feedback
    assert "-fsanitize=memory" in feedback
    assert "MemorySanitizer: use-of-uninitialized-value" in feedback
    assert f"matmul kernel.c:{line_of(program, 'pad[n] > 1e30f')}" in feedback
    assert "created by a heap allocation" in feedback  # origins: where the memory came from


@pytest.mark.usefixtures("msan")
def test_a_candidate_clang_cannot_build_passes_and_says_memory_did_not_run(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    nested = f"""{SIGNATURE} {{
  float dot(int i, int j) {{  /* a GNU C nested function: gcc only */
    float sum = 0.0f;
    for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
    return sum;
  }}
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) C[i * n + j] = dot(i, j);
}}"""
    result = small.draft(candidate(nested), sandbox, seed=1)
    assert result.status == "ok", result.feedback
    assert "memory not run: clang-19 could not build the candidate" in result.feedback


def test_the_seed_passes_and_the_stage_sits_between_check_and_measure(
    spec: TaskSpec, sandbox: ProcessSandbox
) -> None:
    evaluator = make_evaluator(spec, sizes={"n": 64})
    seed = Program.from_paths([TASK_DIR / path for path in spec.seed], TASK_DIR)
    evaluator.prepare(seed, sandbox, TASK_DIR)
    result = evaluator.evaluate(seed, sandbox, seed=2)
    assert result.status == "ok", result.feedback
    assert stage_names(result) == ["build", "check", "sanitize", "measure"]
    support = memory_support(sandbox, Limits(address_space_bytes=0))
    clean = "and memory clean" if support.symbolizer else f"memory not run: {support.why_not}"
    assert result.stages[2].feedback.startswith("sanitizers: address, undefined")
    assert clean in result.stages[2].feedback


def test_a_correct_tiled_candidate_at_fast_math_flags_passes(
    small: CKernelEvaluator, sandbox: ProcessSandbox, spec: TaskSpec
) -> None:
    seed = (TASK_DIR / spec.seed[0]).read_text()
    tiled = (
        seed.replace("TILE_I 512", "TILE_I 12")
        .replace("TILE_J 512", "TILE_J 20")
        .replace("TILE_K 512", "TILE_K 7")
        .replace("LOOP_ORDER IJK", "LOOP_ORDER KIJ")
        .replace("// cflags: -O2 ", "// cflags: -Ofast -march=native -funroll-loops ")
    )
    result = small.draft(Program({"kernel.c": tiled}), sandbox, seed=4)
    assert result.status == "ok", result.feedback
    assert stage_names(result) == ["build", "check", "sanitize"]


def test_the_stage_is_absent_when_the_task_leaves_it_off(
    spec: TaskSpec, sandbox: ProcessSandbox
) -> None:
    evaluator = make_evaluator(spec, sanitize=False)
    result = evaluator.draft(candidate(kernel(inner=OUT_OF_BOUNDS)), sandbox, seed=1)
    assert result.status == "ok", result.feedback
    assert stage_names(result) == ["build", "check"]


def test_source_that_opts_out_of_the_sanitizers_is_refused(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    opted = kernel(inner=OUT_OF_BOUNDS).replace(
        "void matmul", "__attribute__((no_sanitize_address)) void matmul"
    )
    result = small.draft(candidate(opted), sandbox, seed=1)
    assert result.status == "sanitize_failed"
    assert "no_sanitize_address" in result.feedback


def test_a_wrong_answer_under_the_sanitizers_fails_too(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    """Called without the check before it, the stage compares the sanitized build's answer."""
    wrong = candidate(kernel(after="C[0] += 1.0f;"))
    run = Runner(sandbox, small.limits)
    with pytest.raises(StageFailed, match="gave a wrong answer on fresh inputs: 1 of 1024"):
        sanitize(run, wrong, small.params, small.harness, trial(small))


def test_the_compiled_in_rss_cap_stops_a_hog_that_the_address_space_limit_no_longer_does(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    hog = kernel(
        prelude="#include <stdlib.h>\n#include <string.h>",
        before="for (int i = 0; i < 64; i++) memset(malloc(16 << 20), 1, 16 << 20);",
    )
    run = Runner(sandbox, replace(small.limits, memory_bytes=256 * 1024**2))
    with pytest.raises(StageFailed, match="hard rss limit exhausted"):
        sanitize(run, candidate(hog), small.params, small.harness, trial(small))


def test_a_raw_report_is_trimmed_to_its_limit_keeping_the_error_and_summary(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    program = candidate(kernel(inner=OUT_OF_BOUNDS))
    run = Runner(sandbox, small.limits)
    options = options_source(ADDRESS_UNDEFINED, small.limits.memory_bytes, None)
    binary = sanitized_build(run, program, small.params, small.harness, ADDRESS_UNDEFINED, options)
    inputs = trial(small)
    argv = check_argv(inputs, small.params, small.params.sizes)
    unlimited = replace(small.limits, address_space_bytes=0)
    raw = sandbox.run(argv, files={"kernel": binary, "inputs.bin": inputs.inputs}, limits=unlimited)
    assert len(raw.stderr) > REPORT_CHARS  # the shadow-memory dump alone is longer

    report = trim_report(raw.stderr)
    assert report is not None and len(report) <= REPORT_CHARS
    assert report.startswith("ERROR: AddressSanitizer: heap-buffer-overflow")
    short = trim_report(raw.stderr, limit=200)
    assert short is not None and len(short) <= 200
    assert TRIMMED in short and short.splitlines()[-1].startswith("SUMMARY: AddressSanitizer")
    assert trim_report(b"just a crash\n") is None


def test_without_an_address_space_limit_asan_starts_and_with_one_it_cannot(
    small: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    program = candidate(kernel())
    run = Runner(sandbox, small.limits)
    options = options_source(ADDRESS_UNDEFINED, small.limits.memory_bytes, None)
    binary = sanitized_build(run, program, small.params, small.harness, ADDRESS_UNDEFINED, options)
    inputs = trial(small)
    argv = check_argv(inputs, small.params, small.params.sizes)
    files = {"kernel": binary, "inputs.bin": inputs.inputs}
    assert not sandbox.run(argv, files=files, limits=small.limits).ok
    assert sandbox.run(argv, files=files, limits=replace(small.limits, address_space_bytes=0)).ok


def address_space(sandbox: Sandbox, limits: Limits) -> str:
    result = sandbox.run(["sh", "-c", "ulimit -v"], files={}, limits=limits)
    assert result.ok, result.stderr
    return result.stdout.decode().strip()


def test_the_address_space_limit_defaults_to_memory_and_zero_lifts_it(
    sandbox: ProcessSandbox,
) -> None:
    memory = Limits(memory_bytes=512 * 1024**2)
    assert address_space(sandbox, memory) == str(512 * 1024)
    assert address_space(sandbox, replace(memory, address_space_bytes=1024**3)) == str(1024**2)
    assert address_space(sandbox, replace(memory, address_space_bytes=0)) == "unlimited"


@pytest.fixture(scope="module")
def docker_sandbox() -> Iterator[DockerSandbox]:
    box = DockerSandbox()
    yield box
    box.close()


@pytest.mark.docker
@pytest.mark.skipif(not docker_available()[0], reason=f"docker: {docker_available()[1]}")
def test_asan_runs_in_the_container_under_the_task_limits(
    spec: TaskSpec, docker_sandbox: DockerSandbox
) -> None:
    evaluator = make_evaluator(spec)
    assert address_space(docker_sandbox, replace(evaluator.limits, address_space_bytes=0)) == (
        "unlimited"
    )
    program = candidate(kernel(inner=OUT_OF_BOUNDS))
    failed = evaluator.draft(program, docker_sandbox, seed=1)
    assert failed.status == "sanitize_failed", failed.feedback
    assert f"matmul kernel.c:{line_of(program, OUT_OF_BOUNDS)}" in failed.feedback

    passed = evaluator.draft(candidate(kernel()), docker_sandbox, seed=1)
    assert passed.status == "ok", passed.feedback
    assert passed.stages[-1].feedback.startswith("sanitizers: address, undefined")
    support = memory_support(docker_sandbox, replace(evaluator.limits, address_space_bytes=0))
    if support.symbolizer is None:  # say why MSan did not run, as the feedback does
        assert support.why_not in passed.stages[-1].feedback
