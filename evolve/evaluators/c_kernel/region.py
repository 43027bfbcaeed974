"""Which elements of an output are compared: a numpy basic slice written as text in the
task (`compare: "1:-1, 1:-1"`), and the mask of a masked array the reference returns.

The text is parsed here, never evaluated: a task file is untrusted input. Each part is an
integer or `start:stop[:step]` with optional integers, one part per dimension.
"""

from __future__ import annotations

import re

import numpy as np

INTEGER = r"\s*(-?\d+)?\s*"
PART = re.compile(rf"{INTEGER}(?::{INTEGER}(?::{INTEGER})?)?")

Index = tuple[slice | int, ...]


def parse(text: str) -> Index:
    """The slice `text` denotes; ValueError saying what is wrong with it."""
    parts: list[slice | int] = []
    for raw in text.split(","):
        match = PART.fullmatch(raw)
        if match is None or not raw.strip():
            raise ValueError(
                f"compare: {raw.strip()!r} in {text!r} is not an integer or start:stop[:step] "
                "(e.g. `1:-1, 1:-1`)"
            )
        start, stop, step = (None if g is None else int(g) for g in match.groups())
        if ":" not in raw:
            parts.append(int(raw))
            continue
        if step == 0:
            raise ValueError(f"compare: {raw.strip()!r} in {text!r} has a step of 0")
        parts.append(slice(start, stop, step))
    return tuple(parts)


def compared(text: str | None, shape: tuple[int, ...], masked: np.ndarray | None) -> np.ndarray:
    """The elements to compare, as a boolean array of `shape`: those in the slice `text`
    (all, without one) and not masked. ValueError where the slice does not fit the shape
    or nothing at all is left to compare."""
    keep = np.ones(shape, dtype=bool)
    if text is not None:
        index = parse(text)
        if len(index) != len(shape):
            raise ValueError(
                f"compare: {text!r} has {len(index)} dimension(s), but the reference's "
                f"output has {len(shape)} (shape {shape}): give one part per dimension"
            )
        keep = np.zeros(shape, dtype=bool)
        try:
            keep[index] = True
        except IndexError as exc:
            raise ValueError(f"compare: {text!r} does not fit shape {shape}: {exc}") from None
    if masked is not None:
        keep &= ~masked
    if not keep.any():
        if masked is None:
            raise ValueError(f"compare: {text!r} selects no element of shape {shape}")
        also = f" and compare: {text!r}" if text is not None else ""
        raise ValueError(f"the reference's mask{also} leave nothing to compare")
    return keep
