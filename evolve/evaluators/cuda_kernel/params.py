"""What a task may set for the cuda_kernel evaluator, checked when the task file loads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

Dims = dict[str, int]


class CudaKernelParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: str = Field(description="trusted numpy reference (reference.py), task-relative")
    reference_kernel: str = Field(description="trusted CUDA reference (timed), task-relative")
    launch: str = Field(description="trusted adapter header the runner includes, task-relative")
    entry: str = Field(pattern=r"^[A-Za-z_]\w*$", description="the candidate's extern C symbol")
    dims: list[str] = Field(min_length=1, description="dimension names, in the adapter's order")
    shapes: list[Dims] = Field(min_length=3, description="shapes the correctness rounds cycle")
    timing_shape: Dims = Field(description="the shape that is timed and counted")
    rounds: int = Field(6, ge=5, le=32, description="correctness rounds, fresh inputs each")
    rtol: float | None = Field(None, ge=0, description="default 1e-4 (fp32) or 1e-2 (half)")
    atol: float | None = Field(None, ge=0, description="default 1e-4 (fp32) or 1e-2 (half)")
    rel_l2: float | None = Field(None, ge=0, description="whole-tensor bound, default rtol / 10")
    arch: str = Field("auto", pattern=r"^(auto|sm_\d+a?)$", description="auto: the GPU's own")
    offline_arch: str = Field("sm_80", pattern=r"^sm_\d+a?$", description="compile-only target")
    nvcc_flags: list[str] = Field(default_factory=lambda: ["-O3"])
    warmup: int = Field(3, ge=1)
    min_reps: int = Field(20, ge=5, description="timed calls: a random count in [min, max]")
    max_reps: int = Field(40, ge=5)
    timing_sets: int = Field(2, ge=1, le=8, description="distinct input sets the reps rotate")
    speedup_flag: float = Field(10.0, gt=1, description="speedups above this are flagged")
    peak_gflops: float | None = Field(None, gt=0, description="roofline peak, default detected")
    peak_gbps: float | None = Field(None, gt=0, description="roofline bandwidth, default detected")
    counters: bool = Field(True, description="collect ncu counters when ncu is present")
    counter_timeout_s: float = Field(180, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> CudaKernelParams:
        if self.max_reps < self.min_reps:
            raise ValueError(f"max_reps {self.max_reps} is below min_reps {self.min_reps}")
        for shape in [*self.shapes, self.timing_shape]:
            if sorted(shape) != sorted(self.dims):
                raise ValueError(f"shape {shape} must give exactly the dims {self.dims}")
            if any(value < 1 for value in shape.values()):
                raise ValueError(f"shape {shape} has a non-positive size")
        if self.min_reps < self.timing_sets:
            raise ValueError("min_reps must be at least timing_sets: every set gets timed")
        return self

    def ordered(self, shape: Dims) -> list[int]:
        """A shape's sizes in the adapter's order."""
        return [shape[name] for name in self.dims]
