"""Scores a search algorithm by how close it gets to the global minimum of a shifted
Rastrigin function in a fixed number of evaluations.

OpenEvolve's layout, as a cascade: evaluate_stage1 runs one search, and only a candidate
whose score reaches the task's first threshold (0.5 by default) gets evaluate_stage2's
sixteen more, which measure how reliably it finds the minimum; evaluate runs both, for a
task that turns the cascade off (`cascade: false`). Each search gets a fresh shift of the
function, drawn here, so the minimum's place cannot be learned, and is scored by the best
value among the calls within its budget, recorded here, whatever the program returns.

The candidate runs in a child process of its own (searcher.py), which asks this one for
each value over a pipe: the shift, the count of calls and the best value never enter the
candidate's memory, and this process is made non-dumpable first, so that the child (the
same user) can neither trace it nor open its memory or descriptors. Each stage also
returns its searches as an artifact (`stage1_searches`, `stage2_searches`: JSON, each
search's shift and the point of its best call), from which the task's trusted verify.py
recomputes every metric outside the sandbox.
"""

import ctypes
import json
import math
import os
import random
import subprocess
import sys

BOUNDS = ((-5.12, 5.12), (-5.12, 5.12))
SHIFT = 3.0  # the minimum lies in [-SHIFT, SHIFT]^2, where it is 0
BUDGET = 2000  # calls of the objective per search
FOUND = 0.01  # a search whose best value is within this of the minimum found it
STAGE2_RUNS = 16
SEARCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "searcher.py")
PR_SET_DUMPABLE = 4


class Objective:
    """The shifted Rastrigin function, counting calls and keeping the best value seen."""

    def __init__(self, shift_x, shift_y, budget):
        self.shift = (shift_x, shift_y)
        self.budget = budget
        self.calls = 0
        self.best = math.inf
        self.best_point = None  # where the best value was found

    def __call__(self, x, y):
        """The value at (x, y), NaN where either is not finite; None past the budget."""
        self.calls += 1
        if self.calls > self.budget:
            return None
        if not (math.isfinite(x) and math.isfinite(y)):
            return math.nan
        value = 20.0
        for z in (x - self.shift[0], y - self.shift[1]):
            value += z * z - 10.0 * math.cos(2.0 * math.pi * z)
        if value < self.best:
            self.best = value
            self.best_point = (x, y)
        return value


def undumpable():
    """Keep the candidate's process, run as the same user, out of this one."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def serve(objective, requests, replies):
    """Answer the searcher's calls until it says the search is over; a line that is not a
    call ends the search. A call's value goes back as its repr; `spent` past the budget."""
    while True:
        line = requests.readline()
        if line == "done\n":
            return
        if not line or line.startswith("error"):
            said = line.strip() or "its process ended"
            raise RuntimeError(f"the program's search failed ({said}): its stderr says why")
        try:
            x, y = (float(part) for part in line.split())
        except ValueError:
            return
        value = objective(x, y)
        replies.write("spent\n" if value is None else f"{value!r}\n")
        replies.flush()


def searches(program_path, runs):
    """The gap (best value found, less the minimum 0) of each of `runs` fresh searches, and
    the searches as verify.py reads them: each one's shift and best point (None: no call)."""
    undumpable()
    draw = random.SystemRandom()
    child_reads, parent_writes = os.pipe()
    parent_reads, child_writes = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-I", "-B", SEARCHER, program_path, str(child_reads), str(child_writes)],
        pass_fds=(child_reads, child_writes),
    )
    os.close(child_reads)
    os.close(child_writes)
    gaps, record = [], []
    try:
        with os.fdopen(parent_writes, "w") as replies, os.fdopen(parent_reads) as requests:
            for _ in range(runs):
                shift = (draw.uniform(-SHIFT, SHIFT), draw.uniform(-SHIFT, SHIFT))
                objective = Objective(*shift, BUDGET)
                replies.write(f"search {draw.randrange(2**32)}\n")
                replies.flush()
                serve(objective, requests, replies)
                gaps.append(objective.best)
                record.append({"shift": list(shift), "best": objective.best_point})
    finally:
        child.kill()
        child.wait()
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
