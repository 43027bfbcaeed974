"""The mutator contract: parents in, one child program (plus how it was made) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from evolve.plugin.program import Program
from evolve.plugin.proposal_outcomes import Outcome


class MutationError(RuntimeError):
    """The mutator could not produce a child; the engine records it and picks again. Any
    model calls it made are attached, because they were paid for, and `outcome` says for
    the proposals ledger how it ended."""

    def __init__(
        self, message: str, calls: Sequence[Any] = (), outcome: Outcome = "failed"
    ) -> None:
        super().__init__(message)
        self.calls = tuple(calls)
        self.outcome: Outcome = outcome


@dataclass(frozen=True)
class Parent:
    id: int
    program: Program
    score: float | None
    metrics: Mapping[str, float] = field(default_factory=dict)
    feedback: str = ""


@dataclass(frozen=True)
class PastAttempt:
    """An earlier proposal on the same parent, shown so the model does not repeat it."""

    operator: str
    outcome: str  # an evolve.plugin.proposal_outcomes word, or the child's evaluation status
    summary: str  # one line: what the change was
    child_id: int | None = None
    score: float | None = None  # the child's, when it was scored
    repeated_id: int | None = None  # a duplicate's: the program of the run it repeated


@dataclass(frozen=True)
class Neighbour:
    """A program the run holds one small change from the parent, shown so that the model
    does not make it again."""

    id: int
    change: str  # the change from the parent, in a few words (evolve/mutators/small_change.py)
    status: str  # its evaluation status: pending, ok, or how it failed
    score: float | None = None


@dataclass(frozen=True)
class MutationRequest:
    parent: Parent
    others: tuple[Parent, ...]  # crossover partners and inspirations, best first
    seed: int
    model: str | None = None  # the model label to ask, when the engine's bandit chose one
    attempts: tuple[PastAttempt, ...] = ()  # the parent's recent proposals, newest first
    digest: str = ""  # the run's digest of what has worked so far
    token_cap: int | None = None  # tokens this proposal may use, as the run's budget allows
    in_flight: tuple[str, ...] = ()  # the other model proposals on the parent not answered yet
    metric_names: tuple[str, ...] = ()  # the metrics the run reports, for the prompt's legend
    neighbours: tuple[Neighbour, ...] = ()  # programs the run holds one change from the parent
    racing: tuple[Neighbour, ...] = ()  # its siblings with model proposals in flight


@dataclass(frozen=True)
class Proposal:
    program: Program
    record: dict[str, Any]  # operator and what changed; stored with the child
    calls: tuple[Any, ...] = ()  # the evolve.llm.LLMCall records that made it


class Mutator(ABC):
    """The base of every mutator plugin (registered as evolve/plugin/registry.py says). A plugin's
    constructor takes the task's `params` for it, which its `Params` model validates when the
    task loads; the built-in model operators are built with the task's model section too
    (evolve/mutators/factory.py)."""

    name: str
    Params: ClassVar[type[BaseModel]]

    @abstractmethod
    def propose(self, request: MutationRequest) -> Proposal:
        """A child of `request.parent`; MutationError says why there is none."""
