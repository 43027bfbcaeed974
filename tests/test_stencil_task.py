"""The shipped stencil_c task, made small: it loads, its seed passes every stage with real gcc
and the process sandbox, and a stencil that is wrong in the ways kernels go wrong fails."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.evaluators.c_kernel.flags import disallowed
from evolve.plugin.knobs import Knob, find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.sandboxes import ProcessSandbox
from evolve.task.loading import LoadedTask, load_task

TASK_FILE = Path(__file__).resolve().parent.parent / "tasks" / "stencil_c" / "task.yaml"
SMALL = {"n": 48, "steps": 3}  # odd, so the last sweep's parity differs from the first's
COUNTED = {"n": 48, "steps": 2}


@pytest.fixture(scope="module")
def task() -> LoadedTask:
    return load_task(TASK_FILE)


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="module")
def small(task: LoadedTask, sandbox: ProcessSandbox) -> CKernelEvaluator:
    """Prepared as a worker's is, counting every candidate with cachegrind where it exists."""
    params = {
        **task.spec.evaluator.params,
        "sizes": SMALL,
        "counter_sizes": COUNTED,
        "counters": "always",
        "counter_tool": "cachegrind",
        "reps": 5,
    }
    evaluator = CKernelEvaluator(params, task.root)
    evaluator.limits = task.spec.sandbox.limits()
    evaluator.prepare(task.seed, sandbox, task.root)
    return evaluator


def knob_named(knobs: list[Knob], program: Program, name: str) -> int:
    """The knob on the line that defines `name` (or the cflags line)."""
    for index, knob in enumerate(knobs):
        line = program.files[knob.file].splitlines()[knob.line]
        if f"#define {name} " in line or (name == "cflags" and "cflags:" in line):
            return index
    raise AssertionError(f"no knob {name}")


def with_knobs(program: Program, **values: int | str) -> Program:
    knobs = find_knobs(program)
    return set_knobs(program, knobs, {knob_named(knobs, program, k): v for k, v in values.items()})


def test_the_task_loads_with_a_stencil_evaluator_and_four_knobs(task: LoadedTask) -> None:
    params = task.spec.evaluator.params
    assert task.spec.evaluator.name == "c_kernel" and params["entry"] == "stencil"
    assert set(params["sizes"]) == set(params["counter_sizes"]) == {"n", "steps"}
    assert [o.name for o in task.spec.objectives] == ["speedup"]
    kinds = sorted(knob.kind for knob in find_knobs(task.seed))
    assert kinds == ["choice", "choice", "pow2", "pow2"]


def test_every_cflags_choice_is_allowed(task: LoadedTask) -> None:
    """A choice outside the allowlist would waste autotuner candidates on build failures."""
    evaluator = CKernelEvaluator(task.spec.evaluator.params, task.root)
    knobs = find_knobs(task.seed)
    cflags = knobs[knob_named(knobs, task.seed, "cflags")]
    for option in cflags.options:
        assert disallowed(option.split(), evaluator.params.allowed_flags) == [], option


def test_the_seed_passes_every_stage(
    small: CKernelEvaluator, task: LoadedTask, sandbox: ProcessSandbox
) -> None:
    result = small.evaluate(task.seed, sandbox, seed=1)
    assert result.status == "ok", result.feedback
    assert [s.name for s in result.stages] == ["build", "check", "measure", "counters"]
    assert result.metrics["speedup"] > 0, result.feedback
    assert result.metrics["flagged"] == 0.0, result.feedback  # an honest seed is never suspect
    if shutil.which("valgrind"):
        assert result.metrics["est_cycles"] > 0
        assert result.metrics["est_speedup"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("order", "tile_i", "tile_j", "flags"),
    [("JI", 5, 7, "-O3"), ("IJ", 3, 1024, "-O1"), ("JI", 1024, 1, "-Ofast -mavx2 -mfma")],
)
def test_knob_settings_whose_tiles_do_not_divide_the_grid_still_check(
    small: CKernelEvaluator,
    task: LoadedTask,
    sandbox: ProcessSandbox,
    order: str,
    tile_i: int,
    tile_j: int,
    flags: str,
) -> None:
    program = with_knobs(task.seed, LOOP_ORDER=order, TILE_I=tile_i, TILE_J=tile_j, cflags=flags)
    result = small.draft(program, sandbox, seed=2)
    assert result.status == "ok", result.feedback


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("0.125f * (", "0.25f * ("),  # a wrong weight
        ("for (int s = 0; s < steps; s++)", "for (int s = 1; s < steps; s++)"),  # a sweep short
        ("dst[i * n] = src[i * n];", ""),  # the left boundary never written: NaN stays
    ],
)
def test_a_wrong_stencil_fails_check(
    small: CKernelEvaluator, task: LoadedTask, sandbox: ProcessSandbox, old: str, new: str
) -> None:
    text = task.seed.files[task.seed.main_file]
    assert old in text
    wrong = task.seed.replace({task.seed.main_file: text.replace(old, new)})
    result = small.evaluate(wrong, sandbox, seed=3)
    assert result.status == "check_failed", result.feedback
