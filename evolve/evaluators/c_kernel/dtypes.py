"""The element types a task may declare for its arrays, and how the reference's arrays become
the exact bytes a kernel reads or must write.

A conversion that changes values would make the kernel and the reference disagree about the
problem without either being wrong, so only float-to-float casts are implicit (a float64
array for a float32 input is the usual numpy habit); anything else must round-trip exactly.
An undeclared array is float32, and an integer array there is refused rather than widened:
a uint8 input read as float32 is a different problem.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

DType = Literal[
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]
DEFAULT: DType = "float32"


def is_float(name: str) -> bool:
    return np.dtype(name).kind == "f"


def poison(name: str) -> int | None:
    """The value an integer output holds where nothing was written (every byte 0xff), or
    None for a float type, where those bytes are a NaN."""
    dtype = np.dtype(name)
    if dtype.kind == "f":
        return None
    return int(np.frombuffer(b"\xff" * dtype.itemsize, dtype=dtype)[0])


def conform(value: object, name: str, *, declared: bool, what: str, key: str) -> np.ndarray:
    """`value` as a C-contiguous array of dtype `name`; ValueError saying what to change.

    `what` names the array to the task's author ("inputs[0] (data)"), `key` the param that
    declares its type (`inputs` or `outputs`), and `declared` whether the task declared it.
    """
    if isinstance(value, np.ma.MaskedArray):
        value = np.ma.getdata(value)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not an array: {exc}") from None
    target = np.dtype(name)
    source = array.dtype
    if source == target:
        return np.ascontiguousarray(array)
    if source.kind == "f" and target.kind == "f":
        return np.ascontiguousarray(array, dtype=target)
    if source.kind not in "biuf":
        raise ValueError(f"{what} has numpy dtype {source}, which no C kernel type matches")
    if not declared:
        raise ValueError(
            f"{what} is {source}, but the task declares no `{key}`, so it is float32: "
            f"declare its type (`{key}: [{{name: ..., dtype: {_suggest(source)}}}, ...]`) "
            "rather than have it widened to float"
        )
    converted = _exact(array, target)
    if converted is None:
        raise ValueError(
            f"{what} is {source} and holds values that {name} (declared in `{key}`) cannot "
            f"represent exactly: convert it yourself, or declare the dtype it has"
        )
    return converted


def _suggest(source: np.dtype) -> str:
    return "uint8" if source.kind == "b" else str(source)


def _exact(array: np.ndarray, target: np.dtype) -> np.ndarray | None:
    """`array` converted to `target`, or None if any value would change."""
    if array.size == 0:
        return np.ascontiguousarray(array, dtype=target)
    if target.kind in "iu":
        if array.dtype.kind == "f" and not (
            np.isfinite(array).all() and (np.floor(array) == array).all()
        ):
            return None
        info = np.iinfo(target)
        low, high = array.min(), array.max()
        if array.dtype.kind == "f":
            # float(info.max) of a 64-bit type rounds up, so compare strictly below it
            fits = low >= float(info.min) and high < float(info.max) + 1
        else:
            fits = int(low) >= info.min and int(high) <= info.max
        return np.ascontiguousarray(array, dtype=target) if fits else None
    converted = np.ascontiguousarray(array, dtype=target)
    with np.errstate(invalid="ignore", over="ignore"):
        back = converted.astype(array.dtype)
    return converted if np.array_equal(back, array) else None
