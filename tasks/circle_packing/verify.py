"""The trusted check of a circle packing, run outside the sandbox on the evaluator's artifacts.

evaluator.py runs in the candidate's process, which can change what it reports, so this
file repeats its check on purpose: it reads the packing the evaluator returned (the
artifact `packing`: centres and radii as JSON), rejects it if any value is not a finite
number, a circle leaves the square or two overlap, and recomputes the sum of the radii.
Only what it returns is scored. It never enters the sandbox.
"""

import json
import math

N = 26
BEST_KNOWN = 2.635
TOLERANCE = 1e-9


def numbers(values, what):
    """The values as floats; each must be a finite int or float (no bools, strings, NaN)."""
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{what}: {value!r} is not a number")
        if not math.isfinite(value):
            raise ValueError(f"{what}: {value!r} is not finite")
        out.append(float(value))
    return out


def verify(metrics, artifacts):
    if "packing" not in artifacts:
        raise ValueError("the evaluator returned no packing to check")
    packing = json.loads(artifacts["packing"])
    centers, radii = packing["centers"], packing["radii"]
    if len(centers) != N or len(radii) != N:
        raise ValueError(f"{len(centers)} centres and {len(radii)} radii; {N} of each needed")
    points = [numbers(center, f"centre {i}") for i, center in enumerate(centers)]
    if any(len(point) != 2 for point in points):
        raise ValueError("each centre must be an (x, y) pair")
    radii = numbers(radii, "radii")
    for i, ((x, y), r) in enumerate(zip(points, radii, strict=True)):
        if r < 0:
            raise ValueError(f"circle {i} has a negative radius {r}")
        if min(x - r, y - r, 1 - x - r, 1 - y - r) < -TOLERANCE:
            raise ValueError(f"circle {i} at ({x:.6f}, {y:.6f}) radius {r:.6f} leaves the square")
    for i in range(N):
        for j in range(i + 1, N):
            gap = math.dist(points[i], points[j]) - radii[i] - radii[j]
            if gap < -TOLERANCE:
                raise ValueError(f"circles {i} and {j} overlap by {-gap:.3g}")
    total = math.fsum(radii)
    return {"validity": 1.0, "sum_radii": total, "combined_score": total / BEST_KNOWN}
