"""What a task may set for the c_kernel evaluator, checked when the task file loads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


class CKernelParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    harness: str = Field(
        description="C file with evolve_setup and evolve_call (driver/evolve_kernel.h), "
        "relative to the task dir"
    )
    reference: str = Field(description="trusted Python reference, relative to the task dir")
    entry: str = Field("matmul", pattern=r"^[A-Za-z_]\w*$", description="the one global symbol")
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
    rtol: float = Field(1e-3, ge=0)
    atol: float = Field(1e-3, ge=0)
    sizes: dict[str, int] = Field(default_factory=lambda: {"n": 512})
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
        None, description="sizes for the counted call, default `sizes`: cachegrind is ~50x slower"
    )
    counter_timeout_s: float = Field(120, gt=0, description="limit for the counted call")

    @field_validator("counters", mode="before")
    @classmethod
    def _yes_or_no(cls, value: object) -> object:
        if isinstance(value, bool):
            return "promising" if value else "never"
        return value

    @model_validator(mode="after")
    def _defaults_are_allowed(self) -> CKernelParams:
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

    def counted_sizes(self) -> dict[str, int]:
        return self.sizes if self.counter_sizes is None else self.counter_sizes

    def size_args(self, sizes: Mapping[str, int] | None = None) -> list[str]:
        """Sizes (default `sizes`) as the harness reads them from argv: `key=value`."""
        return [f"{key}={value}" for key, value in (self.sizes if sizes is None else sizes).items()]
