"""Run-level figures for CUDA kernels, as KernelBench reports them: how many candidates were
correct, how their speedups spread, and fast_p, the share of all candidates that are both
correct and more than p times faster than the reference."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from evolve.evaluators.cuda_kernel.timing import FAST_P
from evolve.plugin.results import EvalResult


def summarise(results: Iterable[EvalResult]) -> dict[str, float]:
    """correct_rate, speedup p10/median/p90 over correct candidates, and fast_p per p."""
    results = list(results)
    if not results:
        return {}
    speedups = np.array([r.metrics["speedup"] for r in results if r.ok and "speedup" in r.metrics])
    summary = {"candidates": float(len(results)), "correct_rate": len(speedups) / len(results)}
    if len(speedups):
        p10, median, p90 = np.percentile(speedups, [10, 50, 90])
        summary |= {"speedup_p10": p10, "speedup_median": median, "speedup_p90": p90}
    for p in FAST_P:
        summary[f"fast_{p:g}"] = float((speedups > p).sum()) / len(results)
    return {name: float(value) for name, value in summary.items()}
