"""Evolves the order of a program's functions in its binary, scored by simulated I-cache misses."""

from evolve.evaluators.code_layout.evaluator import CodeLayoutEvaluator

__all__ = ["CodeLayoutEvaluator"]
