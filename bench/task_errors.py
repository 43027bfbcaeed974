"""How fast `evolve run` refuses a hostile or broken task file (target: under 1 s each).

Each case is a real file given to the real command line, which must exit 2 with one line on
stderr. The cases are run in turn, round after round, so a noisy spell on the machine hits
them all alike; the median and the spread (min to max) of each are printed.
Run: `.venv/bin/python bench/task_errors.py [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

TARGET_S = 1.0
EVOLVE = [sys.executable, "-m", "evolve"]
VALID = """name: bench
seed: seed.c
evaluator:
  name: c_kernel
  params: {harness: HARNESS, reference: reference.py, entry: k, sizes: {n: 8}}
objectives: [{name: speedup, direction: maximize}]
budget: {candidates: 2}
"""


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


CASES: dict[str, Callable[[Path], None]] = {
    "bad field (budget.candidates: 0)": lambda d: (d / "task.yaml").write_text(
        VALID.replace("HARNESS", "harness.c").replace("candidates: 2", "candidates: 0")
    ),
    "recursive alias": lambda d: (d / "task.yaml").write_text("a: &a [*a]\n"),
    "alias bomb, 9 levels (1e9 nodes)": lambda d: (d / "task.yaml").write_text(alias_bomb(9)),
    "10,000 nested [": lambda d: (d / "task.yaml").write_text("[" * 10_000 + "]" * 10_000),
    "50 MB of garbage": lambda d: (d / "task.yaml").write_bytes(b"x: " + b"A" * 50_000_000),
    "binary file": lambda d: (d / "task.yaml").write_bytes(bytes(range(256)) * 64),
    "harness ../../etc/passwd": lambda d: (d / "task.yaml").write_text(
        VALID.replace("HARNESS", "../../etc/passwd")
    ),
}


def refusal_s(task_dir: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [*EVOLVE, "run", str(task_dir / "task.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=task_dir,
    )
    took = time.perf_counter() - started
    if done.returncode != 2 or done.stderr.count("\n") != 1:
        raise SystemExit(f"{task_dir}: exit {done.returncode}, stderr:\n{done.stderr}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for index, (name, write) in enumerate(CASES.items()):
            folder = Path(tmp, f"case{index}")
            folder.mkdir()
            for needed in ("seed.c", "harness.c", "reference.py"):
                (folder / needed).write_text("// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n")
            write(folder)
            folders[name] = folder
        times: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(args.rounds):
            for name, folder in folders.items():
                times[name].append(refusal_s(folder))
    print(f"`evolve run` on a bad task file: exit 2, one line; {args.rounds} rounds, alternated")
    print(f"{'case':<36} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, taken in times.items():
        print(f"{name:<36} {statistics.median(taken):>9.2f} {min(taken):>7.2f} {max(taken):>7.2f}")
    worst = max(max(taken) for taken in times.values())
    print(f"slowest answer: {worst:.2f} s (target: under {TARGET_S:g} s each):", end=" ")
    print("met" if worst < TARGET_S else "MISSED")


if __name__ == "__main__":
    main()
