"""Trusted reference for cuda_matmul: C = A @ B, accumulated in float64.

Loaded by the cuda_kernel evaluator in its own process, never in the sandbox.
"""

from __future__ import annotations

import numpy as np

DTYPE = "float32"


def make_inputs(draw, dims: dict[str, int]) -> list[np.ndarray]:
    return [draw((dims["M"], dims["K"])), draw((dims["K"], dims["N"]))]


def reference(inputs: list[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    a, b = (x.astype(np.float64) for x in inputs)
    return [a @ b]


def flops(dims: dict[str, int]) -> float:
    return 2.0 * dims["M"] * dims["N"] * dims["K"]


def bytes_moved(dims: dict[str, int]) -> float:
    m, n, k = dims["M"], dims["N"], dims["K"]
    return 4.0 * (m * k + k * n + m * n)
