"""The c_kernel build's trusted objects (the driver's, the harness's, a variant's own
sources): compiled once per sandbox and build variant, linked with every candidate."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.evaluators.c_kernel.build import PLAIN, CompileFailed, Variant, build
from evolve.evaluators.c_kernel.check import check
from evolve.evaluators.c_kernel.harness_gen import Harness
from evolve.evaluators.c_kernel.oracle import CHECK
from evolve.plugin.knobs import find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.plugin.stages import Runner
from evolve.sandboxes import ProcessSandbox
from evolve.task.schema import TaskSpec

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "matmul_c"
ADDRESS = Variant(flags=("-fsanitize=address", "-fno-sanitize-recover=all"))


@pytest.fixture(scope="module")
def made() -> CKernelEvaluator:
    spec = TaskSpec.model_validate(yaml.safe_load((TASK_DIR / "task.yaml").read_text()))
    params = {**spec.evaluator.params, "sizes": {"n": 64}, "counter_sizes": None}
    evaluator = CKernelEvaluator(params, TASK_DIR)
    evaluator.limits = spec.sandbox.limits()
    return evaluator


def seed() -> Program:
    return Program.from_paths([TASK_DIR / "seed.c"], TASK_DIR)


def retiled(program: Program) -> Program:
    """The seed with its first tile knob changed: other code, the same trusted objects."""
    tile = next(i for i, knob in enumerate(find_knobs(program)) if knob.kind == "pow2")
    return set_knobs(program, find_knobs(program), {tile: 8})


def jobs(run: Runner, program: Program, made: CKernelEvaluator, variant: Variant) -> int:
    """How many sandbox jobs building `program` took: compile, nm and link, and one more
    where the trusted objects were compiled for it."""
    before = len(run.runs)
    binary = build(run, program, made.params, made.harness, variant)
    if variant == PLAIN:
        trial = made.oracle.trial((len(run.runs), CHECK, 0), made.params.sizes)
        check(run, binary, trial, made.params)  # the objects it was linked with work
        return len(run.runs) - before - 1
    return len(run.runs) - before


@pytest.mark.system
def test_trusted_objects_are_compiled_once_per_sandbox_and_variant(
    made: CKernelEvaluator,
) -> None:
    run = Runner(ProcessSandbox(), made.limits)
    assert jobs(run, seed(), made, PLAIN) == 4
    assert jobs(run, retiled(seed()), made, PLAIN) == 3
    assert jobs(run, seed(), made, PLAIN) == 3
    assert jobs(run, seed(), made, ADDRESS) == 4
    assert jobs(run, retiled(seed()), made, ADDRESS) == 3
    assert jobs(Runner(ProcessSandbox(), made.limits), seed(), made, PLAIN) == 4


@pytest.mark.system
def test_a_harness_that_does_not_compile_is_a_build_failure_naming_it(
    made: CKernelEvaluator,
) -> None:
    broken = Harness("#include <stdio.h>\nint evolve_harness_broken(void) { return }\n")
    with pytest.raises(CompileFailed, match="compiling the driver and the harness"):
        build(Runner(ProcessSandbox(), made.limits), seed(), made.params, broken)
