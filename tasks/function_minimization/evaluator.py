"""Scores a search algorithm by how close it gets to the global minimum of a shifted
Rastrigin function in a fixed number of evaluations.

OpenEvolve's layout, as a cascade: evaluate_stage1 runs one search, and only a candidate
whose score reaches the task's first threshold (0.5 by default) gets evaluate_stage2's
sixteen more, which measure how reliably it finds the minimum; evaluate runs both, for a
task that turns the cascade off (`cascade: false`). Each search gets a fresh shift of the
function, drawn here, so the minimum's place cannot be learned, and is scored by the best
value among the calls within its budget, recorded here, whatever the program returns.

Each stage also returns its searches as an artifact (`stage1_searches`, `stage2_searches`:
JSON, each search's shift and the point of its best call), from which the task's trusted
verify.py recomputes every metric outside the sandbox: the candidate runs in this process
and could change what this file reports.
"""

import contextlib
import importlib.util
import json
import math
import random

BOUNDS = ((-5.12, 5.12), (-5.12, 5.12))
SHIFT = 3.0  # the minimum lies in [-SHIFT, SHIFT]^2, where it is 0
BUDGET = 2000  # calls of the objective per search
FOUND = 0.01  # a search whose best value is within this of the minimum found it
STAGE2_RUNS = 16


class BudgetSpent(Exception):
    """A call past the budget."""


class Objective:
    """The shifted Rastrigin function, counting calls and keeping the best value seen."""

    def __init__(self, shift_x, shift_y, budget):
        self.shift = (shift_x, shift_y)
        self.budget = budget
        self.calls = 0
        self.best = math.inf
        self.best_point = None  # where the best value was found

    def __call__(self, x, y):
        self.calls += 1
        if self.calls > self.budget:
            raise BudgetSpent(f"objective called more than {self.budget} times")
        value = 20.0
        for z in (float(x) - self.shift[0], float(y) - self.shift[1]):
            value += z * z - 10.0 * math.cos(2.0 * math.pi * z)
        if value < self.best:
            self.best = value
            self.best_point = (float(x), float(y))
        return value


def load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def searches(program_path, runs):
    """The gap (best value found, less the minimum 0) of each of `runs` fresh searches, and
    the searches as verify.py reads them: each one's shift and best point (None: no call)."""
    module = load(program_path)
    draw = random.SystemRandom()
    gaps, record = [], []
    for _ in range(runs):
        objective = Objective(draw.uniform(-SHIFT, SHIFT), draw.uniform(-SHIFT, SHIFT), BUDGET)
        with contextlib.suppress(BudgetSpent):  # scored on the calls within the budget
            module.run_search(objective, BOUNDS, BUDGET, draw.randrange(2**32))
        gaps.append(objective.best)
        record.append({"shift": list(objective.shift), "best": objective.best_point})
    return gaps, json.dumps(record)


def score(gap):
    return 1.0 / (1.0 + gap)


def evaluate_stage1(program_path):
    (gap,), record = searches(program_path, 1)
    return {"first_gap": gap, "combined_score": score(gap), "stage1_searches": record}


def evaluate_stage2(program_path):
    gaps, record = searches(program_path, STAGE2_RUNS)
    return {
        "mean_gap": sum(gaps) / len(gaps),
        "worst_gap": max(gaps),
        "success_rate": sum(gap <= FOUND for gap in gaps) / len(gaps),
        "combined_score": sum(score(gap) for gap in gaps) / len(gaps),
        "stage2_searches": record,
    }


def evaluate(program_path):
    return {**evaluate_stage1(program_path), **evaluate_stage2(program_path)}
