"""The schema of task.yaml. Strict: an unknown key is an error, never silently ignored."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from evolve.plugin.pip_requirements import requirement
from evolve.plugin.sandbox import Limits, Sandbox, open_sandbox
from evolve.propose.failure_streak import SAME_FAILURES
from evolve.task.run_names import NAME_PATTERN


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvaluatorSpec(Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Objective(Strict):
    """One metric to optimise; the score is the weighted sum over objectives, oriented up."""

    name: str
    direction: Literal["maximize", "minimize"]
    weight: float = Field(1.0, gt=0)


class FeatureSpec(Strict):
    """One axis of the MAP-Elites grid: a metric the evaluator reports, or `code_length`
    (the characters of the program's EVOLVE-BLOCKs), cut into `bins` equal bins over
    [min, max]; values outside fall into the end bins."""

    name: str
    min: float
    max: float
    bins: int = Field(10, ge=1, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> FeatureSpec:
        if not self.max > self.min:
            raise ValueError(f"max ({self.max:g}) must be greater than min ({self.min:g})")
        return self


class SearchSpec(Strict):
    strategy: str = Field(
        "islands",
        description="islands: ranked by score; map_elites: one elite per feature cell; "
        "pareto: the non-dominated front over the objectives; or a strategy plugin's name",
    )
    islands: int = Field(3, ge=1, le=256)
    migration_interval: int = Field(25, ge=1, description="evaluations between ring migrations")
    selection_pressure: float = Field(1.5, gt=0, description="power-law exponent over ranks")
    exploration: float = Field(0.1, ge=0, le=1, description="share of uniform parent picks")
    features: list[FeatureSpec] = Field(
        default_factory=list, description="map_elites: the grid's axes", max_length=4
    )
    novelty_threshold: float | None = Field(
        None,
        gt=0,
        le=1,
        description="a model-made child this similar (0..1, token MinHash) to a program "
        "already in the run is rejected before evaluation",
    )
    inspirations: int = Field(3, ge=0, le=10, description="other programs shown in a prompt")
    history: int = Field(5, ge=0, le=20, description="the parent's past attempts shown")
    in_flight_per_parent: int = Field(
        1,
        ge=0,
        description="model proposals in flight on one parent at most (and per scored program "
        "while the population is small); 0 lifts the limit",
    )
    digest_every: int = Field(
        20, ge=1, description="candidates between updates of the run's digest in prompts"
    )

    @model_validator(mode="after")
    def _features_fit_the_strategy(self) -> SearchSpec:
        if self.strategy == "map_elites" and not self.features:
            raise ValueError(
                "map_elites needs `features`: e.g. [{name: code_length, min: 0, max: 4000}]"
            )
        if self.strategy != "map_elites" and self.features:
            raise ValueError("`features` are the MAP-Elites grid: set strategy: map_elites")
        return self


class MutatorSpec(Strict):
    name: str
    weight: float = Field(1.0, gt=0)
    params: dict[str, Any] = Field(default_factory=dict)


class Budget(Strict):
    candidates: int | None = Field(None, ge=1)
    wall_time_s: float | None = Field(None, gt=0)
    usd: float | None = Field(None, gt=0, description="model spend that stops new proposals")
    tokens: int | None = Field(None, ge=1, description="model tokens (in + out), likewise")

    @model_validator(mode="after")
    def _some_limit(self) -> Budget:
        if self.candidates is None and self.wall_time_s is None:
            raise ValueError("set at least one of candidates or wall_time_s")
        return self


class ModelSpec(Strict):
    """`openai:MODEL`, `anthropic:MODEL`, or MODEL plus the base_url of an OpenAI-compatible
    server (vLLM, Ollama, llama.cpp, SGLang)."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = Field(None, description="env var with the key, if not the usual")
    weight: float = Field(1.0, gt=0)


class PriceSpec(Strict):
    input_per_mtok: float = Field(ge=0, description="USD per million input tokens")
    output_per_mtok: float = Field(ge=0, description="USD per million output tokens")
    cached_input_per_mtok: float | None = Field(
        None, ge=0, description="USD per million input tokens read from the prompt cache"
    )
    cache_write_per_mtok: float | None = Field(
        None, ge=0, description="USD per million input tokens written to the prompt cache"
    )


class LLMSpec(Strict):
    models: list[ModelSpec] = Field(min_length=1)
    timeout_s: float = Field(120.0, gt=0)
    max_attempts: int = Field(4, ge=1, description="per request, 429s and 5xx included")
    max_tokens: int = Field(4096, ge=1)
    concurrency: int = Field(4, ge=1, description="model requests in flight, beside evaluations")
    temperature: float | None = Field(None, ge=0, le=2)
    prices: dict[str, PriceSpec] = Field(default_factory=dict, description="by model label")
    templates: str | None = Field(None, description="folder of prompt templates that override")
    adaptive: bool = Field(
        False,
        description="choose operator and model by a cost-aware bandit, not by fixed weights",
    )
    finisher_share: float = Field(
        0.2, ge=0, lt=1, description="share of proposals that tune model-made children's knobs"
    )
    same_failures: int = Field(
        SAME_FAILURES,
        ge=1,
        description="model proposals in a row failing the same way, before any brought back "
        "a program, that stop the run",
    )


class ChampionSpec(Strict):
    """When a leading candidate is trusted: a result too good to believe is measured again,
    and crowned only when its measurements agree."""

    max_step_speedup: float = Field(
        50.0,
        gt=1,
        description="a child whose metric `speedup` is this many times its parent's is flagged",
    )
    agreement: float = Field(
        0.8,
        gt=0,
        le=1,
        description="a flagged candidate's two latest scores must agree this closely "
        "(smaller / larger) for it to be crowned",
    )


# Debian Policy 5.6.1: lower-case letters, digits, `+`, `-` and `.`, at least two
# characters, starting with a letter or digit. Checked here so that a typo fails the task
# file on its line, and so that no name can be read as an option by apt-get.
DEBIAN_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]+")


