"""The trusted side of a task: its inputs, its reference answer, and the rounds that use them.

The task's reference.py is executed here, in the evaluator's process, from its text (the
evaluator is pickled to Ray workers, so it carries text, not a module). Its protocol:

    DTYPE = "float32" | "float16"
    make_inputs(draw, dims) -> list of arrays; draw(shape) samples this round's distribution
    reference(inputs, dims) -> list of arrays, the expected outputs (computed in float64)
    flops(dims), bytes_moved(dims) -> per call, for the roofline floor

Inputs come from two distributions, alternating by round: randn, and a wide uniform one
whose values reach +-8, so no kernel passes by assuming inputs in [0, 1) or small values.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from evolve.evaluators.task_files import load_reference

REQUIRED = ("make_inputs", "reference", "flops", "bytes_moved")
DTYPES = {"float32": np.float32, "float16": np.float16}
DISTRIBUTIONS = ("randn", "uniform(-8, 8)")

Draw = Callable[[tuple[int, ...]], np.ndarray]


@dataclass(frozen=True)
class Round:
    """One correctness round (or one timing set): inputs and the answer they must produce."""

    dims: dict[str, int]
    distribution: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]


def load(text: str, filename: str) -> types.ModuleType:
    module = load_reference(text, filename, REQUIRED)
    if getattr(module, "DTYPE", None) not in DTYPES:
        raise ValueError(f"{filename} must set DTYPE to one of {', '.join(DTYPES)}")
    return module


def drawer(rng: np.random.Generator, distribution: str, dtype: type) -> Draw:
    if distribution == "randn":
        return lambda shape: rng.standard_normal(shape).astype(dtype)
    return lambda shape: rng.uniform(-8.0, 8.0, shape).astype(dtype)


class Problem:
    """A task's reference module plus the seeds: everything the sandbox never sees."""

    def __init__(self, text: str, filename: str) -> None:
        self.text, self.filename = text, filename
        module = load(text, filename)
        self.dtype: type = DTYPES[module.DTYPE]

    @property
    def module(self) -> types.ModuleType:
        return load(self.text, self.filename)

    def make_round(self, seed: int, index: int, dims: Mapping[str, int]) -> Round:
        """Round `index` of evaluation `seed`: its own generator, so rounds never repeat."""
        rng = np.random.default_rng([seed, index])
        distribution = DISTRIBUTIONS[index % len(DISTRIBUTIONS)]
        dims = dict(dims)
        inputs = [
            np.ascontiguousarray(x, dtype=self.dtype)
            for x in self.module.make_inputs(drawer(rng, distribution, self.dtype), dims)
        ]
        expected = [
            np.ascontiguousarray(y, dtype=self.dtype)
            for y in self.module.reference([x.copy() for x in inputs], dims)
        ]
        return Round(dims, distribution, inputs, expected)

    def flops(self, dims: Mapping[str, int]) -> float:
        return float(self.module.flops(dict(dims)))

    def bytes_moved(self, dims: Mapping[str, int]) -> float:
        return float(self.module.bytes_moved(dict(dims)))
