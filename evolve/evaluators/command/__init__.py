"""Evaluate programs in any language, of any number of files, with the task's shell commands."""

from evolve.evaluators.command.evaluator import CommandEvaluator

__all__ = ["CommandEvaluator"]
