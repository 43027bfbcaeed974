"""The cuda_kernel evaluator: static rules, real nvcc, the host-side verifier, timing logic.

Everything but the GPU is real: nvcc (from PATH or the nvidia-cuda-nvcc wheel), the process
sandbox, the four tasks. Tests that need a GPU are marked `gpu` and skip, saying why, on
machines without one; on CPU-only CI the compile-and-verify half of the protocol runs.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from evolve.evaluators.cuda_kernel import CudaKernelEvaluator
from evolve.evaluators.cuda_kernel.build import compile_candidate, vet_object
from evolve.evaluators.cuda_kernel.problem import Round
from evolve.evaluators.cuda_kernel.rules import check_source, check_symbols, foreign_definitions
from evolve.evaluators.cuda_kernel.toolchain import ToolchainMissing
from evolve.plugin.program import Program
from evolve.plugin.stages import Runner, StageFailed
from evolve.sandboxes.process import ProcessSandbox
from evolve.task.schema import TaskSpec

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("cuda_softmax", "cuda_layernorm", "cuda_matmul", "cuda_gelu")
ADVERSARIAL = Path(__file__).with_name("cuda_adversarial")
EXPECTATION = re.compile(r"^// (?P<stage>static|build|check): (?P<text>.+)$")


def expectation(path: Path) -> tuple[str, str]:
    match = EXPECTATION.match(path.read_text().splitlines()[0])
    assert match, f"{path.name} must start with `// static|build|check: ...`"
    return match["stage"], match["text"]


def adversarial(stage: str) -> list[Path]:
    return [p for p in sorted(ADVERSARIAL.glob("*.cu")) if expectation(p)[0] == stage]


def load_task(name: str) -> tuple[TaskSpec, Program]:
    folder = ROOT / "tasks" / name
    spec = TaskSpec.model_validate(yaml.safe_load((folder / "task.yaml").read_text()))
    return spec, Program.from_paths([folder / path for path in spec.seed], folder)


def make_evaluator(name: str) -> CudaKernelEvaluator:
    spec, _ = load_task(name)
    evaluator = CudaKernelEvaluator(spec.evaluator.params, ROOT / "tasks" / name)
    evaluator.limits = spec.sandbox.limits()
    return evaluator


def as_candidate(path: Path) -> Program:
    return Program({"kernel.cu": path.read_text()})


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="module")
def softmax(sandbox: ProcessSandbox) -> CudaKernelEvaluator:
    """The softmax evaluator, toolchain found, GPU probed and harness compiled: once."""
    evaluator = make_evaluator("cuda_softmax")
    try:
        evaluator._set_up(Runner(sandbox, evaluator.limits))
    except ToolchainMissing as exc:
        pytest.fail(f"these tests need real nvcc: {exc}")
    return evaluator


@pytest.fixture(scope="module")
def gpu_softmax(softmax: CudaKernelEvaluator, sandbox: ProcessSandbox) -> CudaKernelEvaluator:
    assert softmax.gpu is not None
    if not softmax.gpu.present:
        pytest.skip(f"no CUDA GPU is usable here: {softmax.gpu.detail}")
    _, seed = load_task("cuda_softmax")
    softmax.prepare(seed, sandbox, ROOT)
    return softmax


# -- static rules, on the adversarial folder and on clean sources -------------------------


@pytest.mark.parametrize("path", adversarial("static"), ids=lambda p: p.stem)
def test_each_adversarial_source_breaks_its_named_rule(path: Path) -> None:
    _, rule = expectation(path)
    assert rule in {v.rule for v in check_source(path.read_text(), fp32=True)}


@pytest.mark.parametrize("path", adversarial("static"), ids=lambda p: p.stem)
def test_a_static_rejection_names_the_rule_before_any_compile(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox, path: Path
) -> None:
    _, rule = expectation(path)
    result = softmax.evaluate(as_candidate(path), sandbox, seed=1)
    assert result.status == "static_failed"
    assert f"[{rule}]" in result.feedback and "line " in result.feedback
    assert [s.name for s in result.stages] == ["static"]
    assert result.sandbox["runs"] == 0


@pytest.mark.parametrize("task", TASKS)
def test_every_task_seed_breaks_no_rule(task: str) -> None:
    _, seed = load_task(task)
    assert check_source(seed.files[seed.main_file], fp32=True) == []


def test_rules_ignore_comments_but_not_code() -> None:
    quiet = "// never cudaStreamCreate or getenv here\n/* cudaEventRecord */\nint x;"
    assert check_source(quiet, fp32=True) == []
    (loud,) = check_source('int a;\nint s = getenv("X") != 0;', fp32=True)
    assert (loud.rule, loud.line, loud.text) == ("file-env", 2, "getenv")


def test_half_precision_is_a_downcast_only_in_fp32_tasks() -> None:
    source = "#include <cuda_fp16.h>\n__half h;"
    assert {v.rule for v in check_source(source, fp32=True)} == {"downcast"}
    assert check_source(source, fp32=False) == []


def test_token_pasting_and_explicit_streams_are_rejected() -> None:
    pasted = "#define S(x) cudaStream##x\n"
    assert {v.rule for v in check_source(pasted, fp32=True)} == {"token-pasting"}
    assert check_source("k<<<g, b, 0, 0>>>(x);", fp32=True) == []
    launch = check_source("k<<<g, b, 0, mine>>>(x);", fp32=True)
    assert [v.rule for v in launch] == ["side-stream"]


def test_symbol_rules_catch_calls_however_they_were_spelled() -> None:
    broken = check_symbols(["fopen", "cudaEventRecord", "cudaMalloc", "memcpy"], fp32=True)
    assert {(v.rule, v.text) for v in broken} == {
        ("file-env", "fopen"),
        ("timer", "cudaEventRecord"),
    }
    defined = ["softmax", "_Z4workPKfPfii", "cudaEventElapsedTime", "_Znwm", "main"]
    assert foreign_definitions(defined, "softmax") == ["_Znwm", "cudaEventElapsedTime", "main"]


# -- the compile stage, with real nvcc ----------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_every_task_seed_compiles_and_reports_registers(task: str, sandbox: ProcessSandbox) -> None:
    evaluator = make_evaluator(task)
    _, seed = load_task(task)
    result = evaluator.evaluate(seed, sandbox, seed=1)
    assert [s.name for s in result.stages[:2]] == ["static", "build"]
    assert all(s.ok for s in result.stages[:2]), result.feedback
    assert result.metrics["registers"] > 0 and result.metrics["spill_bytes"] == 0
    assert "registers" in result.stages[1].feedback
    if not evaluator.gpu or not evaluator.gpu.present:
        assert result.status == "error" and "no CUDA GPU" in result.feedback


def test_a_compile_error_is_build_failed_with_nvccs_message(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    broken = Program(
        {"kernel.cu": "// EVOLVE-BLOCK-START\nextern \"C\" void softmax() { oops }\n"
         "// EVOLVE-BLOCK-END\n"}
    )  # fmt: skip
    result = softmax.evaluate(broken, sandbox, seed=1)
    assert result.status == "build_failed"
    assert "error" in result.feedback and "kernel.cu" in result.feedback


def test_a_missing_entry_point_is_build_failed(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    body = "// EVOLVE-BLOCK-START\nvoid softmax_in_cxx() {}\n// EVOLVE-BLOCK-END\n"
    result = softmax.evaluate(Program({"kernel.cu": body}), sandbox, seed=1)
    assert result.status == "build_failed" and "does not define" in result.feedback


@pytest.mark.parametrize("path", adversarial("build"), ids=lambda p: p.stem)
def test_a_candidate_defining_runner_symbols_is_build_failed(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox, path: Path
) -> None:
    _, text = expectation(path)
    result = softmax.evaluate(as_candidate(path), sandbox, seed=1)
    assert result.status == "build_failed"
    assert text in result.feedback and "evolve_reference" in result.feedback


def test_the_object_check_catches_calls_the_source_check_never_saw(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    """Compiled without the static stage: the object's symbols still give the call away."""
    sneaky = Program({"kernel.cu": (ADVERSARIAL / "file_env.cu").read_text()})
    run = Runner(sandbox, softmax.limits)
    assert softmax.toolchain is not None
    obj, _ = compile_candidate(run, sneaky, softmax.toolchain, softmax.arch, ["-O3"])
    with pytest.raises(StageFailed, match=r"\[file-env\] compiled object calls.*fopen"):
        vet_object(run, obj, "softmax", fp32=True)


