"""Scores a packing of 26 circles in the unit square by the sum of their radii.

OpenEvolve's layout: evaluate(program_path) imports the program, calls its run_packing()
and returns an EvaluationResult. It runs inside the sandbox, in the candidate's own
process, so a candidate could make it report anything; the packing itself goes out as the
artifact `packing`, from which verify.py, outside the sandbox, recomputes the score.
"""

import importlib.util
import json
import math

from openevolve.evaluation_result import EvaluationResult

N = 26
BEST_KNOWN = 2.635  # AlphaEvolve (2025); combined_score is the sum of radii over this
TOLERANCE = 1e-9  # overlap or overhang forgiven, for rounding in the candidate's arithmetic


def load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problem(centers, radii):
    """Why the packing is invalid, or None."""
    if len(centers) != N or len(radii) != N:
        return f"{len(centers)} centres and {len(radii)} radii; {N} of each are needed"
    for i, ((x, y), r) in enumerate(zip(centers, radii, strict=True)):
        if not all(math.isfinite(v) for v in (x, y, r)):
            return f"circle {i} has a non-finite centre or radius: ({x}, {y}), {r}"
        if r < 0:
            return f"circle {i} has a negative radius {r}"
        if min(x - r, y - r, 1 - x - r, 1 - y - r) < -TOLERANCE:
            return f"circle {i} at ({x:.6f}, {y:.6f}) with radius {r:.6f} leaves the square"
    for i in range(N):
        for j in range(i + 1, N):
            gap = math.dist(centers[i], centers[j]) - radii[i] - radii[j]
            if gap < -TOLERANCE:
                return f"circles {i} and {j} overlap by {-gap:.3g}"
    return None


def evaluate(program_path):
    centers, radii, _ = load(program_path).run_packing()
    centers = [[float(x), float(y)] for x, y in centers]
    radii = [float(r) for r in radii]
    packing = json.dumps({"centers": centers, "radii": radii})
    why = problem(centers, radii)
    if why is not None:
        metrics = {"validity": 0.0, "sum_radii": 0.0, "combined_score": 0.0}
        return EvaluationResult(metrics=metrics, artifacts={"problem": why, "packing": packing})
    total = math.fsum(radii)
    metrics = {"validity": 1.0, "sum_radii": total, "combined_score": total / BEST_KNOWN}
    return EvaluationResult(metrics=metrics, artifacts={"packing": packing})
