"""What a task may set for the code_layout evaluator, checked when the task file loads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CACHE = r"^\d+,\d+,\d+$"  # valgrind's SIZE,ASSOCIATIVITY,LINE_SIZE


class CodeLayoutParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    program: Literal["sqlite", "lua"] = Field(
        description="the real program whose function order is evolved"
    )
    workloads: str = Field(
        "workloads",
        description="a folder in the task with train/ and heldout/ workloads (SQL or Lua files)",
    )
    cc: str = Field("clang-19", description="compiles and links (with ld.lld-19) in the sandbox")
    objdump: str = Field("llvm-objdump-19", description="reads the objects' symbol tables")
    cflags: list[str] = Field(
        default_factory=lambda: ["-O2", "-w"],
        description="added to the recipe's own; -ffunction-sections and -fno-pie always are",
    )
    i1: str = Field(
        "16384,4,64",
        pattern=CACHE,
        description="the simulated L1 instruction cache: small, so that the layout matters",
    )
    d1: str = Field("32768,8,64", pattern=CACHE, description="the simulated L1 data cache")
    ll: str = Field("1048576,16,64", pattern=CACHE, description="the simulated last level")
    order_timeout_s: float = Field(10.0, gt=0, description="for one call of order()")
    import_timeout_s: float = Field(5.0, gt=0, description="for importing the candidate")
    workload_timeout_s: float = Field(
        20.0, gt=0, description="per native run of a workload; callgrind gets 100 times more"
    )
    wall_repeats: int = Field(3, ge=1, le=50, description="native runs per workload, timed")
    perf_events: list[str] = Field(
        default_factory=lambda: ["iTLB-load-misses", "L1-icache-load-misses"],
        description="counted with perf where the PMU is readable; [] turns perf off",
    )
