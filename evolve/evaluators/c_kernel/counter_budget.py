"""Which candidates are worth counting: cachegrind costs seconds per candidate, often more
than the timing itself, and a count explains a time only where the time matters.

The state is the evaluating worker's own (the best speedup it has measured, how many
candidates passed), so no worker waits on another; with several workers each one counts
what is promising by its own lights.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolve.evaluators.c_kernel.params import CKernelParams


@dataclass
class CounterBudget:
    params: CKernelParams
    best_speedup: float = 1.0  # the seed's own, until something beats it
    passed: int = 0

    def skip_reason(self, metrics: dict[str, float]) -> str | None:
        """Why this passing candidate goes uncounted, or None to count it."""
        speedup = metrics.get("speedup", 1.0)
        self.passed += 1
        best, self.best_speedup = self.best_speedup, max(self.best_speedup, speedup)
        if self.params.counters == "always" or self.passed % self.params.counter_every == 0:
            return None
        reach = self.params.counter_reach * best
        if speedup >= reach:
            return None
        return (
            f"counters skipped: speedup {speedup:.3g}x is below {self.params.counter_reach:.0%} "
            f"of the best this worker has measured ({best:.3g}x); candidates within reach, "
            f"and every {self.params.counter_every}th, are counted"
        )
