"""From metrics to the one number that ranks candidates (higher is always better)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from evolve.task.schema import Objective


def score(metrics: Mapping[str, float], objectives: Sequence[Objective]) -> float | None:
    """Weighted sum of the objectives, each turned so that up is better; None if a metric
    is missing or not finite, because a number we cannot trust must not rank."""
    total = 0.0
    for objective in objectives:
        value = metrics.get(objective.name)
        if value is None or not math.isfinite(value):
            return None
        sign = 1.0 if objective.direction == "maximize" else -1.0
        total += objective.weight * sign * value
    return total
