"""What a task may set for the python evaluator, checked when the task file loads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, FiniteFloat

# OpenEvolve's defaults: stage 1 must reach 0.5 for stage 2 to run, stage 2 0.75 for stage 3.
DEFAULT_THRESHOLDS = (0.5, 0.75, 0.9)


class PythonParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    evaluator: str = Field(
        "evaluator.py",
        min_length=1,
        description="the task's evaluator, whose evaluate(program_path) (or evaluate_stage1..3) "
        "runs beside the candidate in the sandbox",
    )
    verify: str | None = Field(
        None,
        min_length=1,
        description="a trusted verify(metrics, artifacts) -> metrics run outside the sandbox; "
        "when given, only what it returns is scored",
    )
    files: list[str] | None = Field(
        None,
        description="globs, relative to the task folder, of the files the evaluator needs in "
        "the sandbox; default: every other file under the folder, subfolders included",
    )
    cascade: bool = Field(
        True, description="run evaluate_stage1..3 when evaluator.py defines them; else evaluate"
    )
    cascade_thresholds: list[FiniteFloat] = Field(
        default_factory=lambda: list(DEFAULT_THRESHOLDS),
        description="the score stage N must reach for stage N+1 to run; a stage without a "
        "threshold lets the next one run",
    )
