"""Whether a kernel's output bytes are the reference's answer, and if not, what to tell the
model: which output, where, what was expected and what came.

Used by every stage that runs a kernel (check, each timed call, the counted call, the
sanitized run), always in the evaluator's own process. Floats are compared within
`atol + rtol*|expected|`; integers exactly unless their output sets a tolerance, since a
histogram off by one count is wrong however large the counts. Every output starts as
0xff bytes (NaN for floats), so an element never written shows as NaN or as that value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evolve.evaluators.c_kernel import layout
from evolve.evaluators.c_kernel.dtypes import poison
from evolve.evaluators.c_kernel.oracle import Expected


def compare(output: bytes | None, expected: Sequence[Expected]) -> str | None:
    """Why `output` (the whole output buffer) is not an acceptable answer; None if it is."""
    if output is None:
        return "the kernel wrote no output.bin"
    counts = [e.values.nbytes for e in expected]
    size = layout.total(counts)
    if len(output) != size:
        arrays = ", ".join(f"{e.label}: {e.values.dtype} {e.values.shape}" for e in expected)
        return f"output.bin holds {len(output)} bytes, expected {size} ({arrays})"
    for data, wanted in zip(layout.unpack(output, counts), expected, strict=True):
        problem = compare_one(data, wanted)
        if problem:
            return problem
    return None


def compare_one(data: bytes, expected: Expected) -> str | None:
    want = expected.values
    got = np.frombuffer(data, dtype=want.dtype).reshape(want.shape)
    keep = expected.compared
    total = want.size if keep is None else int(keep.sum())
    of = f"of {total} values of {expected.label}"
    if keep is not None:
        of = f"of the {total} compared values of {expected.label}"

    def only(mask: np.ndarray) -> np.ndarray:
        return mask if keep is None else mask & keep

    if want.dtype.kind == "f":
        nonfinite = only(~np.isfinite(got))
        if nonfinite.any():
            at = _first(nonfinite)
            return (
                f"{int(nonfinite.sum())} {of} are NaN or Inf (every output starts as NaN: was "
                f"it written?); first at {_where(at)}: got {got[at]}, expected {want[at]:.6g}"
            )
    region_got, region_want = (got, want) if keep is None else (got[keep], want[keep])
    if not region_got.any() and region_want.any():
        where = " where compared" if keep is not None else ""
        return f"{expected.label} is all zeros{where} but the reference is not"
    if expected.tolerances is None:
        wrong = only(got != want)
        if not wrong.any():
            return None
        at = _first(wrong)
        unwritten = got[at] == poison(want.dtype.name)
        return (
            f"{int(wrong.sum())} {of} differ (integers must match exactly); first at "
            f"{_where(at)}: expected {want[at]}, got {got[at]}"
            + (" (the poison value: was it written?)" if unwritten else "")
        )
    rtol, atol = expected.tolerances
    wide = want.astype(np.float64)
    error = np.abs(got.astype(np.float64) - wide)
    wrong = only(error > atol + rtol * np.abs(wide))
    if not wrong.any():
        return None
    at = _first(wrong)
    largest = error.max() if keep is None else error[keep].max()
    return (
        f"{int(wrong.sum())} {of} differ by more than atol={atol:g} + rtol={rtol:g} * "
        f"|expected|; first at {_where(at)}: expected {want[at]:.6g}, got {got[at]:.6g}; "
        f"max abs error {largest:.3g}"
    )


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(mask)[0]), mask.shape))


def _where(index: tuple[int, ...]) -> str:
    if len(index) == 2:
        return f"row {index[0]}, col {index[1]}"
    if len(index) == 1:
        return f"index {index[0]}"
    return f"index {index}" if index else "the only element"
