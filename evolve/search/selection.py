"""Rank sampling in O(1): no normalising sum over the population is ever computed."""

from __future__ import annotations

import math
import random


def power_law_rank(rng: random.Random, n: int, exponent: float) -> int:
    """A 0-based rank in [0, n) with P(rank r) roughly proportional to (r + 1) ** -exponent.

    Inverse-CDF sampling of the continuous density x ** -exponent on [1, n + 1), floored;
    the cost is constant in n, which keeps selection flat as the population grows.
    """
    if n <= 1:
        return 0
    u = rng.random()
    if math.isclose(exponent, 1.0):
        x = (n + 1) ** u
    else:
        a = 1.0 - exponent
        x = (((n + 1) ** a - 1.0) * u + 1.0) ** (1.0 / a)
    return min(max(int(x) - 1, 0), n - 1)
