"""How long `evolve report` takes on a big run, and how big its file is.

A SQLite store is filled with one run of `--candidates` candidates (10,000 by default),
written straight through SQLAlchemy Core in bulk, since the engine would take minutes to
make them: a lineage whose parents are recent candidates of the same island (so the best's
chain of first parents is hundreds of generations long, the report's worst case), C
programs of 40 lines differing from their parent in a knob or two, an evaluation each with
its stages and the machine it ran on, a re-measurement of one in fifty, check failures and
timeouts, a proposal each plus dropped ones (duplicate, too_similar, failed,
retries_exhausted), model calls for one proposal in five, and counters on the seed and the
best. Then `write_report` is timed `--repeats` times (the spread of those runs is
reported), and so is reading the facts alone; the file's size is printed.

Run: `.venv/bin/python bench/report.py [--candidates 10000] [--repeats 3]`.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import load_average, machine, say, spread  # bench/machine.py, beside this script
from sqlalchemy import create_engine, insert

from evolve.report import write_report
from evolve.report.facts import read_facts
from evolve.store import Store, default_url
from evolve.store.schema import Candidate, Evaluation, LLMCall, Proposal

RUN = "bench"
ISLANDS = 4
KNOBS = 6
TARGET = 300
RECENT = 40  # a parent is one of the island's last RECENT candidates
NODE = {"node_id": "0" * 40, "host": "bench-host", "cpu": "Bench CPU"}
MODELS = ("openai:gpt-bench", "anthropic:claude-bench")
DROPPED = ("duplicate", "duplicate", "too_similar", "failed", "retries_exhausted")
TASK = f"""name: bench-report
seed: kernel.c
evaluator: {{name: synthetic, params: {{target: {TARGET}}}}}
objectives:
  - {{name: distance, direction: minimize}}
  - {{name: knob_sum, direction: minimize, weight: 0.01}}
search: {{islands: {ISLANDS}}}
budget: {{candidates: 10000, usd: 50}}
sandbox: {{backend: process}}
"""


def program(knobs: list[int]) -> str:
    """A C kernel of about 40 lines whose knobs are `knobs`."""
    lines = ["#include <stddef.h>", "", "// EVOLVE-BLOCK-START"]
    lines += [f"#define K{i} {value}  // @knob int 0..200" for i, value in enumerate(knobs)]
    lines += ["", "void kernel(size_t n, const float *a, float *b) {"]
    lines += [
        f"    for (size_t i = 0; i < n; i += K{i}) b[i] += a[i] * {i}.5f;" for i in range(KNOBS)
    ]
    lines += ["    /* padding so the diff has context */"] * 20
    lines += ["}", "// EVOLVE-BLOCK-END", ""]
    return "\n".join(lines)


def rows(count: int, rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Every row of the run, in the order of their ids (1, 2, ...)."""
    now = time.time()
    knobs: list[list[int]] = []
    islands: list[list[int]] = [[] for _ in range(ISLANDS)]
    candidates: list[dict[str, Any]] = []
    evaluations: list[dict[str, Any]] = []
    proposals: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for index in range(count):
        cid = index + 1
        island = index % ISLANDS
        model = rng.choice(MODELS) if index and rng.random() < 0.2 else None
        if index == 0:
            parent, mine, mutation = None, [10] * KNOBS, {"operator": "seed"}
        else:
            parent = rng.choice(islands[island][-RECENT:] or [1])
            mine = list(knobs[parent - 1])
            moved = rng.sample(range(KNOBS), rng.randint(1, 2))
            for place in moved:
                mine[place] = max(0, min(200, mine[place] + rng.randint(-12, 14)))
            first = moved[0]
            summary = (
                f"+{len(moved)}/-{len(moved)} lines in kernel.c: `#define K{first} {mine[first]}`"
            )
            if model is None:
                changes = {f"kernel.c:{4 + p}": [knobs[parent - 1][p], mine[p]] for p in moved}
                mutation = {"operator": "tune", "mutator": "autotuner", "changes": changes}
            else:
                mutation = {"operator": "diff", "mutator": "diff", "model": model}
            mutation["summary"] = summary
        knobs.append(mine)
        islands[island].append(cid)
        created = now + index * 0.05
        roll = rng.random()
        status = "ok" if roll < 0.85 else "check_failed" if roll < 0.95 else "timeout"
        total = sum(mine)
        metrics = {"distance": abs(total - TARGET), "knob_sum": float(total)}
        score = -metrics["distance"] - 0.01 * total if status == "ok" else None
        generation = 0 if parent is None else candidates[parent - 1]["generation"] + 1
        candidates.append(
            {
                "id": cid,
                "run_name": RUN,
                "parent_ids": [] if parent is None else [parent],
                "island": island,
                "generation": generation,
                "files": {"kernel.c": program(mine)},
                "code_hash": f"{cid:064x}",
                "mutation": mutation,
                "status": status,
                "score": score,
                "measurements": 1,
                "created_at": created,
            }
        )
        evaluations.append(evaluation(cid, status, metrics, score, created))
        if status == "ok" and rng.random() < 0.02:
            lower = score - rng.random()
            evaluations.append(evaluation(cid, "ok", metrics, lower, created + 1, "remeasure"))
            candidates[-1].update(score=lower, measurements=2)
        if parent is not None:
            proposals.append(proposal(len(proposals) + 1, cid, parent, island, model, created))
            if model is not None:
                calls.append(call(len(calls) + 1, proposals[-1], cid, created))
        if rng.random() < 0.3 and parent is not None:
            dropped = proposal(len(proposals) + 1, None, parent, island, model, created)
            dropped["outcome"] = rng.choice(DROPPED)
            proposals.append(dropped)
            if model is not None:
                calls.append(call(len(calls) + 1, dropped, None, created))
    return {
        "candidates": candidates,
        "evaluations": evaluations,
        "proposals": proposals,
        "calls": calls,
    }


