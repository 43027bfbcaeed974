"""Evaluate C kernels: build in the sandbox, check against a trusted reference, time the calls."""

from evolve.evaluators.c_kernel.evaluator import CKernelEvaluator

__all__ = ["CKernelEvaluator"]
