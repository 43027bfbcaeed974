"""Trusted reference for stencil_c: `steps` Jacobi sweeps of a 5-point stencil over an n x n
float32 grid whose boundary stays fixed.

The weights (0.5 for the centre, 0.125 for each neighbour) sum to one, so values stay in the
inputs' range however many sweeps run, and an fp32 kernel's rounding stays near 1e-7.
"""

from __future__ import annotations

import numpy as np

CENTRE, NEIGHBOUR = 0.5, 0.125


def make_inputs(rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray]:
    n = sizes["n"]
    return [rng.uniform(-1.0, 1.0, (n, n)).astype(np.float32)]


def reference(inputs: list[np.ndarray], sizes: dict[str, int]) -> np.ndarray:
    """Swept in float64, so the tolerance only has to absorb the candidate's rounding."""
    grid = inputs[0].astype(np.float64)
    for _ in range(sizes["steps"]):
        swept = grid.copy()
        swept[1:-1, 1:-1] = CENTRE * grid[1:-1, 1:-1] + NEIGHBOUR * (
            grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:]
        )
        grid = swept
    return grid.astype(np.float32)


def flops(sizes: dict[str, int]) -> float:
    """Three adds for the neighbours, two multiplies and an add per interior point and sweep."""
    return 6.0 * (sizes["n"] - 2) ** 2 * sizes["steps"]


def bytes_moved(sizes: dict[str, int]) -> float:
    """The grid read once and written once, not once per sweep: a kernel that blocks sweeps
    in time keeps a tile in cache across several of them, so per-sweep traffic would be a
    floor that a legitimate kernel can go under."""
    return 2.0 * 4 * sizes["n"] ** 2
