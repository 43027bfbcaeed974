"""How long `evolve check` takes on the shipped c_kernel tasks (target: under 15 s for
matmul_c), with what the time goes to.

Each round checks every task once, in turn, so a noisy spell on the machine hits them all
alike; the median and the spread (min to max) of the whole command's wall time are
printed, with the median of each stage as the command reported it.
Run: `.venv/bin/python bench/check.py [--rounds 3] [--sandbox docker|process]`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 15.0
TASKS = ("matmul_c", "stencil_c", "histogram_c")
STAGE_ROW = re.compile(r"│ (\w+) +│ ok +│ ([\d.]+) +│")


def check_once(task: str, sandbox: str) -> tuple[float, dict[str, float]]:
    """The command's wall time, and each stage's seconds as it printed them."""
    argv = [sys.executable, "-m", "evolve", "check", f"tasks/{task}/task.yaml"]
    started = time.perf_counter()
    done = subprocess.run(
        [*argv, "--sandbox", sandbox], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"evolve check {task} failed ({done.returncode}):\n{done.stderr}")
    return took, {name: float(s) for name, s in STAGE_ROW.findall(done.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sandbox", choices=("docker", "process"), default="docker")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {task: [] for task in TASKS}
    stages: dict[str, dict[str, list[float]]] = {task: {} for task in TASKS}
    for round_number in range(1, args.rounds + 1):
        for task in TASKS:
            took, seconds = check_once(task, args.sandbox)
            walls[task].append(took)
            for name, value in seconds.items():
                stages[task].setdefault(name, []).append(value)
            print(f"round {round_number}: {task} {took:.1f}s", flush=True)
    how = f"{args.sandbox} sandbox, {args.rounds} rounds"
    print(f"\nevolve check, {how}: seconds, median (min-max)")
    print("| task | whole command | stages (median s) |")
    print("|---|---|---|")
    for task in TASKS:
        values = walls[task]
        spread = f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
        parts = ", ".join(f"{n} {statistics.median(v):.2f}" for n, v in stages[task].items())
        print(f"| {task} | {spread} | {parts} |")
    worst = max(walls["matmul_c"])
    verdict = "meets" if worst < TARGET_S else "MISSES"
    print(f"\nmatmul_c: slowest {worst:.1f}s {verdict} the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
