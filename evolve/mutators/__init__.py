"""Mutators: how a child is made from its parents. A task names them by the names they are
registered under (evolve/plugin/registry.py; the built-ins in pyproject.toml)."""

from evolve.mutators.agent import Agent
from evolve.mutators.autotuner import Autotuner
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Parent, Proposal
from evolve.mutators.llm import LLMEditor

EDIT_OPERATORS = ("diff", "rewrite", "crossover", "fix")
LLM_OPERATORS = (*EDIT_OPERATORS, "agent")

__all__ = [
    "EDIT_OPERATORS",
    "LLM_OPERATORS",
    "Agent",
    "Autotuner",
    "LLMEditor",
    "MutationError",
    "MutationRequest",
    "Mutator",
    "Parent",
    "Proposal",
]
