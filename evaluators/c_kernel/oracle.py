"""The task's trusted reference: inputs, expected output and flops, computed outside the sandbox.

Evaluators are pickled and shipped to Ray workers, so they carry the reference's text and
never its module; the cache means each process executes a given text only once.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from evaluators.task_files import load_reference

REQUIRED = ("make_inputs", "reference", "flops")


@dataclass(frozen=True)
class Trial:
    """One evaluation's inputs as the harness reads them, and the answer they must produce."""

    inputs: bytes
    expected: np.ndarray
    flops: float


def load(text: str, filename: str) -> types.ModuleType:
    return load_reference(text, filename, REQUIRED)


def make_trial(text: str, filename: str, seed: int, sizes: Mapping[str, int]) -> Trial:
    """Fresh inputs from `seed`, so a candidate cannot learn the answer from an earlier run."""
    reference = load(text, filename)
    sizes = dict(sizes)
    inputs = reference.make_inputs(np.random.default_rng(seed), sizes)
    expected = np.ascontiguousarray(reference.reference(inputs, sizes), dtype=np.float32)
    data = b"".join(np.ascontiguousarray(x, dtype=np.float32).tobytes() for x in inputs)
    return Trial(data, expected, float(reference.flops(sizes)))
