"""Mutators by the name a task.yaml uses for them."""

from evolve.mutators.agent import Agent
from evolve.mutators.autotuner import Autotuner
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Parent, Proposal
from evolve.mutators.llm import LLMEditor

EDIT_OPERATORS = ("diff", "rewrite", "crossover", "fix")
LLM_OPERATORS = (*EDIT_OPERATORS, "agent")
MUTATORS: dict[str, type] = {
    "autotuner": Autotuner,
    "agent": Agent,
    **dict.fromkeys(EDIT_OPERATORS, LLMEditor),
}

__all__ = [
    "EDIT_OPERATORS",
    "LLM_OPERATORS",
    "MUTATORS",
    "Agent",
    "Autotuner",
    "LLMEditor",
    "MutationError",
    "MutationRequest",
    "Mutator",
    "Parent",
    "Proposal",
]
