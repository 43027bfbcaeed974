"""What a task may set for the c_kernel evaluator, checked when the task file loads."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from evolve.evaluators.c_kernel import region
from evolve.evaluators.c_kernel import signature as prototype
from evolve.evaluators.c_kernel.dtypes import DType, is_float

DEFAULT_ALLOWED_FLAGS = (
    "-O0",
    "-O1",
    "-O2",
    "-O3",
    "-Os",
    "-Ofast",
    "-march=native",
    "-mtune=native",
    "-mavx2",
    "-mfma",
    "-funroll-loops",
    "-funroll-all-loops",
    "-ffast-math",
    "-fno-math-errno",
    "-ftree-vectorize",
    "-fno-tree-vectorize",
    "-fprefetch-loop-arrays",
    "-fomit-frame-pointer",
    "-flto",
)


IDENTIFIER = r"^[A-Za-z_]\w*$"
# What a size may not be called: the driver's own arguments, and C's keywords, since a size
# becomes a parameter in the entry's prototype.
RESERVED = frozenset({"in", "out"}) | prototype.KEYWORDS


class InputSpec(BaseModel):
    """One array make_inputs returns, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=IDENTIFIER, description="its parameter's name in `signature`")
    dtype: DType = Field(description="the C element type it is passed as")


class OutputSpec(InputSpec):
    """One array `reference` returns, in order."""

    compare: str | None = Field(
        None, description="the region compared, a numpy slice such as `1:-1, 1:-1`; default all"
    )
    rtol: float | None = Field(None, ge=0, description="default: the task's (floats), 0 (ints)")
    atol: float | None = Field(None, ge=0, description="default: the task's (floats), 0 (ints)")

    @field_validator("compare")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None:
            region.parse(value)
        return value

    def tolerances(self, rtol: float, atol: float) -> tuple[float, float] | None:
        """(rtol, atol) for this output given the task's; None: integers, compared exactly."""
        if is_float(self.dtype):
            return (
                rtol if self.rtol is None else self.rtol,
                atol if self.atol is None else self.atol,
            )
        if self.rtol is None and self.atol is None:
            return None
        return self.rtol or 0.0, self.atol or 0.0


class CKernelParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = Field(description="trusted Python reference, relative to the task dir")
    entry: str = Field(pattern=IDENTIFIER, description="the one global symbol: the kernel")
    sizes: dict[str, int] = Field(default_factory=lambda: {"n": 512})
    inputs: list[InputSpec] | None = Field(
        None, description="make_inputs' arrays, in order; default: as many float32 as it gives"
    )
    outputs: list[OutputSpec] | None = Field(
        None, description="reference's arrays, in order; default: as many float32 as it gives"
    )
    harness: str | None = Field(
        None,
        description="C file with evolve_setup and evolve_call (driver/evolve_kernel.h), "
        "relative to the task dir; or give `signature`",
    )
    signature: str | None = Field(
        None, description="the entry's C prototype, from which the evaluator writes the harness"
    )
    work_unit: str = Field(
        "items", pattern=IDENTIFIER, description="what reference.py's work() counts"
    )
    compiler: str = "gcc"
    default_flags: str = Field("-O2", description="used when the candidate has no cflags line")
    allowed_flags: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOWED_FLAGS))
    reps: int = Field(7, ge=5, description="timed calls of the candidate, and of the seed")
    warmup: int = Field(1, ge=1, le=10, description="untimed calls of each before timing")
    give_up_factor: float = Field(
        10.0, gt=1, description="stop timing a candidate whose call takes this many seed calls"
    )
    give_up_min_s: float = Field(0.5, gt=0, description="but never stop a call sooner than this")
    peak_gflops: float | None = Field(
        None, gt=0, description="the roofline's fp32 peak; default derived from the CPU"
    )
    peak_gbps: float | None = Field(
        None, gt=0, description="the roofline's memory bandwidth; default measured"
    )
    threads: int = Field(1, ge=1, description="cores a kernel may use, for the roofline")
    rtol: float = Field(1e-3, ge=0, description="float outputs: relative tolerance")
    atol: float = Field(1e-3, ge=0, description="float outputs: absolute tolerance")
    sanitize: bool = Field(
        False, description="after check: rerun it under ASan+UBSan (and MSan, with clang-19)"
    )
    counters: Literal["always", "promising", "never"] = Field(
        "promising",
        description="count one call's events: every passing candidate, those within reach "
        "of the best (and every Nth), or none; true and false mean promising and never",
    )
    counter_tool: Literal["auto", "cachegrind"] = Field(
        "auto", description="auto: perf where the CPU's counters are readable, else cachegrind"
    )
    counter_reach: float = Field(
        0.5, gt=0, le=1, description="promising: speedup at least this share of the best seen"
    )
    counter_every: int = Field(10, ge=1, description="promising: and every Nth passing candidate")
    counter_sizes: dict[str, int] | None = Field(
        None,
        description="sizes for the counted call (cachegrind is ~50x slower); default `sizes`, "
        "halved while counting the seed there takes over 2 s",
    )
    counter_timeout_s: float = Field(120, gt=0, description="limit for the counted call")

    @field_validator("counters", mode="before")
    @classmethod
    def _yes_or_no(cls, value: object) -> object:
        if isinstance(value, bool):
            return "promising" if value else "never"
        return value

    @field_validator("sizes")
    @classmethod
    def _size_names(cls, sizes: dict[str, int]) -> dict[str, int]:
        bad = [name for name in sizes if not re.fullmatch(IDENTIFIER, name) or name in RESERVED]
        if bad:
            raise ValueError(
                f"size names must be C identifiers other than `in`, `out` and keywords: {bad}"
            )
        return sizes

    @field_validator("signature")
    @classmethod
    def _signature_fits(cls, text: str | None, info: ValidationInfo) -> str | None:
        """The prototype parses and matches the declared arrays and sizes (those that
        validated: a field that failed has its own error)."""
        if text is None:
            return None
        parsed = prototype.parse(text)
        known = info.data
        if {"entry", "sizes", "inputs", "outputs"} <= known.keys():
            if known["inputs"] is None or known["outputs"] is None:
                raise ValueError(
                    "a signature names its arrays: declare `inputs` and `outputs` "
                    "(`[{name: A, dtype: float32}, ...]`) for its pointer parameters"
                )
            if not _shared_names(known["inputs"], known["outputs"], known["sizes"]):
                prototype.check(parsed, known["entry"], _arrays(known), list(known["sizes"]))
        return text

    @model_validator(mode="after")
    def _consistent(self) -> CKernelParams:
        if (self.harness is None) == (self.signature is None):
            raise ValueError(
                "give either `signature` (the entry's C prototype; the evaluator writes the "
                "harness) or `harness` (your own harness.c), not both"
                if self.harness
                else "give `signature`, the entry's C prototype (or `harness`, a harness.c)"
            )
        twice = _shared_names(self.inputs, self.outputs, self.sizes)
        if twice:
            raise ValueError(f"each input, output and size needs a name of its own: {twice}")
        names = [spec.name for spec in [*(self.inputs or ()), *(self.outputs or ())]]
        keywords = sorted(set(names) & prototype.KEYWORDS)
        if keywords:
            raise ValueError(f"{keywords}: C keywords cannot name an array")
        outside = [f for f in self.default_flags.split() if f not in self.allowed_flags]
        if outside:
            raise ValueError(f"default_flags {outside} are not in allowed_flags")
        if any(value < 1 for value in self.sizes.values()):
            raise ValueError(f"sizes must be positive integers, got {self.sizes}")
        counted = self.counted_sizes()
        if counted.keys() != self.sizes.keys() or any(value < 1 for value in counted.values()):
            raise ValueError(
                f"counter_sizes must give a positive value for each of {sorted(self.sizes)}, "
                f"got {counted}"
            )
        return self

    def tolerances(self, index: int) -> tuple[float, float] | None:
        """(rtol, atol) for output `index`; None where it is an integer compared exactly."""
        if self.outputs is None:
            return self.rtol, self.atol
        return self.outputs[index].tolerances(self.rtol, self.atol)

    def counted_sizes(self) -> dict[str, int]:
        return self.sizes if self.counter_sizes is None else self.counter_sizes

    def size_args(self, sizes: Mapping[str, int] | None = None) -> list[str]:
        """Sizes (default `sizes`) as the harness reads them from argv: `key=value`."""
        return [f"{key}={value}" for key, value in (self.sizes if sizes is None else sizes).items()]


def _arrays(known: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Each declared array's name: its place in the task (`inputs[0]`) and its dtype."""
    return {
        spec.name: (f"{key}[{i}]", spec.dtype)
        for key in ("inputs", "outputs")
        for i, spec in enumerate(known[key])
    }


def _shared_names(
    inputs: list[InputSpec] | None, outputs: list[OutputSpec] | None, sizes: Mapping[str, int]
) -> list[str]:
    """The names that more than one input, output or size has."""
    names = [spec.name for spec in [*(inputs or ()), *(outputs or ())]] + list(sizes)
    return sorted({name for name in names if names.count(name) > 1})
