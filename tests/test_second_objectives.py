"""The second objectives of the shipped tasks: c_kernel's `code_bytes` (machine code of the
candidate's object, read from its ELF section headers), and the weights that keep it and
llvm_inline's `compile_s` (tested in test_llvm_inline.py) below the first objective.
Real gcc and the process sandbox."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from evolve.engine.scoring import score
from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.evaluators.c_kernel.build import compile_object
from evolve.evaluators.c_kernel.code_size import code_bytes
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.plugin.stages import Runner, StageFailed
from evolve.sandboxes import ProcessSandbox
from evolve.task.loading import load_task
from evolve.task.schema import TaskSpec
from tests.conftest import c_kernel_task, draft_kernel

TASKS = Path(__file__).resolve().parent.parent / "tasks"

SCALE_REFERENCE = """
import numpy as np

def make_inputs(rng, sizes):
    return [rng.uniform(-1, 1, sizes["n"]).astype(np.float32)]

def reference(inputs, sizes):
    return 2 * inputs[0]
"""
SCALE = {
    "entry": "scale",
    "signature": "void scale(int n, const float *x, float *y)",
    "inputs": [{"name": "x", "dtype": "float32"}],
    "outputs": [{"name": "y", "dtype": "float32"}],
    "sizes": {"n": 64},
}
LOOP = (
    "void scale(int n, const float *x, float *y) {\n"
    "  for (int i = 0; i < n; i++) y[i] = 2 * x[i];\n}"
)
UNROLLED = (
    "void scale(int n, const float *x, float *y) {\n  int i = 0;\n"
    "  for (; i + 16 <= n; i += 16) {\n"
    + "".join(f"    y[i + {k}] = 2 * x[i + {k}];\n" for k in range(16))
    + "  }\n  for (; i < n; i++) y[i] = 2 * x[i];\n}"
)
# The loop's code in a section not named .text: it counts all the same.
HIDDEN = (
    '__attribute__((section("hot"), noinline)) static void twice(int n, const float *x, '
    "float *y) { for (int i = 0; i < n; i++) y[i] = 2 * x[i]; }\n"
    "void scale(int n, const float *x, float *y) { twice(n, x, y); }"
)
# A `readelf -SW` row: [Nr] Name Type Address Off Size ES Flg Lk Inf Al
READELF_SECTION = re.compile(
    r"\]\s+(?P<name>\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+(?P<size>[0-9a-f]+)\s+[0-9a-f]+"
    r"\s+(?P<flags>[A-Za-z]*)\s+\d+\s+\d+\s+\d+$",
    re.MULTILINE,
)


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture
def scale_task(tmp_path: Path) -> CKernelEvaluator:
    return c_kernel_task(tmp_path, SCALE_REFERENCE, SCALE)


def test_a_built_kernel_reports_its_code_bytes_and_more_code_reports_more(
    scale_task: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    plain = draft_kernel(scale_task, sandbox, LOOP)
    unrolled = draft_kernel(scale_task, sandbox, UNROLLED)
    assert plain.ok and unrolled.ok, plain.feedback + unrolled.feedback
    assert plain.metrics["code_bytes"] > 0
    assert unrolled.metrics["code_bytes"] > plain.metrics["code_bytes"]
    assert f"code_bytes {plain.metrics['code_bytes']:.0f}" in plain.feedback
    assert scale_task.metric_problem("code_bytes") is None


def test_code_in_a_section_of_another_name_is_counted(
    scale_task: CKernelEvaluator, sandbox: ProcessSandbox
) -> None:
    hidden = draft_kernel(scale_task, sandbox, HIDDEN)
    assert hidden.ok, hidden.feedback
    plain = draft_kernel(scale_task, sandbox, LOOP)
    assert hidden.metrics["code_bytes"] >= plain.metrics["code_bytes"]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf")
def test_code_bytes_agree_with_readelf_and_a_cut_object_fails(
    scale_task: CKernelEvaluator, sandbox: ProcessSandbox, tmp_path: Path
) -> None:
    program = Program({"kernel.c": f"// EVOLVE-BLOCK-START\n{HIDDEN}\n// EVOLVE-BLOCK-END\n"})
    run = Runner(sandbox, Limits())
    obj = compile_object(run, program, scale_task.params, scale_task.harness)
    (tmp_path / "candidate.o").write_bytes(obj)
    listing = subprocess.run(
        ["readelf", "-SW", str(tmp_path / "candidate.o")], capture_output=True, text=True
    ).stdout
    sections = [match.groupdict() for match in READELF_SECTION.finditer(listing)]
    executable = [int(s["size"], 16) for s in sections if "X" in s["flags"]]
    assert len(executable) == 2, listing  # .text and hot
    assert code_bytes(obj) == sum(executable)
    with pytest.raises(StageFailed, match="section headers run past its end"):
        code_bytes(obj[: len(obj) - 8])
    with pytest.raises(StageFailed, match="not an ELF file"):
        code_bytes(b"#!/bin/sh\n" + obj)


def test_the_matmul_pareto_task_scores_speed_first_and_code_size_second() -> None:
    for path in (TASKS / "matmul_c" / "pareto.yaml",):
        task = load_task(path)
        objectives = {o.name: o for o in task.spec.objectives}
        assert set(objectives) == {"speedup", "code_bytes"}
        assert objectives["code_bytes"].direction == "minimize"
        # 1000 bytes more machine code cost at most a tenth of the seed's own speed.
        bigger = score({"speedup": 1.0, "code_bytes": 1000.0}, task.spec.objectives)
        smaller = score({"speedup": 1.0, "code_bytes": 0.0}, task.spec.objectives)
        assert smaller is not None and bigger is not None and 0 < smaller - bigger <= 0.1
    assert load_task(TASKS / "matmul_c" / "pareto.yaml").spec.search.strategy == "pareto"


@pytest.mark.parametrize("folder", ["llvm_inline_size", "llvm_inline_size_cpp"])
def test_the_inlining_pareto_tasks_rank_size_first_and_compile_time_second(folder: str) -> None:
    for name in ("pareto.yaml",):
        spec = TaskSpec.model_validate(yaml.safe_load((TASKS / folder / name).read_text()))
        objectives = {o.name: o for o in spec.objectives}
        assert [o.direction for o in objectives.values()] == ["minimize", "minimize"]
        # One CPU second of compile weighs less than 0.09% of size: less than the offline
        # run of docs/benchmarks.md gained over its seed (0.2% at -Oz, on training).
        slower = score({"size_ratio": 1.0, "compile_s": 1.0}, spec.objectives)
        faster = score({"size_ratio": 1.0, "compile_s": 0.0}, spec.objectives)
        assert slower is not None and faster is not None and 0 < faster - slower < 0.0009
    pareto = yaml.safe_load((TASKS / folder / "pareto.yaml").read_text())
    assert pareto["search"]["strategy"] == "pareto"
