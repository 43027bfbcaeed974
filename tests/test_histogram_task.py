"""The shipped histogram_c task, made small: it loads with its generated harness, its seed
passes every stage with real gcc and the process sandbox, its knobs build, and a histogram
that is wrong fails naming the output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.evaluators.c_kernel.flags import disallowed
from evolve.plugin.knobs import find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.sandboxes import ProcessSandbox
from evolve.task.loading import LoadedTask, load_task

TASK_FILE = Path(__file__).resolve().parent.parent / "tasks" / "histogram_c" / "task.yaml"
SMALL = {"n": 50_021}  # no multiple of any table count: the tail loop runs


@pytest.fixture(scope="module")
def task() -> LoadedTask:
    return load_task(TASK_FILE)


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="module")
def small(task: LoadedTask, sandbox: ProcessSandbox) -> CKernelEvaluator:
    params = {
        **task.spec.evaluator.params,
        "sizes": SMALL,
        "counter_sizes": {"n": 4099},
        "counters": "always",
        "sanitize": False,
        "reps": 5,
    }
    evaluator = CKernelEvaluator(params, task.root)
    evaluator.limits = task.spec.sandbox.limits()
    evaluator.prepare(task.seed, sandbox, task.root)
    return evaluator


def test_the_task_declares_bytes_in_and_counts_out(task: LoadedTask) -> None:
    evaluator = CKernelEvaluator(task.spec.evaluator.params, task.root)
    assert not (task.root / "harness.c").exists()
    assert "histogram((int)size_n" in evaluator.harness.source
    trial = evaluator.oracle.trial(3, SMALL)
    counts = trial.expected[0].values
    assert counts.dtype == np.uint32 and counts.shape == (256,) and counts.sum() == SMALL["n"]
    assert counts.max() > 20 * np.median(counts)  # skewed: some values far commoner
    assert evaluator.metric_problem("bytes_per_s") is None
    assert evaluator.metric_problem("gflops") is not None


def test_every_cflags_choice_is_allowed(task: LoadedTask) -> None:
    params = CKernelEvaluator(task.spec.evaluator.params, task.root).params
    cflags = next(knob for knob in find_knobs(task.seed) if knob.kind == "choice")
    for option in cflags.options:
        assert disallowed(option.split(), params.allowed_flags) == [], option


def test_the_seed_passes_every_stage(
    small: CKernelEvaluator, task: LoadedTask, sandbox: ProcessSandbox
) -> None:
    result = small.evaluate(task.seed, sandbox, seed=1)
    assert result.status == "ok", result.feedback
    assert [s.name for s in result.stages] == ["build", "check", "measure", "counters"]
    assert result.metrics["bytes_per_s"] > 0 and result.metrics["gbps"] > 0
    assert "gflops" not in result.metrics
    assert "the inputs read once and the outputs written once" in result.feedback


@pytest.mark.parametrize("tables", [2, 7, 16])
def test_sub_histogram_settings_still_check(
    small: CKernelEvaluator, task: LoadedTask, sandbox: ProcessSandbox, tables: int
) -> None:
    knobs = find_knobs(task.seed)
    index = next(i for i, knob in enumerate(knobs) if knob.kind != "choice")
    program = set_knobs(task.seed, knobs, {index: tables})
    result = small.draft(program, sandbox, seed=2)
    assert result.status == "ok", result.feedback


def test_a_histogram_that_skips_the_tail_fails_naming_counts(
    small: CKernelEvaluator, task: LoadedTask, sandbox: ProcessSandbox
) -> None:
    text = task.seed.files[task.seed.main_file]
    old = "for (; i < n; i++) tables[0][data[i]]++;"
    assert old in text
    wrong = Program({task.seed.main_file: text.replace(old, "").replace("GRAMS 1 ", "GRAMS 4 ")})
    result = small.draft(wrong, sandbox, seed=3)
    assert result.status == "check_failed"
    assert "output `counts`" in result.feedback and "integers must match exactly" in result.feedback