@pytest.mark.parametrize("path", adversarial("check"), ids=lambda p: p.stem)
def test_runtime_cheats_pass_the_static_and_build_stages(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox, path: Path
) -> None:
    """These can only be caught by running them: the GPU tests below do."""
    result = softmax.evaluate(as_candidate(path), sandbox, seed=1)
    assert [s.ok for s in result.stages[:2]] == [True, True], result.feedback


def test_without_a_gpu_prepare_stops_with_one_clear_message(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    assert softmax.gpu is not None
    if softmax.gpu.present:
        pytest.skip("a GPU is present: prepare goes on to vet the seed")
    fresh = pickle.loads(pickle.dumps(softmax))
    _, seed = load_task("cuda_softmax")
    with pytest.raises(RuntimeError) as raised:
        fresh.prepare(seed, sandbox, ROOT)
    message = str(raised.value)
    assert message.startswith("cuda_kernel needs a CUDA GPU")
    assert "static passed" in message and "build passed" in message
    assert "Needs a GPU: the correctness rounds, timing and counters" in message


def test_evolve_run_without_a_gpu_stops_before_evolving(
    softmax: CudaKernelEvaluator, tmp_path: Path
) -> None:
    assert softmax.gpu is not None
    if softmax.gpu.present:
        pytest.skip("a GPU is present: the run would evolve")
    task = ROOT / "tasks" / "cuda_softmax" / "task.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "evolve", "run", str(task), "--workers", "1", "--plain"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1
    assert "cuda_kernel needs a CUDA GPU" in done.stderr
    assert "Could run here: static checks" in done.stderr
    assert "Nothing was evolved" in done.stdout and "--resume" not in done.stdout


def test_nvcc_is_found_and_named_by_its_release(softmax: CudaKernelEvaluator) -> None:
    assert softmax.toolchain is not None
    assert "release" in softmax.toolchain.version


def test_bad_params_fail_at_construction() -> None:
    spec, _ = load_task("cuda_softmax")
    params = dict(spec.evaluator.params)
    folder = ROOT / "tasks" / "cuda_softmax"
    with pytest.raises(ValidationError, match="rounds"):
        CudaKernelEvaluator({**params, "rounds": 4}, folder)
    with pytest.raises(ValidationError, match="shapes"):
        CudaKernelEvaluator({**params, "shapes": params["shapes"][:2]}, folder)
    with pytest.raises(ValidationError, match="exactly the dims"):
        CudaKernelEvaluator({**params, "timing_shape": {"rows": 4}}, folder)
    with pytest.raises(ValueError, match=r"nowhere\.cu"):
        CudaKernelEvaluator({**params, "reference_kernel": "nowhere.cu"}, folder)


# -- GPU: the full protocol ---------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_the_seed_runs_every_stage_with_honest_metrics(
    gpu_softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    _, seed = load_task("cuda_softmax")
    result = gpu_softmax.evaluate(seed, sandbox, seed=7)
    assert result.status == "ok", result.feedback
    assert [s.name for s in result.stages][:4] == ["static", "build", "check", "time"]
    for key in ("correct", "speedup", "time_ms", "time_p10_ms", "time_p90_ms", "ref_time_ms"):
        assert key in result.metrics
    assert result.metrics["time_p10_ms"] <= result.metrics["time_ms"]
    assert result.metrics["time_ms"] <= result.metrics["time_p90_ms"]
    assert {"fast_1", "fast_1.5", "fast_2"} <= set(result.metrics)
    assert 20 <= result.metrics["reps"] <= 40


@pytest.mark.gpu
@pytest.mark.parametrize("path", adversarial("check"), ids=lambda p: p.stem)
def test_gpu_runtime_cheats_are_check_failed(
    gpu_softmax: CudaKernelEvaluator, sandbox: ProcessSandbox, path: Path
) -> None:
    _, text = expectation(path)
    result = gpu_softmax.evaluate(as_candidate(path), sandbox, seed=3)
    assert result.status == "check_failed"
    assert text in result.feedback


@pytest.mark.gpu
def test_gpu_counters_come_from_ncu_or_say_why_not(
    gpu_softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    _, seed = load_task("cuda_softmax")
    result = gpu_softmax.evaluate(seed, sandbox, seed=11)
    assert result.status == "ok", result.feedback
    if gpu_softmax.ncu is None:
        pytest.skip("ncu is not installed: the counters stage is off")
    feedback = result.stages[-1].feedback
    assert feedback.startswith(("counters (ncu", "no counters"))
    if result.counters:
        assert {c.source for c in result.counters.values()} == {"ncu"}
        assert result.counters["duration_ns"].value > 0


def test_a_round_never_repeats_its_inputs() -> None:
    evaluator = make_evaluator("cuda_softmax")
    first: Round = evaluator.problem.make_round(1, 0, {"rows": 4, "cols": 8})
    again = evaluator.problem.make_round(1, 0, {"rows": 4, "cols": 8})
    other = evaluator.problem.make_round(2, 0, {"rows": 4, "cols": 8})
    assert np.array_equal(first.inputs[0], again.inputs[0])
    assert not np.array_equal(first.inputs[0], other.inputs[0])


def test_an_agents_draft_gets_static_and_build_feedback_without_timing(
    softmax: CudaKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    seed = Program({"seed.cu": (ROOT / "tasks" / "cuda_softmax" / "seed.cu").read_text()})
    drafted = softmax.draft(seed, sandbox, seed=3)
    assert [s.name for s in drafted.stages][:2] == ["static", "build"]
    assert "time" not in [s.name for s in drafted.stages]
    assert drafted.stages[1].ok and "registers" in drafted.stages[1].feedback
    side_stream = Program({"seed.cu": seed.files["seed.cu"].replace(
        "// EVOLVE-BLOCK-END", "static cudaStream_t s; void f() { cudaStreamCreate(&s); }\n"
        "// EVOLVE-BLOCK-END")})  # fmt: skip
    refused = softmax.draft(side_stream, sandbox, seed=3)
    assert refused.status == "static_failed" and "side-stream" in refused.feedback
