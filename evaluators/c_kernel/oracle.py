"""The task's trusted reference: inputs, expected output and flops, computed outside the sandbox.

Evaluators are pickled and shipped to Ray workers, so they carry the reference's text and
never its module; the cache means each process executes a given text only once.

Every set of inputs is drawn from its own entropy, `(salt, evaluation seed, purpose,
index)`, so the check, each timed call, the counted call and the sanitizer run each see
inputs that no other run saw: an answer cached from one cannot serve another. The salt is
secret and new for every `evolve run`: without it, two runs with the same `--seed` would
draw the same inputs, and a cache kept between them (in /dev/shm, say) would pay off.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaluators.task_files import load_reference

REQUIRED = ("make_inputs", "reference", "flops")

# What a set of inputs is for: the word after the salt and seed in its entropy.
CHECK, TIMED, RETIMED, COUNTED, SANITIZED = range(5)


@dataclass(frozen=True)
class Trial:
    """One call's inputs as the driver reads them, and the answer they must produce."""

    inputs: bytes
    expected: np.ndarray
    flops: float
    bytes_moved: float  # the reference's `bytes_moved`, else what must be read and written once


def load(text: str, filename: str) -> types.ModuleType:
    return load_reference(text, filename, REQUIRED)


def _draw(
    reference: types.ModuleType, entropy: int | Sequence[int], sizes: dict[str, int]
) -> tuple[list[np.ndarray], bytes]:
    inputs = reference.make_inputs(np.random.default_rng(entropy), sizes)
    return inputs, b"".join(np.ascontiguousarray(x, dtype=np.float32).tobytes() for x in inputs)


def _answer(
    reference: types.ModuleType, inputs: list[np.ndarray], data: bytes, sizes: dict[str, int]
) -> Trial:
    expected = np.ascontiguousarray(reference.reference(inputs, sizes), dtype=np.float32)
    moved = getattr(reference, "bytes_moved", None)
    traffic = float(moved(sizes)) if callable(moved) else float(len(data) + expected.nbytes)
    return Trial(data, expected, float(reference.flops(sizes)), traffic)


def make_trial(
    text: str, filename: str, entropy: int | Sequence[int], sizes: Mapping[str, int]
) -> Trial:
    reference = load(text, filename)
    sizes = dict(sizes)
    return _answer(reference, *_draw(reference, entropy, sizes), sizes)


def make_trials(
    text: str,
    filename: str,
    entropy: tuple[int, ...],
    purpose: int,
    count: int,
    sizes: Mapping[str, int],
) -> list[Trial]:
    """`count` distinct sets for one purpose of one evaluation (`entropy`: salt and seed).

    Computed here, before the job: answering on a thread while the sandbox forks its job
    deadlocks OpenBLAS, whose fork handler waits for the call in flight.
    """
    return [make_trial(text, filename, (*entropy, purpose, i), sizes) for i in range(count)]
