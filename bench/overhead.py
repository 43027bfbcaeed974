"""Per-candidate overhead of the engine, store and selection, with 1k and 10k candidates
already in the store.

The evaluator is `synthetic` with no delay: it runs nothing, so everything measured is
the framework's own cost. Run: `.venv/bin/python bench/overhead.py [--new 400]`.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from evolve import cluster
from evolve.engine import Engine
from evolve.program import Program
from evolve.results import EvalResult, StageResult
from evolve.search import Islands
from evolve.store import Store
from evolve.taskfile import load_task, make_evaluator

SEED = """# EVOLVE-BLOCK-START
A = 1  # @knob int 0..100000
B = 1  # @knob int 0..100000
# EVOLVE-BLOCK-END
"""
TASK = """name: overhead
seed: seed.py
evaluator: {name: synthetic, params: {target: 1000000}}
objectives: [{name: distance, direction: minimize}]
search: {islands: 4, migration_interval: 50}
budget: {candidates: BUDGET}
sandbox: {backend: process}
"""


def prefill(store: Store, run: str, count: int) -> None:
    """`count` scored candidates, written through the same store calls the engine uses."""
    seed = Program({"seed.py": SEED})
    for i in range(count):
        program = seed if i == 0 else Program({"seed.py": SEED.replace("A = 1 ", f"A = {i + 1} ")})
        candidate = store.add_candidate(
            run,
            program,
            parent_ids=[] if i == 0 else [1],
            island=i % 4,
            generation=0 if i == 0 else 1,
            mutation={"operator": "prefill"},
        )
        assert candidate is not None
        result = EvalResult.from_stages([StageResult("check", True, 0.0, metrics={"distance": i})])
        store.record_evaluation(
            candidate.id,
            result,
            kind="evaluate",
            score=-float(i),
            input_seed=i,
            worker="prefill",
            started_at=time.time(),
            finished_at=time.time(),
        )


def time_store(store: Store, run: str, rounds: int = 200) -> float:
    """Seconds per candidate for the store calls the engine makes for one new candidate."""
    result = EvalResult.from_stages([StageResult("check", True, 0.0, metrics={"distance": 1.0})])
    started = time.perf_counter()
    for i in range(rounds):
        program = Program(
            {"seed.py": SEED.replace("A = 1 ", "A = 99999 ").replace("B = 1 ", f"B = {i + 2} ")}
        )
        child = store.add_candidate(
            run, program, parent_ids=[1], island=0, generation=1, mutation={"operator": "bench"}
        )
        assert child is not None
        store.candidate(child.id)
        store.record_evaluation(
            child.id,
            result,
            kind="evaluate",
            score=-1.0,
            input_seed=i,
            worker="bench",
            started_at=0.0,
            finished_at=0.0,
        )
        store.candidate(child.id)
    return (time.perf_counter() - started) / rounds


def time_selection(size: int, rounds: int = 20_000) -> float:
    islands = Islands(4, pressure=1.5, exploration=0.1)
    for i in range(size):
        islands.add(i, random.random(), [i % 4])
    rng = random.Random(0)
    started = time.perf_counter()
    for i in range(rounds):
        islands.pick(i % 4, rng)
    return (time.perf_counter() - started) / rounds


def time_loop(folder: Path, prefilled: int, new: int, workers: int) -> tuple[float, float]:
    """Seconds per candidate for the whole loop (mutate, evaluate on Ray, record), and the
    driver's own CPU seconds per candidate: what decides how many workers one driver feeds."""
    (folder / "seed.py").write_text(SEED)
    (folder / "task.yaml").write_text(TASK.replace("BUDGET", str(prefilled + new)))
    task = load_task(folder / "task.yaml")
    store = Store(f"sqlite:///{folder / 'evolve.db'}")
    store.create_run("bench", task_path=str(task.path), task_yaml=task.text, seed=0, settings={})
    prefill(store, "bench", prefilled)
    engine = Engine(
        task,
        store,
        store.get_run("bench"),
        make_evaluator(task),
        workers=workers,
        results_dir=folder / "results",
    )
    started, cpu = time.perf_counter(), time.process_time()
    outcome = engine.run()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert store.count_candidates("bench") == prefilled + new, outcome.reason
    store.close()
    return seconds / new, cpu / new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--new", type=int, default=400, help="candidates run through the loop")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    cluster.connect(None)
    rows = []
    for prefilled in (1_000, 10_000):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            loop, driver_cpu = time_loop(folder, prefilled, args.new, args.workers)
            store = Store(f"sqlite:///{folder / 'evolve.db'}")
            store_s = time_store(store, "bench")
            store.close()
        rows.append((prefilled, loop, driver_cpu, store_s, time_selection(prefilled)))
    print(
        f"{'in store':>9} {'loop ms/cand':>13} {'cand/s':>8} {'driver CPU ms/cand':>19} "
        f"{'store ms/cand':>14} {'pick µs':>8}"
    )
    for n, loop, driver_cpu, store_s, pick_s in rows:
        print(
            f"{n:>9} {loop * 1e3:>13.2f} {1 / loop:>8.1f} {driver_cpu * 1e3:>19.2f} "
            f"{store_s * 1e3:>14.2f} {pick_s * 1e6:>8.2f}"
        )
    ratio = rows[1][1] / rows[0][1]
    print(f"loop overhead at 10k / at 1k: {ratio:.2f}x (target: within 1.5x)")


if __name__ == "__main__":
    main()
