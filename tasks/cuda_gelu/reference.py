"""Trusted reference for cuda_gelu: the exact (erf) GELU of n values.

Loaded by the cuda_kernel evaluator in its own process, never in the sandbox.
"""

from __future__ import annotations

import math

import numpy as np

DTYPE = "float32"
_erf = np.vectorize(math.erf, otypes=[np.float64])


def make_inputs(draw, dims: dict[str, int]) -> list[np.ndarray]:
    return [draw((dims["n"],))]


def reference(inputs: list[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    x = inputs[0].astype(np.float64)
    return [0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))]


def flops(dims: dict[str, int]) -> float:
    return 8.0 * dims["n"]  # erf counted as a handful of operations


def bytes_moved(dims: dict[str, int]) -> float:
    return 2.0 * 4 * dims["n"]
