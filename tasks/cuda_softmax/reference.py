"""Trusted reference for cuda_softmax: y = softmax(x) along each row of a rows x cols matrix.

Loaded by the cuda_kernel evaluator in its own process, never in the sandbox.
"""

from __future__ import annotations

import numpy as np

DTYPE = "float32"


def make_inputs(draw, dims: dict[str, int]) -> list[np.ndarray]:
    return [draw((dims["rows"], dims["cols"]))]


def reference(inputs: list[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    x = inputs[0].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return [e / e.sum(axis=1, keepdims=True)]


def flops(dims: dict[str, int]) -> float:
    return 5.0 * dims["rows"] * dims["cols"]  # max, subtract, exp, sum, scale


def bytes_moved(dims: dict[str, int]) -> float:
    return 2.0 * 4 * dims["rows"] * dims["cols"]  # read x once, write y once
