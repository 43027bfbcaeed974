"""Mutators by the name a task.yaml uses for them."""

from evolve.mutators.autotuner import Autotuner
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Parent, Proposal
from evolve.mutators.llm import LLMEditor

LLM_OPERATORS = ("diff", "rewrite", "crossover", "fix")
MUTATORS: dict[str, type] = {"autotuner": Autotuner, **dict.fromkeys(LLM_OPERATORS, LLMEditor)}

__all__ = [
    "LLM_OPERATORS",
    "MUTATORS",
    "Autotuner",
    "LLMEditor",
    "MutationError",
    "MutationRequest",
    "Mutator",
    "Parent",
    "Proposal",
]
