"""The task's trusted reference: inputs, expected outputs and the work of a call, computed
outside the sandbox.

Evaluators are pickled and shipped to Ray workers, so they carry the reference's text and
never its module; the cache means each process executes a given text only once.

Every set of inputs is drawn from its own entropy, `(salt, evaluation seed, purpose,
index)`, so the check, each timed call, the counted call and the sanitizer run each see
inputs that no other run saw: an answer cached from one cannot serve another. The salt is
secret and new for every `evolve run`: without it, two runs with the same `--seed` would
draw the same inputs, and a cache kept between them (in /dev/shm, say) would pay off.
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evolve.evaluators.c_kernel import layout, region
from evolve.evaluators.c_kernel.dtypes import DEFAULT, conform
from evolve.evaluators.c_kernel.params import CKernelParams, InputSpec, OutputSpec
from evolve.evaluators.task_files import load_reference

REQUIRED = ("make_inputs", "reference")
OPTIONAL = ("flops", "bytes_moved", "work")

# What a set of inputs is for: the word after the salt and seed in its entropy.
CHECK, TIMED, RETIMED, COUNTED, SANITIZED = range(5)


class Mismatch(ValueError):
    """The reference's arrays do not fit what the task declares; `param` is the key whose
    line the task loader points at."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(param, message)
        self.param, self.message = param, message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Expected:
    """One output as the kernel must write it."""

    label: str  # how feedback names it: "output `counts`", "the output"
    values: np.ndarray  # in the output's dtype
    compared: np.ndarray | None  # the elements compared (booleans), None for all
    tolerances: tuple[float, float] | None  # (rtol, atol); None: integers, exactly


@dataclass(frozen=True)
class Trial:
    """One call's inputs as the driver reads them, and the answers they must produce."""

    inputs: bytes  # every input at its offset (layout.py)
    input_bytes: tuple[int, ...]
    expected: tuple[Expected, ...]
    flops: float | None  # the reference's `flops`, if it has one
    bytes_moved: float  # its `bytes_moved`, else the inputs read and the outputs written once
    traffic_stated: bool  # whether bytes_moved is the reference's own
    work: float | None  # its `work`, in the task's work_unit

    @property
    def output_bytes(self) -> tuple[int, ...]:
        return tuple(expected.values.nbytes for expected in self.expected)

    def io_args(self) -> list[str]:
        """The driver's buffer arguments: each array's byte count, `in=...` and `out=...`."""
        return [layout.argument("in", self.input_bytes), layout.argument("out", self.output_bytes)]


@dataclass(frozen=True)
class Oracle:
    """The reference's text and the task's declarations: all a worker needs to draw trials."""

    text: str
    filename: str
    params: CKernelParams

    def module(self) -> types.ModuleType:
        module = load_reference(self.text, self.filename, ())
        missing = [name for name in REQUIRED if not callable(getattr(module, name, None))]
        if missing:
            raise Mismatch(
                "reference",
                f"{self.params.reference} must define make_inputs(rng, sizes) and "
                f"reference(inputs, sizes); it lacks {', '.join(missing)}",
            )
        return module

    def defines(self, name: str) -> bool:
        return callable(getattr(self.module(), name, None))

    def trial(self, entropy: int | Sequence[int], sizes: Mapping[str, int]) -> Trial:
        reference, sizes = self.module(), dict(sizes)
        drawn = reference.make_inputs(np.random.default_rng(entropy), sizes)
        if isinstance(drawn, np.ndarray) or not isinstance(drawn, Sequence):
            raise Mismatch(
                "reference",
                f"make_inputs returned {type(drawn).__name__}: return a list of arrays, "
                "one per input",
            )
        inputs = _conform_all(list(drawn), self.params.inputs, "inputs", "make_inputs")
        answer = reference.reference(inputs, sizes)
        answers = list(answer) if isinstance(answer, list | tuple) else [answer]
        if isinstance(answer, list | tuple) and not all(isinstance(a, np.ndarray) for a in answers):
            raise Mismatch(
                "reference",
                "reference returned a list holding something other than arrays: return one "
                "numpy array, or a list of arrays with one per output",
            )
        outputs = _conform_all(answers, self.params.outputs, "outputs", "reference")
        expected = tuple(
            self._expected(i, len(outputs), values, raw)
            for i, (values, raw) in enumerate(zip(outputs, answers, strict=True))
        )
        moved = _optional(reference, "bytes_moved", sizes)
        traffic = sum(x.nbytes for x in inputs) + sum(x.nbytes for x in outputs)
        return Trial(
            inputs=layout.pack(inputs),
            input_bytes=tuple(x.nbytes for x in inputs),
            expected=expected,
            flops=_optional(reference, "flops", sizes),
            bytes_moved=float(traffic) if moved is None else moved,
            traffic_stated=moved is not None,
            work=_optional(reference, "work", sizes),
        )

    def trials(
        self, entropy: tuple[int, ...], purpose: int, count: int, sizes: Mapping[str, int]
    ) -> list[Trial]:
        """`count` distinct sets for one purpose of one evaluation (`entropy`: salt and seed).

        Computed here, before the job: answering on a thread while the sandbox forks its job
        deadlocks OpenBLAS, whose fork handler waits for the call in flight.
        """
        return [self.trial((*entropy, purpose, i), sizes) for i in range(count)]

    def _expected(self, index: int, count: int, values: np.ndarray, raw: object) -> Expected:
        spec = self.params.outputs[index] if self.params.outputs else None
        label = _label(index, spec, count)
        if values.size == 0:
            raise Mismatch("reference", f"{label} is empty: a kernel must write something")
        masked = np.ma.getmaskarray(raw) if isinstance(raw, np.ma.MaskedArray) else None
        compare = spec.compare if spec else None
        compared = None
        if compare is not None or masked is not None:
            try:
                compared = region.compared(compare, values.shape, masked)
            except ValueError as exc:
                where = f"{_place(index, spec)}: " if compare else ""
                raise Mismatch("outputs" if compare else "reference", f"{where}{exc}") from None
        return Expected(label, values, compared, self.params.tolerances(index))


def _conform_all(
    arrays: list[object], declared: Sequence[InputSpec] | None, key: str, function: str
) -> list[np.ndarray]:
    if declared is not None and len(arrays) != len(declared):
        names = ", ".join(spec.name for spec in declared)
        raise Mismatch(
            key,
            f"{function} returned {len(arrays)} array(s), but `{key}` declares "
            f"{len(declared)} ({names})",
        )
    converted = []
    for i, array in enumerate(arrays):
        spec = declared[i] if declared is not None else None
        what = f"{_place(i, spec, key)} from {function}"
        dtype = spec.dtype if spec else DEFAULT
        try:
            converted.append(conform(array, dtype, declared=spec is not None, what=what, key=key))
        except ValueError as exc:
            raise Mismatch(key if spec else "reference", str(exc)) from None
    return converted


def _place(index: int, spec: InputSpec | None, key: str = "outputs") -> str:
    return f"{key}[{index}]" + (f" ({spec.name})" if spec else "")


def _label(index: int, spec: OutputSpec | None, count: int) -> str:
    if spec is not None:
        return f"output `{spec.name}`"
    return f"outputs[{index}]" if count > 1 else "the output"


def _optional(reference: types.ModuleType, name: str, sizes: dict[str, int]) -> float | None:
    function = getattr(reference, name, None)
    if not callable(function):
        return None
    value = function(sizes)
    if not isinstance(value, numbers.Real) or value < 0:
        raise Mismatch("reference", f"{name}(sizes) returned {value!r}, not a number >= 0")
    return float(value)