def evaluation(
    cid: int,
    status: str,
    metrics: dict[str, float],
    score: float | None,
    at: float,
    kind: str = "evaluate",
) -> dict[str, Any]:
    ok = status == "ok"
    stages = [
        {
            "name": "build",
            "ok": True,
            "seconds": 0.2,
            "feedback": "",
            "metrics": {},
            "timed_out": False,
        },
        {
            "name": "check" if status != "timeout" else "measure",
            "ok": ok,
            "seconds": 0.1,
            "feedback": "" if ok else f"element {cid % 97} differs by {cid % 13}.5e-3",
            "metrics": metrics if ok else {},
            "timed_out": status == "timeout",
        },
    ]
    return {
        "candidate_id": cid,
        "run_name": RUN,
        "kind": kind,
        "status": status,
        "stages": stages,
        "metrics": metrics if ok else {},
        "counters": {},
        "feedback": "\n\n".join(f"[{s['name']}] {s['feedback']}" for s in stages if s["feedback"]),
        "artifacts": {},
        "sandbox": {"backend": "process", "runs": 2, "node": NODE},
        "score": score,
        "input_seed": cid,
        "worker": "w1@bench-host",
        "started_at": at,
        "finished_at": at + 0.3,
    }


def proposal(
    pid: int, child: int | None, parent: int, island: int, model: str | None, at: float
) -> dict[str, Any]:
    return {
        "id": pid,
        "run_name": RUN,
        "operator": "diff" if model else "autotuner",
        "models": [model] if model else [],
        "parent_ids": [parent],
        "parent_id": parent,
        "island": island,
        "arm": None,
        "outcome": "candidate",
        "detail": "",
        "summary": "+1/-1 lines",
        "candidate_id": child,
        "nearest_id": None,
        "similarity": None,
        "calls": 1 if model else 0,
        "cost_usd": 0.004 if model else 0.0,
        "tokens": 2400 if model else 0,
        "created_at": at,
        "finished_at": at + 2.0,
    }


def call(cid: int, made_by: dict[str, Any], child: int | None, at: float) -> dict[str, Any]:
    provider, model = made_by["models"][0].split(":")
    return {
        "id": cid,
        "run_name": RUN,
        "candidate_id": child,
        "proposal_id": made_by["id"],
        "call_id": f"{cid:032x}",
        "provider": provider,
        "model": model,
        "operator": made_by["operator"],
        "prompt": "improve this kernel\n" * 100,
        "response": "```c\n...\n```\n" * 40,
        "input_tokens": 2000,
        "output_tokens": 400,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0.004,
        "latency_s": 3.0,
        "status": "ok",
        "error": None,
        "created_at": at,
    }


def fill(url: str, count: int) -> None:
    """The run through the store (schema and run row), then its rows in bulk."""
    store = Store(url)
    store.create_run(RUN, task_path="task.yaml", task_yaml=TASK, seed=0, settings={})
    store.close()
    made = rows(count, random.Random(0))
    best = max((c for c in made["candidates"] if c["score"] is not None), key=lambda c: c["score"])
    for cid, scale in ((1, 3.0), (best["id"], 1.0)):
        first = next(e for e in made["evaluations"] if e["candidate_id"] == cid)
        first["counters"] = {
            "cycles": {"value": 4.0e6 * scale, "source": "perf"},
            "instructions": {"value": 6.0e6 * scale, "source": "perf"},
        }
    engine = create_engine(url)
    with engine.begin() as connection:
        for table, key in (
            (Candidate, "candidates"),
            (Evaluation, "evaluations"),
            (Proposal, "proposals"),
            (LLMCall, "calls"),
        ):
            connection.execute(insert(table.__table__), made[key])
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    say(f"{machine()}, {load_average()}; a run of {args.candidates} candidates")
    with tempfile.TemporaryDirectory() as tmp:
        url = default_url(Path(tmp))
        started = time.perf_counter()
        fill(url, args.candidates)
        say(f"store filled in {time.perf_counter() - started:.1f} s")
        store = Store(url)
        reads, writes = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            read_facts(store, RUN)
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            page = write_report(store, RUN, Path(tmp) / "report.html")
            writes.append(time.perf_counter() - started)
        store.close()
        size = page.stat().st_size
    say(
        f"write_report: {spread(writes)} s ({args.repeats} runs); reading the facts alone: "
        f"{spread(reads)} s"
    )
    say(f"report.html: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
