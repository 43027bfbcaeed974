"""Scores a candidate by how closely approximate(xs) follows math.sin on [0, pi/2].

It runs inside the sandbox beside the candidate (OpenEvolve's contract: evaluate(path)
returns metrics, here with artifacts that the model sees as feedback).
"""

import importlib.util
import math

POINTS = [i * (math.pi / 2) / 999 for i in range(1000)]


def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    candidate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(candidate)
    values = candidate.approximate(list(POINTS))
    if len(values) != len(POINTS):
        return {"combined_score": 0.0, "problem": "approximate returned the wrong count"}
    errors = [abs(v - math.sin(x)) for v, x in zip(values, POINTS, strict=True)]
    worst = max(errors)
    if not math.isfinite(worst):
        return {"combined_score": 0.0, "problem": "a value is NaN or infinite"}
    return {
        "combined_score": -math.log10(max(worst, 1e-16)),  # correct digits at the worst point
        "max_error": worst,
        "worst_at_x": POINTS[errors.index(worst)],
    }
