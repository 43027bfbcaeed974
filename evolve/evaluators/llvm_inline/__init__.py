"""Evolve clang-19's inlining decisions for code size, through its interactive ML channel."""

from evolve.evaluators.llvm_inline.evaluator import LLVMInlineEvaluator

__all__ = ["LLVMInlineEvaluator"]
