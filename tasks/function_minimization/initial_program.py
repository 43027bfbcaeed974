"""Find the global minimum of a 2-D function with many local minima, in few evaluations.

search(objective, bounds, budget, rng) may call objective(x, y) at most `budget` times
(calls past that raise) and returns its best (x, y). Where the minimum lies changes from
run to run; only the calls tell.
"""

import random

# EVOLVE-BLOCK-START
SAMPLE_SHARE = 0.9  # @knob float 0.05..1.0
STEP = 0.5  # @knob float 0.01..3.0
SHRINK = 0.5  # @knob float 0.1..0.95


def search(objective, bounds, budget, rng):
    """Random sampling for a share of the budget, then a hill climb from the best point
    whose step shrinks whenever no neighbour is better."""
    (low_x, high_x), (low_y, high_y) = bounds
    best_x, best_y = rng.uniform(low_x, high_x), rng.uniform(low_y, high_y)
    best = objective(best_x, best_y)
    calls = 1
    while calls < int(budget * SAMPLE_SHARE):
        x, y = rng.uniform(low_x, high_x), rng.uniform(low_y, high_y)
        value = objective(x, y)
        calls += 1
        if value < best:
            best, best_x, best_y = value, x, y
    step = STEP
    while calls < budget:
        x = best_x + rng.uniform(-step, step)
        y = best_y + rng.uniform(-step, step)
        value = objective(x, y)
        calls += 1
        if value < best:
            best, best_x, best_y = value, x, y
        elif rng.random() < 0.1:
            step *= SHRINK
    return best_x, best_y


# EVOLVE-BLOCK-END


def run_search(objective, bounds, budget, seed):
    return search(objective, bounds, budget, random.Random(seed))
