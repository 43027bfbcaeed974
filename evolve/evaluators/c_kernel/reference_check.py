"""The task's reference run once when the task loads, so that a broken one is one clear line
on its key (exit 2) instead of an error in every evaluation.

It is imported, asked for one input set at `sizes` (and at `counter_sizes`) from a fixed
seed, and asked for the answer; the arrays must then fit what the task declares (count,
dtypes, compare slices). The inputs drawn here are never a candidate's: those come from
the run's secret salt (oracle.py).
"""

from __future__ import annotations

import traceback
from pathlib import Path

from evolve.evaluators.c_kernel.oracle import Mismatch, Oracle
from evolve.plugin.taskpaths import TaskPathError

LOAD_ENTROPY = (0,)


def vet(oracle: Oracle) -> None:
    """TaskPathError naming the param to fix (`reference`, `inputs`, `outputs`) and why."""
    params = oracle.params
    shown = params.reference
    try:
        oracle.module()
    except Mismatch as exc:
        raise TaskPathError(exc.param, exc.message) from None
    except SyntaxError as exc:
        line = exc.lineno if Path(exc.filename or "") == Path(oracle.filename) else "?"
        raise TaskPathError("reference", f"{shown}:{line}: SyntaxError: {exc.msg}") from None
    except Exception as exc:  # whatever its top level raised
        raise TaskPathError("reference", _raised(exc, oracle.filename, shown)) from None
    counted = params.counted_sizes()
    for sizes in [params.sizes] + ([counted] if counted != params.sizes else []):
        try:
            oracle.trial(LOAD_ENTROPY, sizes)
        except Mismatch as exc:
            raise TaskPathError(exc.param, f"{exc.message} (at sizes {sizes})") from None
        except Exception as exc:
            message = f"{_raised(exc, oracle.filename, shown)} (at sizes {sizes})"
            raise TaskPathError("reference", message) from None


def _raised(exc: BaseException, filename: str, shown: str) -> str:
    """`reference.py:12 (in make_inputs): KeyError: 'm'`: the line of the reference's own
    code nearest the error, so a call into numpy that failed points at the caller."""
    ours = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    where = f"{shown}:{ours[-1].lineno} (in {ours[-1].name})" if ours else shown
    return f"{where}: {type(exc).__name__}: {exc}"
