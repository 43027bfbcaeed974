"""Measuring matmul_c's landscape for bench/search.py once, with the real c_kernel
evaluator: the seed's setting and random tilings of every (cflags, loop order) pair,
written to bench/data/matmul_c_landscape.json with the date and the machine."""

from __future__ import annotations

import datetime
import json
import random
import time
from typing import Any

from landscapes import (  # bench/landscapes.py, beside this script
    MATMUL_TABLE,
    MATMUL_TASK,
    ROOT,
    MatmulTable,
    fresh_value,
    knob_name,
    values_of,
    with_values,
)
from machine import machine, say  # bench/machine.py, beside this script

from evolve.evaluators.c_kernel import CKernelEvaluator
from evolve.plugin.knobs import Value, find_knobs
from evolve.plugin.program import Program
from evolve.plugin.sandbox import open_sandbox
from evolve.task.loading import load_task

# How matmul_c's landscape is measured: the task's evaluator at n = 256 (an eighth of the
# task's flops), unsanitized, counters off.
MATMUL_PARAMS: dict[str, Any] = {
    "sizes": {"n": 256},
    "counters": "never",
    "sanitize": False,
    "reps": 5,
}
MATMUL_PER_COMBO = 6  # tile settings measured per (cflags, loop order)
MATMUL_METRICS = ("speedup", "code_bytes", "gflops", "time_s")  # kept in the table


# -- measuring matmul_c --------------------------------------------------------------------


def matmul_settings(seed: Program, rng: random.Random) -> list[dict[str, Value]]:
    """The seed's own setting, then MATMUL_PER_COMBO distinct random tilings for every
    (cflags, loop order): every child's cflags and loop order are measured, its tiles
    approximated."""
    knobs = {knob_name(seed, k): k for k in find_knobs(seed)}
    settings = [values_of(seed)]
    for cflags in knobs["cflags"].options:
        for order in knobs["LOOP_ORDER"].options:
            tilings: set[tuple[int, ...]] = set()
            while len(tilings) < MATMUL_PER_COMBO:
                tilings.add(tuple(int(fresh_value(knobs[t], rng)) for t in MatmulTable.TILES))
            for tiles in sorted(tilings):
                settings.append(
                    {
                        "cflags": cflags,
                        "LOOP_ORDER": order,
                        **dict(zip(MatmulTable.TILES, tiles, strict=True)),
                    }
                )
    return settings


def measure_matmul(backend: str) -> None:
    task = load_task(MATMUL_TASK)
    settings = matmul_settings(task.seed, random.Random(20261125))
    say(f"measuring {len(settings)} matmul_c settings with c_kernel ({backend} sandbox, "
        f"{MATMUL_PARAMS})")  # fmt: skip
    evaluator = CKernelEvaluator({**task.spec.evaluator.params, **MATMUL_PARAMS}, task.root)
    evaluator.limits = task.spec.sandbox.limits()
    sandbox = open_sandbox(backend)
    points = []
    started = time.perf_counter()
    try:
        evaluator.prepare(task.seed, sandbox, task.root)
        for number, values in enumerate(settings, start=1):
            program = with_values(task.seed, values)
            result = evaluator.evaluate(program, sandbox, seed=number)
            metrics = None
            if result.ok:
                metrics = {k: result.metrics[k] for k in MATMUL_METRICS}
            points.append({"settings": values, "status": result.status, "metrics": metrics})
            if number % 25 == 0 or not result.ok:
                say(f"  {number}/{len(settings)} [{time.perf_counter() - started:.0f} s] "
                    f"{values}: {result.status} {metrics}")  # fmt: skip
    finally:
        sandbox.close()
    data = {
        "measured": datetime.datetime.now().astimezone().isoformat(timespec="minutes"),
        "machine": machine(),
        "how": f"bench/search.py --measure-matmul, c_kernel on tasks/matmul_c, {backend} "
        "sandbox, these params over the task's",
        "params": MATMUL_PARAMS,
        "points": points,
    }
    MATMUL_TABLE.parent.mkdir(parents=True, exist_ok=True)
    MATMUL_TABLE.write_text(json.dumps(data, indent=1) + "\n")
    failed = sum(p["metrics"] is None for p in points)
    say(f"wrote {MATMUL_TABLE.relative_to(ROOT)}: {len(points)} settings, {failed} failed, "
        f"{time.perf_counter() - started:.0f} s")  # fmt: skip
