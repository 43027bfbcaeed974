"""Trusted reference for cuda_layernorm: LayerNorm over the last dim with weight and bias.

Loaded by the cuda_kernel evaluator in its own process, never in the sandbox.
"""

from __future__ import annotations

import numpy as np

DTYPE = "float32"
EPS = 1e-5


def make_inputs(draw, dims: dict[str, int]) -> list[np.ndarray]:
    rows, cols = dims["rows"], dims["cols"]
    return [draw((rows, cols)), draw((cols,)), draw((cols,))]  # x, gamma, beta


def reference(inputs: list[np.ndarray], dims: dict[str, int]) -> list[np.ndarray]:
    x, gamma, beta = (a.astype(np.float64) for a in inputs)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return [(x - mean) / np.sqrt(var + EPS) * gamma + beta]


def flops(dims: dict[str, int]) -> float:
    return 8.0 * dims["rows"] * dims["cols"]


def bytes_moved(dims: dict[str, int]) -> float:
    return 4.0 * (2 * dims["rows"] * dims["cols"] + 2 * dims["cols"])
