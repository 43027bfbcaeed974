"""The trusted verifier's judgement of one round, on host-side data only.

The runner hands back raw bytes: each output followed by a guard band, both poisoned with
0xFF bytes before the call, and the inputs as the kernel left them. Whatever the kernel did,
the verdict comes from comparing those bytes with the reference computed in this process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolve.evaluators.cuda_kernel.problem import Round

GUARD_ELEMS = 256  # must match runner.cu
POISON = 0xFF


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    rel_l2: float

    @classmethod
    def for_dtype(
        cls, dtype: type, rtol: float | None, atol: float | None, rel_l2: float | None
    ) -> Tolerance:
        """1e-4 for fp32 and 1e-2 for half types unless the task says otherwise; the
        whole-tensor bound defaults to a tenth of rtol, to catch a small systematic bias."""
        default = 1e-4 if np.dtype(dtype) == np.float32 else 1e-2
        rtol = default if rtol is None else rtol
        atol = default if atol is None else atol
        return cls(rtol, atol, rtol / 10 if rel_l2 is None else rel_l2)


def _at(index: int, shape: tuple[int, ...]) -> str:
    where = tuple(int(i) for i in np.unravel_index(index, shape))
    return f"index {where[0] if len(where) == 1 else where}"


def split(data: bytes | None, expected: list[np.ndarray], guard: int) -> list[bytes] | str:
    """Cut `data` into one byte string per tensor (each `guard` elements longer)."""
    sizes = [(y.size + guard) * y.itemsize for y in expected]
    if data is None:
        return "the runner wrote no file for this round"
    if len(data) != sum(sizes):
        return f"the runner's file holds {len(data)} bytes, expected {sum(sizes)}"
    parts, offset = [], 0
    for size in sizes:
        parts.append(data[offset : offset + size])
        offset += size
    return parts


def mutated_input(round_: Round, back: bytes | None) -> str | None:
    parts = split(back, round_.inputs, 0)
    if isinstance(parts, str):
        return f"inputs read back: {parts}"
    for number, (before, after) in enumerate(zip(round_.inputs, parts, strict=True)):
        now = np.frombuffer(after, dtype=before.dtype).reshape(before.shape)
        changed = before.view(np.uint8).reshape(-1, before.itemsize) != np.frombuffer(
            after, dtype=np.uint8
        ).reshape(-1, before.itemsize)
        rows = changed.any(axis=1)
        if rows.any():
            first = int(np.flatnonzero(rows)[0])
            return (
                f"the kernel modified input {number} ({int(rows.sum())} of {before.size} values "
                f"changed, first at {_at(first, before.shape)}: was "
                f"{before.reshape(-1)[first]:.6g}, now {now.reshape(-1)[first]:.6g}); "
                "inputs are read-only"
            )
    return None


def _unwritten(raw: np.ndarray) -> np.ndarray:
    """Elements whose every byte is still the poison: the kernel never stored to them."""
    return (raw.view(np.uint8).reshape(-1, raw.itemsize) == POISON).all(axis=1)


def judge_output(
    number: int, got_bytes: bytes, expected: np.ndarray, inputs: list[np.ndarray], tol: Tolerance
) -> str | None:
    """Why output `number` is wrong, for whoever fixes the kernel; None when it is right."""
    name = f"output {number} (shape {expected.shape}, {expected.dtype})"
    whole = np.frombuffer(got_bytes, dtype=expected.dtype)
    guard = whole[expected.size :]
    touched = ~_unwritten(guard)
    if touched.any():
        return (
            f"{name}: the kernel wrote past its end (guard element {int(np.argmax(touched))} "
            "changed): a wrong output shape, or an out-of-bounds store"
        )
    got = whole[: expected.size].reshape(expected.shape)
    unwritten = _unwritten(got)
    if unwritten.any():
        first = int(np.argmax(unwritten))
        return (
            f"{name}: {int(unwritten.sum())} of {got.size} values were never written (still "
            f"the NaN poison), first at {_at(first, got.shape)}: a wrong shape, or skipped work"
        )
    bad = ~np.isfinite(got)
    if bad.any():
        first = int(np.argmax(bad.reshape(-1)))
        return (
            f"{name}: {int(bad.sum())} of {got.size} values are NaN or Inf, first at "
            f"{_at(first, got.shape)}: got {got.reshape(-1)[first]}, expected "
            f"{expected.reshape(-1)[first]:.6g}"
        )
    if not got.any() and expected.any():
        return f"{name}: the output is all zeros but the reference is not"
    for index, x in enumerate(inputs):
        if x.shape == expected.shape and np.array_equal(got, x) and not np.array_equal(x, expected):
            return f"{name} is a copy of input {index}: the kernel returned its input unchanged"
    want = expected.astype(np.float64)
    error = np.abs(got.astype(np.float64) - want)
    wrong = error > tol.atol + tol.rtol * np.abs(want)
    if wrong.any():
        first = int(np.argmax(wrong.reshape(-1)))
        return (
            f"{name}: {int(wrong.sum())} of {got.size} values differ by more than "
            f"atol={tol.atol:g} + rtol={tol.rtol:g} * |expected|; first at "
            f"{_at(first, got.shape)}: expected {want.reshape(-1)[first]:.6g}, got "
            f"{got.reshape(-1)[first]:.6g}; max abs error {error.max():.3g}"
        )
    norm = float(np.linalg.norm(want))
    relative = float(np.linalg.norm(got.astype(np.float64) - want)) / (norm or 1.0)
    if relative > tol.rel_l2:
        return (
            f"{name}: whole-tensor relative error ||got - expected|| / ||expected|| = "
            f"{relative:.3g} exceeds {tol.rel_l2:g}: every value is close, but all drift "
            "the same way (lower precision somewhere?)"
        )
    return None


def judge(round_: Round, out: bytes | None, back: bytes | None, tol: Tolerance) -> str | None:
    """The first reason this round fails, naming the round's shape and distribution."""
    where = f"round with {round_.dims} from {round_.distribution}"
    problem = mutated_input(round_, back)
    if problem is None:
        parts = split(out, round_.expected, GUARD_ELEMS)
        if isinstance(parts, str):
            problem = f"outputs: {parts}"
        else:
            for number, (got, expected) in enumerate(zip(parts, round_.expected, strict=True)):
                problem = judge_output(number, got, expected, round_.inputs, tol)
                if problem:
                    break
    return f"{where}: {problem}" if problem else None
