"""Evaluate Python programs with an OpenEvolve-style evaluator.py, run beside them in a sandbox."""

from evolve.evaluators.python.evaluator import PythonEvaluator

__all__ = ["PythonEvaluator"]
