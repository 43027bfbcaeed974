"""Per-candidate overhead of the engine, store and selection, with 1k, 10k and 50k
candidates already in the store.

The evaluator is `synthetic` with no delay: it runs nothing, so everything measured is the
framework's own cost (`--delay S` makes each evaluation sleep S seconds, as a cheap
evaluator that takes time but no CPU, to show how busy the loop keeps its workers). For
each size the loop runs `--new` candidates through the autotuner on 2 workers; the figures
are the steady state, between 10% and 90% of the new candidates, read from the engine's
own progress ticks: wall time and the driver's CPU (`time.process_time`) per candidate.
Set-up (restoring the search from the store, starting the workers) is reported apart,
since it is paid once per run. `--postgres URL` adds the per-candidate cost of the store's
calls on PostgreSQL beside SQLite's. The workers are the local executor's (child processes
and threads of the driver), or with `--executor ray` Ray actors on a private local Ray
instance.

Run: `.venv/bin/python bench/overhead.py [--new 2000] [--sizes 1000,10000,50000]
[--repeats 2] [--postgres URL] [--delay 0.003] [--executor local|ray]`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from machine import load_average, machine, say, spread  # bench/machine.py, beside this script
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from evolve.engine.events import Event, Snapshot
from evolve.engine.loop import Engine
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.llm import LLMCall
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.search import Islands
from evolve.store import Settlement, Store
from evolve.task.loading import load_task, make_evaluator

SEED = """# EVOLVE-BLOCK-START
A = 1  # @knob int 0..100000
B = 1  # @knob int 0..100000
# EVOLVE-BLOCK-END
"""
TASK = """name: overhead
seed: seed.py
evaluator: {name: synthetic, params: {target: 1000000, delay_s: DELAY}}
objectives: [{name: distance, direction: minimize}]
search: {islands: 4, migration_interval: 50}
budget: {candidates: BUDGET}
sandbox: {backend: process}
"""
PREFILL_TURN = 1000  # prefilled candidates written per transaction

# An executor for a run whose files are in the folder given.
Executors = Callable[[Path], Executor]


def prefill(store: Store, run: str, count: int) -> None:
    """`count` scored candidates, written through the same store calls the engine uses."""
    seed = Program({"seed.py": SEED})
    result = EvalResult.from_stages([StageResult("check", True, 0.0, metrics={"distance": 0})])
    for start in range(0, count, PREFILL_TURN):
        with store.turn():
            for i in range(start, min(count, start + PREFILL_TURN)):
                text = SEED.replace("A = 1 ", f"A = {i + 1} ")
                candidate = store.add_candidate(
                    run,
                    seed if i == 0 else Program({"seed.py": text}),
                    parent_ids=[] if i == 0 else [1],
                    island=i % 4,
                    generation=0 if i == 0 else 1,
                    mutation={"operator": "prefill"},
                )
                assert candidate is not None
                store.record_evaluation(
                    candidate,
                    result,
                    kind="evaluate",
                    score=-float(i),
                    input_seed=i,
                    worker="prefill",
                    started_at=time.time(),
                    finished_at=time.time(),
                )


def time_store(store: Store, run: str, rounds: int = 300) -> float:
    """Seconds per candidate for the store calls made for one new candidate of a model (open
    its proposal, store its model call as the ledger writer does, add the candidate and
    settle the proposal with the call, record its evaluation, read it back), each in its
    own transaction: the engine's turns batch them, so this is the worst case."""
    result = EvalResult.from_stages([StageResult("check", True, 0.0, metrics={"distance": 1.0})])
    tag = uuid.uuid4().hex[:8]
    started = time.perf_counter()
    for i in range(rounds):
        program = Program({"seed.py": SEED.replace("A = 1 ", f"A = 99999 # {tag} {i}")})
        proposal = store.open_proposal(run, operator="bench", parent_ids=[1], island=0)
        call = LLMCall("openai", "m", "prompt", "reply", 100, 20, 0.001, 0.1, "ok", started_at=1.0)
        store.add_proposal_call(proposal, call)
        child = store.add_candidate(
            run,
            program,
            parent_ids=[1],
            island=0,
            generation=1,
            mutation={"operator": "bench"},
            settlement=Settlement(proposal, "candidate", [call]),
        )
        assert child is not None
        store.record_evaluation(
            child,
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


class Ticks:
    """The engine's progress, as the live board would see it: (wall, driver CPU, evaluated)
    at the first turn of the loop, and at the first turn that reached each of `marks`
    (candidates evaluated). Clocks are read only then: on a VM, reading the process's CPU
    clock at every turn cost a few percent of the driver's CPU, which is this bench's and
    not the engine's."""

    def __init__(self, marks: list[int]) -> None:
        self.marks = sorted(marks)
        self.seen: list[tuple[float, float, int]] = []

    def event(self, event: Event) -> None:
        return None

    def tick(self, snapshot: Snapshot) -> None:
        if self.seen and (not self.marks or snapshot.evaluated < self.marks[0]):
            return
        while self.marks and snapshot.evaluated >= self.marks[0]:
            self.marks.pop(0)
        self.seen.append((time.perf_counter(), time.process_time(), snapshot.evaluated))

    @staticmethod
    def window(before: int, new: int) -> tuple[int, int]:
        """Between 10% and 90% of the new candidates: the steady state."""
        return before + new // 10, before + new * 9 // 10

    def steady(self, before: int, new: int) -> tuple[float, float]:
        """Wall and CPU seconds per candidate between 10% and 90% of the new candidates."""
        low, high = self.window(before, new)
        first = next(t for t in self.seen if t[2] >= low)
        last = next(t for t in self.seen if t[2] >= high)
        done = last[2] - first[2]
        return (last[0] - first[0]) / done, (last[1] - first[1]) / done


def time_loop(
    folder: Path,
    prefilled: int,
    new: int,
    workers: int,
    executors: Executors,
    store: Store | None = None,
    delay: float = 0.0,
) -> dict[str, float]:
    """One run of the loop on a SQLite store in `folder`, or on `store`, its workers on
    `executors(folder)`."""
    (folder / "seed.py").write_text(SEED)
    task_text = TASK.replace("BUDGET", str(prefilled + new)).replace("DELAY", repr(delay))
    (folder / "task.yaml").write_text(task_text)
    task = load_task(folder / "task.yaml")
    store = store or Store(f"sqlite:///{folder / 'evolve.db'}")
    store.create_run("bench", task_path=str(task.path), task_yaml=task.text, seed=0, settings={})
    prefill(store, "bench", prefilled)
    ticks = Ticks(list(Ticks.window(prefilled, new)))
    started = time.perf_counter()
    engine = Engine(
        task,
        store,
        store.get_run("bench"),
        make_evaluator(task),
        executors(folder),
        workers=workers,
        results_dir=folder / "results",
        observer=ticks,
    )
    outcome = engine.run()
    assert store.count_candidates("bench") == prefilled + new, outcome.reason
    store.close()
    wall, cpu = ticks.steady(prefilled, new)
    return {"wall": wall, "cpu": cpu, "setup": ticks.seen[0][0] - started}


def postgres_store(url: str) -> tuple[Store, str]:
    """A store in a schema of its own on the server at `url`, and that schema."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(make_url(url).set(drivername="postgresql+psycopg"))
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    scoped = make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})
    return Store(scoped.render_as_string(hide_password=False)), schema


def drop_schema(url: str, schema: str) -> None:
    admin = create_engine(make_url(url).set(drivername="postgresql+psycopg"))
    with admin.begin() as connection:
        connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def postgres_loop(
    url: str, prefilled: int, new: int, workers: int, executors: Executors, delay: float
) -> dict[str, float]:
    store, schema = postgres_store(url)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return time_loop(Path(tmp), prefilled, new, workers, executors, store, delay)
    finally:
        drop_schema(url, schema)


def store_costs(postgres: str | None) -> tuple[float, float | None]:
    """Per-candidate cost of the store calls on SQLite, and on PostgreSQL if given."""
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = Store(f"sqlite:///{Path(tmp) / 'evolve.db'}")
        sqlite.create_run("bench", task_path="t", task_yaml="", seed=0, settings={})
        prefill(sqlite, "bench", 10)
        sqlite_s = time_store(sqlite, "bench")
        sqlite.close()
    if postgres is None:
        return sqlite_s, None
    store, schema = postgres_store(postgres)
    try:
        store.create_run("bench", task_path="t", task_yaml="", seed=0, settings={})
        prefill(store, "bench", 10)
        return sqlite_s, time_store(store, "bench")
    finally:
        store.close()
        drop_schema(postgres, schema)


def executors_of(kind: str) -> Executors:
    """The executors `--executor` names: the local one (Ray is never imported), or Ray's on a
    private local Ray instance, started here."""
    if kind == "local":
        return LocalExecutor
    from evolve.executors.on_ray import RayExecutor
    from evolve.runtime import cluster

    cluster.connect(None)
    on_ray = RayExecutor()
    return lambda folder: on_ray


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--new", type=int, default=2000, help="candidates run through the loop")
    parser.add_argument("--sizes", default="1000,10000,50000", help="candidates stored before")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each size, alternated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--postgres", help="also time the store calls on this PostgreSQL URL")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each evaluation sleeps")
    parser.add_argument(
        "--executor", choices=("local", "ray"), default="local", help="where the workers run"
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    say(
        f"{machine()}, {load_average()}; {args.new} new candidates, {args.workers} workers "
        f"({args.executor}), evaluations of {args.delay * 1e3:g} ms"
    )
    executors = executors_of(args.executor)
    runs: dict[int, list[dict[str, float]]] = {size: [] for size in sizes}
    on_postgres: list[dict[str, float]] = []
    for _ in range(args.repeats):
        for size in sizes:
            with tempfile.TemporaryDirectory() as tmp:
                runs[size].append(
                    time_loop(Path(tmp), size, args.new, args.workers, executors, delay=args.delay)
                )
        if args.postgres:
            on_postgres.append(
                postgres_loop(
                    args.postgres, sizes[0], args.new, args.workers, executors, args.delay
                )
            )
    say(
        f"{'in store':>9} {'loop ms/cand':>13} {'cand/s':>10} {'driver CPU ms/cand':>19} "
        f"{'set-up s':>9} {'pick µs':>8}"
    )
    for size in sizes:
        walls = [run["wall"] for run in runs[size]]
        rates = [1 / wall for wall in walls]
        say(
            f"{size:>9} {spread(walls, scale=1e3):>13} {spread(rates, '.0f'):>10} "
            f"{spread([run['cpu'] for run in runs[size]], scale=1e3):>19} "
            f"{spread([run['setup'] for run in runs[size]], '.1f'):>9} "
            f"{time_selection(size) * 1e6:>8.2f}"
        )
    flat = statistics.median(runs[sizes[-1]][i]["wall"] for i in range(args.repeats))
    flat /= statistics.median(runs[sizes[0]][i]["wall"] for i in range(args.repeats))
    say(f"loop at {sizes[-1]} / at {sizes[0]} stored (medians): {flat:.2f}x")
    if on_postgres:
        walls = [run["wall"] for run in on_postgres]
        say(
            f"the loop at {sizes[0]} stored on PostgreSQL: {spread(walls, scale=1e3)} ms per "
            f"candidate, driver CPU {spread([run['cpu'] for run in on_postgres], scale=1e3)} ms"
        )
        # Each PostgreSQL run against the SQLite run at the same size in the same repeat:
        # noise that lasts minutes hits both alike.
        pairs = zip(on_postgres, runs[sizes[0]], strict=True)
        ratios = [postgres["wall"] / sqlite["wall"] for postgres, sqlite in pairs]
        median = statistics.median(ratios)
        say(f"PostgreSQL / SQLite, run by run: {spread(ratios)}x (median {median:.2f}x)")
    sqlite_s, postgres_s = store_costs(args.postgres)
    line = f"store calls per candidate, one transaction each: SQLite {sqlite_s * 1e3:.2f} ms"
    if postgres_s is not None:
        line += f", PostgreSQL {postgres_s * 1e3:.2f} ms ({postgres_s / sqlite_s:.2f}x)"
    say(line)


if __name__ == "__main__":
    main()