def _debian_package(name: str) -> str:
    if not DEBIAN_PACKAGE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a Debian package name (lower-case letters, digits, `+`, `-` "
            "and `.`, at least two characters, starting with a letter or digit)"
        )
    return name


class SandboxSpec(Strict):
    backend: str = Field("docker", description="docker, process, or a sandbox plugin's name")
    image: str | None = Field(None, description="docker: an image of your own, e.g. the CUDA one")
    packages: list[Annotated[str, AfterValidator(_debian_package)]] = Field(
        default_factory=list,
        description="docker: Debian packages added to the image (python3-scipy, jq); the "
        "image with them is built once, before the run, and reused",
    )
    pip: list[Annotated[str, AfterValidator(requirement)]] = Field(
        default_factory=list,
        description="PyPI requirements installed with pip, as pip reads them ('pywavelets', "
        "'scipy>=1.11'): into the image (docker), or into a Python environment kept for "
        "them (process); built once, before the run, and reused",
    )
    gpus: bool = Field(False, description="docker: pass the host's GPUs into the container")
    timeout_s: float = Field(30.0, gt=0)
    memory_mb: int = Field(2048, ge=16)
    max_processes: int = Field(64, ge=1)
    max_output_kb: int = Field(1024, ge=1)
    max_file_mb: int = Field(256, ge=1)

    def open(self) -> Sandbox:
        """A sandbox as this section describes it; SandboxUnavailable names the fix.

        Docker packages and pip requirements must have been installed first (`built`):
        opening a sandbox without them would fail every candidate that needs them, far from
        the cause. The process sandbox installs no Debian packages: its jobs run the host's
        own software."""
        if (self.packages and self.backend == "docker") or self.pip:
            raise RuntimeError(
                "sandbox.packages and sandbox.pip are not installed yet: `evolve run` "
                "installs them, or `evolve sandbox build --task TASK_FILE`"
            )
        return open_sandbox(self.backend, image=self.image, gpus=self.gpus)

    def built(self, image: str) -> SandboxSpec:
        """This section once its packages are installed in `image` (for the process backend,
        the Python environment holding its pip requirements), which sandboxes open."""
        return self.model_copy(update={"image": image, "packages": [], "pip": []})

    def limits(self) -> Limits:
        return Limits(
            timeout_s=self.timeout_s,
            memory_bytes=self.memory_mb * 1024**2,
            max_processes=self.max_processes,
            max_output_bytes=self.max_output_kb * 1024,
            max_file_bytes=self.max_file_mb * 1024**2,
        )


class TaskSpec(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    seed: list[str] = Field(min_length=1, description="program files, relative to task.yaml")
    evaluator: EvaluatorSpec
    objectives: list[Objective] = Field(min_length=1)
    search: SearchSpec = Field(default_factory=SearchSpec)
    mutators: list[MutatorSpec] = Field(
        default_factory=lambda: [MutatorSpec(name="autotuner")], min_length=1
    )
    budget: Budget
    champion: ChampionSpec = Field(default_factory=ChampionSpec)
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec)
    llm: LLMSpec | None = None
    notes: str | None = None

    @field_validator("seed", mode="before")
    @classmethod
    def _one_file_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value
