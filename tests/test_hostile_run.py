"""A whole `evolve run` whose candidates misbehave: each is recorded with the status its
misbehaviour earns, with feedback, and the run goes on to its budget."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.plugin.knobs import find_knobs
from evolve.store import Store
from tests.conftest import MATMUL_CONTRACT

pytestmark = pytest.mark.system

MATMUL = Path(__file__).resolve().parent.parent / "tasks" / "matmul_c"

SEED = """#include <stdio.h>
#define GOOD 0
#define NOCOMPILE 1
#define HANG 2
#define CRASH 3
#define FLOOD 4
#define WRONG 5
// EVOLVE-BLOCK-START
#define MODE GOOD  // @knob choice GOOD | NOCOMPILE | HANG | CRASH | FLOOD | WRONG
#define BIAS 0     // @knob int 0..3
void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C) {
#if MODE == NOCOMPILE
  this is not C;
#elif MODE == HANG
  for (volatile int spin = 0;; spin++) {}
#elif MODE == CRASH
  *(volatile int *)0 = 1;
#elif MODE == FLOOD
  for (int line = 0; line < 2000000; line++)
    fputs("flooding stdout with fifty bytes of text......\\n", stdout);
#endif
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      float sum = 0.0f;
      for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
      C[i * n + j] = sum + BIAS * 0.0f;
    }
#if MODE == WRONG
  C[3 * n + 5] += 1.0f;
#endif
}
// EVOLVE-BLOCK-END
"""

TASK = """name: hostile
seed: seed.c
evaluator:
  name: c_kernel
  params: {CONTRACT, reference: reference.py, sizes: {n: 48}, reps: 5}
objectives: [{name: gflops, direction: maximize}]
search: {islands: 1}
budget: {candidates: 16}
sandbox: {backend: process, timeout_s: 3, memory_mb: 512}
"""
TASK = TASK.replace("CONTRACT", MATMUL_CONTRACT)

EXPECTED = {
    "GOOD": {"ok"},
    "NOCOMPILE": {"build_failed"},
    "HANG": {"timeout"},
    "CRASH": {"check_failed"},
    "FLOOD": {"ok"},  # 100 MB of output per call is drained and dropped, not fatal
    "WRONG": {"check_failed"},
}


def test_misbehaving_candidates_are_recorded_and_the_run_reaches_its_budget(tmp_path: Path) -> None:
    task_dir = tmp_path / "hostile"
    task_dir.mkdir()
    shutil.copy(MATMUL / "reference.py", task_dir / "reference.py")
    (task_dir / "seed.c").write_text(SEED)
    (task_dir / "task.yaml").write_text(TASK)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evolve",
            "run",
            str(task_dir / "task.yaml"),
            "--workers",
            "1",
            "--seed",
            "5",
            "--name",
            "hostile",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "finished: candidate budget reached (16)" in done.stdout

    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        evaluations = {
            e.candidate_id: e for e in store.run_evaluations("hostile") if e.kind == "evaluate"
        }
        assert len(evaluations) == 16 and not store.pending_candidates("hostile")
        seen = set()
        for candidate_id, evaluation in evaluations.items():
            candidate = store.candidate(candidate_id)
            assert candidate is not None
            mode = str(find_knobs(candidate.program)[0].value)
            seen.add(mode)
            assert evaluation.status in EXPECTED[mode], (
                mode,
                evaluation.status,
                evaluation.feedback,
            )
            if evaluation.status != "ok":
                assert evaluation.feedback.strip(), f"{mode} failed without feedback"
        assert len(seen - {"GOOD"}) >= 3, f"too few kinds of misbehaviour were tried: {seen}"
        wrong = [
            e
            for e in evaluations.values()
            if e.status == "check_failed" and "expected" in e.feedback
        ]
        if "WRONG" in seen:
            assert wrong, "a wrong result must say where it differs"
