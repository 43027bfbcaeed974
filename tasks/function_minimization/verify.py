"""The trusted check of a function_minimization result, run outside the sandbox.

evaluator.py keeps the candidate in a process of its own, but both run in the same sandbox
job, so this file does not take the evaluator's numbers on trust: it recomputes every
metric from the searches the evaluator returned, each search's shift of the function and
the point of its best call (the artifacts `stage1_searches` and `stage2_searches`). It
rejects a record that is malformed, has the wrong number of searches, a shift out of
range or a point that is not finite, or skips stage 2 although stage 1 earned it, and
claimed metrics that its searches do not give. Only what it returns is scored. It never
enters the sandbox.

What it cannot catch alone: the shift is drawn in the sandbox, so a result rewritten with
shift and point changed together, consistently, would pass; evaluator.py keeps both out
of the candidate's reach.
"""

import json
import math

SHIFT = 3.0  # each shift lies in [-SHIFT, SHIFT]^2
FOUND = 0.01
STAGE2_RUNS = 16
STAGE2_THRESHOLD = 0.5  # task.yaml's cascade_thresholds: stage 1 at or above it earns stage 2


def rastrigin(x, y, shift):
    """The shifted function, computed as evaluator.py's Objective computes it."""
    value = 20.0
    for z in (x - shift[0], y - shift[1]):
        value += z * z - 10.0 * math.cos(2.0 * math.pi * z)
    return value


def pair(value, limit, what):
    """`value` as two finite floats within [-limit, limit]; ValueError otherwise."""
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"{what} must be a pair of numbers, not {value!r}")
    for number in value:
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise ValueError(f"{what}: {number!r} is not a number")
        if not math.isfinite(number) or abs(number) > limit:
            raise ValueError(f"{what}: {number!r} is outside [-{limit:g}, {limit:g}]")
    return float(value[0]), float(value[1])


def gaps(artifacts, name, runs):
    """The gap of each search the artifact `name` records; there must be `runs` of them."""
    if name not in artifacts:
        raise ValueError(f"the evaluator returned no {name} to check")
    record = json.loads(artifacts[name])
    if not isinstance(record, list) or len(record) != runs:
        raise ValueError(f"{name} must list {runs} searches")
    found = []
    for i, search in enumerate(record):
        if not isinstance(search, dict):
            raise ValueError(f"{name}[{i}] is not a search")
        shift = pair(search.get("shift"), SHIFT, f"{name}[{i}].shift")
        best = search.get("best")
        if best is None:  # a search that never called the function
            found.append(math.inf)
            continue
        x, y = pair(best, math.inf, f"{name}[{i}].best")  # a call may leave the box
        found.append(rastrigin(x, y, shift))
    return found


def score(gap):
    return 1.0 / (1.0 + gap)


def verify(metrics, artifacts):
    """The metrics recomputed from the searches; ValueError where the evaluator's claims
    differ from them, since only a tampered evaluator reports numbers its searches do not
    give."""
    recomputed = recompute(artifacts)
    for name, value in recomputed.items():
        claimed = metrics.get(name)
        if claimed is None or not math.isclose(claimed, value, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(
                f"the evaluator claimed {name} {claimed}, but its searches give {value:.6g}"
            )
    return recomputed


def recompute(artifacts):
    (first,) = gaps(artifacts, "stage1_searches", 1)
    if "stage2_searches" not in artifacts:
        if score(first) >= STAGE2_THRESHOLD:
            raise ValueError("stage 1 earned stage 2, but no stage 2 searches were returned")
        return {"first_gap": first, "combined_score": score(first)}
    later = gaps(artifacts, "stage2_searches", STAGE2_RUNS)
    return {
        "first_gap": first,
        "mean_gap": sum(later) / len(later),
        "worst_gap": max(later),
        "success_rate": sum(gap <= FOUND for gap in later) / len(later),
        "combined_score": sum(score(gap) for gap in later) / len(later),
    }
