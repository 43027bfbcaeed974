"""Trusted reference for matmul_c: C = A @ B for n x n row-major float32 matrices.

The c_kernel evaluator loads this file from its text in its own process, never in the
sandbox. Its functions of `sizes` (the task's `sizes` param), as docs/evaluators/c_kernel.md
describes them:

    make_inputs(rng, sizes) -> the arrays A and B (task.yaml's `inputs`), in this order
    reference(inputs, sizes) -> the expected C (task.yaml's `outputs`)
    flops(sizes) -> optional: floating-point operations per kernel call, for GFLOP/s
"""

from __future__ import annotations

import numpy as np


def make_inputs(rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray]:
    n = sizes["n"]
    return [rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32) for _ in range(2)]


def reference(inputs: list[np.ndarray], sizes: dict[str, int]) -> np.ndarray:
    """Accumulated in float64, so the tolerance only has to absorb the candidate's rounding."""
    a, b = (x.astype(np.float64) for x in inputs)
    return (a @ b).astype(np.float32)


def flops(sizes: dict[str, int]) -> float:
    return 2.0 * sizes["n"] ** 3
