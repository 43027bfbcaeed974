"""The sizes the counters stage counts at where a task names no `counter_sizes`.

A counted call runs under perf or, far slower, cachegrind (~50x a timed call), and every
counted candidate pays it: at a task's full sizes a call of a second costs the better part of
a minute. So the seed is counted at the full sizes first, and while that takes longer than
COUNT_BUDGET_S every size is halved, as long as the reference still answers at the halved
sizes and the seed's counted call still passes there. The sizes reached hold for the whole
run, so every candidate's counts compare with the seed's at the same sizes; the counters'
own line names them. A task's `counter_sizes` are used as given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from evolve.evaluators.c_kernel.oracle import Oracle
from evolve.plugin.results import Counter

log = logging.getLogger(__name__)

COUNT_BUDGET_S = 2.0  # the seed's counted call, at most, where the task names no sizes
HALVINGS = 5  # at most 1/32 of each size
PROBE_ENTROPY = (1,)  # the reference's answer at smaller sizes, asked once at set-up

Counted = dict[str, Counter]


def halved(sizes: dict[str, int]) -> dict[str, int]:
    return {name: max(value // 2, 1) for name, value in sizes.items()}


def fit(
    oracle: Oracle,
    count_seed: Callable[[dict[str, int]], Counted],
    budget_s: float = COUNT_BUDGET_S,
) -> tuple[dict[str, int], Counted]:
    """(sizes, the seed's counters there): `count_seed(sizes)` counts the seed's call at
    `sizes` and returns its counters, empty when the count failed; sizes are halved while
    it takes over `budget_s`."""
    params = oracle.params
    sizes = params.counted_sizes()
    counters, took = _timed(count_seed, sizes)
    if params.counter_sizes is not None:
        return sizes, counters
    for _ in range(HALVINGS):
        if took <= budget_s or not counters:
            break
        smaller = halved(sizes)
        if smaller == sizes or not _answers(oracle, smaller):
            break
        there, took_there = _timed(count_seed, smaller)
        if not there:
            break  # the seed's counted call fails there: keep the last sizes that worked
        log.info(
            "counting the seed at %s took %.1f s (over %.0f s): counting at %s instead",
            sizes,
            took,
            budget_s,
            smaller,
        )
        sizes, counters, took = smaller, there, took_there
    return sizes, counters


def _timed(
    count_seed: Callable[[dict[str, int]], Counted], sizes: dict[str, int]
) -> tuple[Counted, float]:
    started = time.perf_counter()
    counters = count_seed(sizes)
    return counters, time.perf_counter() - started


def _answers(oracle: Oracle, sizes: dict[str, int]) -> bool:
    """Whether the reference draws inputs and answers at `sizes` (it may require more)."""
    try:
        oracle.trial(PROBE_ENTROPY, sizes)
    except Exception as exc:  # whatever the task's reference raises at sizes it cannot take
        log.info("the reference cannot answer at %s (%s): counted at larger sizes", sizes, exc)
        return False
    return True
