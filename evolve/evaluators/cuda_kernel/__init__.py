"""Evaluate CUDA kernels: static rules, nvcc, a trusted runner on the GPU, a host-side verifier."""

from evolve.evaluators.cuda_kernel.evaluator import CudaKernelEvaluator

__all__ = ["CudaKernelEvaluator"]
