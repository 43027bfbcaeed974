"""The landscapes bench/search.py searches: two deceptive synthetic ones (`trap`, `needle`)
over a four-knob point, and matmul_c's, looked up in a table of measured settings
(bench/matmul_table.py measures it). Each turns a program's knob values into metrics."""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.plugin.knobs import Knob, Value, find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.task.loading import load_task
from evolve.task.schema import FeatureSpec, Objective

ROOT = Path(__file__).resolve().parents[1]
MATMUL_TABLE = ROOT / "bench" / "data" / "matmul_c_landscape.json"
MATMUL_TASK = ROOT / "tasks" / "matmul_c" / "task.yaml"

POINT = '''"""A point in [0, 1]^4 for bench/search.py's synthetic landscapes."""

# EVOLVE-BLOCK-START
X0 = 0.15  # @knob float 0..1
X1 = 0.15  # @knob float 0..1
X2 = 0.15  # @knob float 0..1
X3 = 0.15  # @knob float 0..1
# EVOLVE-BLOCK-END
'''

Metrics = dict[str, float]


# -- knobs by name -------------------------------------------------------------------------


def knob_name(program: Program, knob: Knob) -> str:
    """The name a reader knows a knob by: `cflags`, the #define's, or the assigned name."""
    line = program.files[knob.file].splitlines()[knob.line]
    if "cflags:" in line:
        return "cflags"
    named = re.match(r"\s*(?:#define\s+)?(\w+)", line)
    return named[1] if named else knob.label


def values_of(program: Program) -> dict[str, Value]:
    return {knob_name(program, k): k.value for k in find_knobs(program)}


def with_values(program: Program, values: Mapping[str, Value]) -> Program:
    knobs = find_knobs(program)
    index = {knob_name(program, k): i for i, k in enumerate(knobs)}
    return set_knobs(program, knobs, {index[name]: value for name, value in values.items()})


# -- landscapes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Landscape:
    name: str
    seed: Program
    objectives: tuple[Objective, ...]
    features: tuple[FeatureSpec, ...]
    primary: str  # the metric whose best is reported
    goal: float  # a run whose best reaches this got past the deception
    measure: Callable[[Mapping[str, Value]], Metrics | None]  # None: the child failed


def _point(values: Mapping[str, Value], dims: int = 4) -> list[float]:
    return [float(values[f"X{i}"]) for i in range(dims)]


def _bump(x: Sequence[float], centre: float, sigma: float) -> float:
    return math.exp(-sum((v - centre) ** 2 for v in x) / (2 * sigma**2))


def trap_metrics(values: Mapping[str, Value]) -> Metrics:
    x = _point(values, dims=2)
    fitness = max(0.6 * _bump(x, 0.25, 0.3), _bump(x, 0.8, 0.1))
    return {"fitness": fitness, "cost": statistics.fmean(x), "spread": max(x) - min(x)}


def needle_metrics(values: Mapping[str, Value]) -> Metrics:
    x = _point(values)
    fitness = statistics.fmean(0.6 * _bump([v], 0.3, 0.1) + _bump([v], 0.85, 0.04) for v in x)
    return {"fitness": fitness, "reach": statistics.fmean(x), "spread": max(x) - min(x)}


def synthetic(name: str) -> Landscape:
    mean = "cost" if name == "trap" else "reach"
    direction = "minimize" if name == "trap" else "maximize"
    return Landscape(
        name=name,
        seed=Program({"point.py": POINT}),
        objectives=(
            Objective(name="fitness", direction="maximize"),
            Objective(name=mean, direction=direction, weight=0.1),
        ),
        features=(
            FeatureSpec(name=mean, min=0, max=1, bins=10),
            FeatureSpec(name="spread", min=0, max=1, bins=4),
        ),
        primary="fitness",
        goal=0.65,  # past the hills' 0.6: the peak's slope, or a needle
        measure=trap_metrics if name == "trap" else needle_metrics,
    )


class MatmulTable:
    """The measured matmul_c settings, looked up by cflags and loop order, then by the
    nearest tiles in octaves."""

    TILES = ("TILE_I", "TILE_J", "TILE_K")

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.by_kind: dict[tuple[str, str], list[tuple[list[float], Metrics | None]]] = {}
        for point in data["points"]:
            settings = point["settings"]
            key = (settings["cflags"], settings["LOOP_ORDER"])
            octaves = [math.log2(settings[t]) for t in self.TILES]
            self.by_kind.setdefault(key, []).append((octaves, point["metrics"]))

    def passed(self) -> list[Metrics]:
        """The metrics of every measured setting that passed the evaluator."""
        return [m for rows in self.by_kind.values() for _, m in rows if m is not None]

    def measure(self, values: Mapping[str, Value]) -> Metrics | None:
        key = (str(values["cflags"]), str(values["LOOP_ORDER"]))
        if key not in self.by_kind:
            raise SystemExit(f"{MATMUL_TABLE} has no setting with {key}: run --measure-matmul")
        octaves = [math.log2(float(values[t])) for t in self.TILES]
        _, metrics = min(
            self.by_kind[key],
            key=lambda row: sum(abs(a - b) for a, b in zip(row[0], octaves, strict=True)),
        )
        return metrics


def matmul_landscape(table: MatmulTable) -> Landscape:
    seed = load_task(MATMUL_TASK).seed
    sizes = [m["code_bytes"] for m in table.passed()]
    length = seed.code_length
    return Landscape(
        name="matmul_c",
        seed=seed,
        objectives=(
            Objective(name="speedup", direction="maximize"),
            Objective(name="code_bytes", direction="minimize", weight=1e-4),
        ),
        features=(
            FeatureSpec(name="code_bytes", min=min(sizes), max=max(sizes), bins=8),
            FeatureSpec(name="code_length", min=length - 20, max=length + 60, bins=4),
        ),
        primary="speedup",
        # a top-2% setting: one lucky timing in the table does not set the bar alone
        goal=statistics.quantiles([m["speedup"] for m in table.passed()], n=50)[-1],
        measure=table.measure,
    )


def fresh_value(knob: Knob, rng: random.Random) -> Value:
    """A value drawn over the knob's whole range, as a rewrite would choose it."""
    if knob.kind == "choice":
        return rng.choice(knob.options)
    if knob.kind == "pow2":
        return 2 ** rng.randint(int(knob.low).bit_length() - 1, int(knob.high).bit_length() - 1)
    if knob.kind == "int":
        return rng.randint(int(knob.low), int(knob.high))
    return rng.uniform(knob.low, knob.high)
