"""What a task may set for the llvm_inline evaluator, checked when the task file loads."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class LLVMInlineParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    policy_language: Literal["python", "cpp"] = Field(
        "python",
        description="python: should_inline(features) answers clang's ML channel; cpp: "
        "shouldInline(site) is built into a pass plugin's inline advisor",
    )
    clang: str = Field("clang-19", description="the compiler in the sandbox image")
    cxx: str = Field("clang++-19", description="builds the cpp route's plugin in the sandbox")
    llvm_config: str = Field("llvm-config-19", description="the plugin's LLVM flags")
    size_tool: str = Field("llvm-size-19", description="measures .text in the sandbox")
    opt_level: str = Field(
        "-Oz",
        pattern=r"^-O[sz123]$",
        description="the pipeline the policy joins; guards compare with its stock build",
    )
    reference_level: str = Field(
        "-Oz", pattern=r"^-O[sz123]$", description="sizes are ratios to it"
    )
    flags: list[str] = Field(default_factory=lambda: ["-w"], description="added to every compile")
    include_default: bool = Field(
        True, description="give the policy LLVM's own advice as features['inlining_default']"
    )
    large: bool = Field(False, description="add sqlite3.c and its shell (~15 s) to held-out")
    gate_on_seed: bool = Field(
        True,
        description="compile the training corpus only if the fast tier is no worse than the seed's",
    )
    decision_timeout_ms: float = Field(
        50.0, gt=0, description="per should_inline call (python; cpp is bounded per file)"
    )
    import_timeout_s: float = Field(5.0, gt=0, description="for importing the policy (python)")
    plugin_timeout_s: float = Field(
        30.0, gt=0, description="per file compiled with the policy's plugin loaded (cpp)"
    )
    guard_timeout_s: float = Field(20.0, gt=0, description="per guard program: link and run")
    corpus_dir: str | None = Field(
        None,
        description="a corpus inside the task folder; default: the user cache (EVOLVE_CACHE_DIR "
        "moves it), fetched if absent",
    )
