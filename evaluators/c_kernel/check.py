"""Check stage: run the kernel once on fresh inputs and compare with the trusted reference."""

from __future__ import annotations

import numpy as np

from evaluators.c_kernel.oracle import Trial
from evaluators.c_kernel.params import CKernelParams
from evolve.stages import Runner, StageFailed, require_ok


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(mask)[0]), mask.shape))


def _where(index: tuple[int, ...]) -> str:
    if len(index) == 2:
        return f"row {index[0]}, col {index[1]}"
    return f"index {index[0] if len(index) == 1 else index}"


def compare(output: bytes | None, expected: np.ndarray, *, rtol: float, atol: float) -> str | None:
    """Why `output` is not an acceptable answer, told to whoever fixes the kernel; None if it is."""
    if output is None:
        return "the kernel wrote no output.bin"
    if len(output) != expected.nbytes:
        return (
            f"output.bin holds {len(output)} bytes, expected {expected.nbytes} "
            f"({expected.size} float32 values of shape {expected.shape})"
        )
    got = np.frombuffer(output, dtype=np.float32).reshape(expected.shape)
    nonfinite = ~np.isfinite(got)
    if nonfinite.any():
        at = _first(nonfinite)
        return (
            f"{int(nonfinite.sum())} of {got.size} output values are NaN or Inf "
            f"(every output starts as NaN: was it written?); first at {_where(at)}: "
            f"got {got[at]}, expected {expected[at]:.6g}"
        )
    if not got.any() and expected.any():
        return "the output is all zeros but the reference is not"
    error = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    wrong = error > atol + rtol * np.abs(expected.astype(np.float64))
    if wrong.any():
        at = _first(wrong)
        return (
            f"{int(wrong.sum())} of {got.size} values differ by more than "
            f"atol={atol:g} + rtol={rtol:g} * |expected|; first at {_where(at)}: "
            f"expected {expected[at]:.6g}, got {got[at]:.6g}; max abs error {error.max():.3g}"
        )
    return None


def check_argv(trial: Trial, params: CKernelParams, sizes: dict[str, int]) -> list[str]:
    """The driver's one-call mode for the binary `kernel`: inputs.bin in, output.bin out."""
    io = [f"in={len(trial.inputs)}", f"out={trial.expected.nbytes}"]
    return ["./kernel", "check", *io, *params.size_args(sizes)]


def check(run: Runner, binary: bytes, trial: Trial, params: CKernelParams) -> None:
    files = {"kernel": binary, "inputs.bin": trial.inputs}
    argv = check_argv(trial, params, params.sizes)
    result = run(argv, files, collect=["output.bin"])
    require_ok(result, "the kernel")
    problem = compare(
        result.files.get("output.bin"), trial.expected, rtol=params.rtol, atol=params.atol
    )
    if problem:
        raise StageFailed(problem)
