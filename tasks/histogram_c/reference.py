"""Trusted reference for histogram_c: how often each byte value occurs in n bytes.

The bytes are skewed, as real data is (text, pixels, compressed streams): a few values
are common and most are rare, so the counts differ widely and one value often repeats
back to back. Which values are common changes with every input set.
"""

from __future__ import annotations

import numpy as np

MEAN_RANK = 24.0  # bytes of rank r (0 = commonest) occur about exp(-r / 24) as often


def make_inputs(rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray]:
    ranks = np.minimum(rng.exponential(MEAN_RANK, sizes["n"]), 255).astype(np.uint8)
    values = rng.permutation(256).astype(np.uint8)
    return [values[ranks]]


def reference(inputs: list[np.ndarray], sizes: dict[str, int]) -> np.ndarray:
    return np.bincount(inputs[0], minlength=256).astype(np.uint32)


def work(sizes: dict[str, int]) -> float:
    """Bytes counted per call: the metric bytes_per_s."""
    return float(sizes["n"])
