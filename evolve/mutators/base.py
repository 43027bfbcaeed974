"""The mutator contract: parents in, one child program (plus how it was made) out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evolve.program import Program


class MutationError(RuntimeError):
    """The mutator could not produce a child; the engine records it and picks again. Any
    model calls it made are attached, because they were paid for."""

    def __init__(self, message: str, calls: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.calls = tuple(calls)


@dataclass(frozen=True)
class Parent:
    id: int
    program: Program
    score: float | None
    metrics: Mapping[str, float] = field(default_factory=dict)
    feedback: str = ""


@dataclass(frozen=True)
class MutationRequest:
    parent: Parent
    others: tuple[Parent, ...]  # crossover partners and inspirations, best first
    seed: int
    model: str | None = None  # the model label to ask, when the engine's bandit chose one


@dataclass(frozen=True)
class Proposal:
    program: Program
    record: dict[str, Any]  # operator and what changed; stored with the child
    calls: tuple[Any, ...] = ()  # the evolve.llm.LLMCall records that made it


class Mutator(Protocol):
    name: str

    def __init__(self, params: Mapping[str, Any]) -> None: ...

    def propose(self, request: MutationRequest) -> Proposal: ...
