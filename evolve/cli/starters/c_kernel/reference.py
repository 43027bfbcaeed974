"""The trusted reference: y = A x for an n x n float32 matrix A and a vector x.

The evaluator runs this file in its own process, never in the sandbox:
    make_inputs(rng, sizes) -> the input arrays, in the order task.yaml's `inputs` names them
    reference(inputs, sizes) -> the expected output (or a list of them, one per output)
    flops(sizes) -> optional: floating-point operations per call, for the gflops metric
    bytes_moved(sizes) -> optional: bytes a call must move, for gbps and the roofline
"""

from __future__ import annotations

import numpy as np


def make_inputs(rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray]:
    n = sizes["n"]
    return [
        rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32),
        rng.uniform(-1.0, 1.0, n).astype(np.float32),
    ]


def reference(inputs: list[np.ndarray], sizes: dict[str, int]) -> np.ndarray:
    """Summed in float64, so the tolerance only has to absorb the candidate's rounding."""
    a, x = (v.astype(np.float64) for v in inputs)
    return (a @ x).astype(np.float32)


def flops(sizes: dict[str, int]) -> float:
    return 2.0 * sizes["n"] ** 2


def bytes_moved(sizes: dict[str, int]) -> float:
    """The matrix is read once: it dominates the traffic."""
    return 4.0 * sizes["n"] ** 2
