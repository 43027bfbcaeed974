"""What a task may set for the command evaluator, checked when the task file loads."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

BUILD_TAR = "__evolve_build__.tar"  # the work dir as the build left it, carried to the run
METRICS_FILE = "metrics.json"  # what the run may write instead of a last line of JSON
RESERVED = frozenset({BUILD_TAR, METRICS_FILE})


def _work_path(path: str) -> str:
    """A path in the work dir that the run writes: relative, inside it, not ours."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"{path!r}: give a path relative to the work dir, inside it")
    if path in RESERVED:
        raise ValueError(f"{path!r} is collected already: the run's metrics, or the build's")
    return path


class CommandParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    build: str | None = Field(
        None,
        min_length=1,
        description="a shell command run first, in a job of its own; the run starts from the "
        "work dir as it left it",
    )
    run: str = Field(
        min_length=1,
        description="a shell command that prints a JSON object of metrics as its last line of "
        "stdout, or writes them to metrics.json; $1 is the evaluation's seed",
    )
    check: str | None = Field(
        None,
        min_length=1,
        description="a trusted check(outputs, metrics) run outside the sandbox, which may "
        "reject the run or replace its metrics",
    )
    files: list[str] = Field(
        default_factory=list,
        description="globs, relative to the task folder, of the task's files that the "
        "commands need in the work dir",
    )
    outputs: list[Annotated[str, AfterValidator(_work_path)]] = Field(
        default_factory=list,
        description="files the run writes, relative to the work dir, collected for check",
    )

    @model_validator(mode="after")
    def _outputs_need_a_check(self) -> CommandParams:
        if self.outputs and self.check is None:
            raise ValueError("outputs are collected only for check: give check, or drop them")
        return self
