"""Whether model proposals spread over parents: the duplicate share of model proposals and
the model calls per evaluated child, with spreading off and on, on matmul_c.

Each run is `evolve run` on a copy of tasks/matmul_c (counters off, the process sandbox,
the `diff` operator, the novelty filter at NOVELTY) against the scripted OpenAI server of
tests/fakes, whose "model" (tests/fakes/matmul_model.py) answers after DELAY_S with one
of the few most plausible one-knob edits of the program it is shown: asked together about
one program, it often gives the same answer, as a real model does; it leaves out what the
prompt's recent attempts list, and the changes its "Already in the run" and "Being tried
now on its siblings" sections name, and steers away from its most obvious edits when the
prompt says others are being tried on the program. "unspread" sets
`search.in_flight_per_parent: 0` (no cap, no small-population limit, no cooling; the
prompts still name the proposals in flight), "spread" the default, 1.

    python bench/proposal_spread.py [--seeds 2] [--candidates 40]

Prints a markdown table: per run, model proposals, their duplicate and too-similar shares
(and how many duplicates repeat a sibling, a child of the same parent), model calls,
evaluated children and calls per evaluated child, wall time, and the load average before
and after.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evolve.mutators import LLM_OPERATORS  # noqa: E402
from evolve.store import Store  # noqa: E402
from tests.fakes.llm_server import ScriptedLLMServer  # noqa: E402
from tests.fakes.matmul_model import MatmulModel  # noqa: E402

NOVELTY = 0.98  # a one-knob edit of matmul_c is 0.94-0.979 similar to its parent
DELAY_S = 2.0  # a model's reply time
CONCURRENCY = 8  # llm.concurrency: model requests at once (as many again wait)
ARMS = {"unspread": 0, "spread": 1}


@dataclass(frozen=True)
class Figures:
    arm: str
    seed: int
    proposals: int
    duplicates: int
    siblings: int
    too_similar: int
    calls: int
    evaluated: int
    wall_s: float
    load: tuple[float, float]


def write_task(folder: Path, url: str, per_parent: int) -> Path:
    """matmul_c at n = 256 without counters, evolved by the scripted model."""
    task_dir = folder / "matmul"
    shutil.copytree(ROOT / "tasks" / "matmul_c", task_dir)
    text = (task_dir / "task.yaml").read_text()
    text = re.sub(r"(?m)^    counter_sizes: .*\n", "", text)
    text = text.replace("sizes: {n: 512}", "sizes: {n: 256}\n    counters: false")
    text = text.replace("reps: 7", "reps: 5")
    text = text.replace("  - {name: autotuner}", "  - {name: diff}")
    text = text.replace(
        "  migration_interval: 25\n",
        f"  migration_interval: 25\n  novelty_threshold: {NOVELTY}\n"
        f"  in_flight_per_parent: {per_parent}\n",
    )
    text += (
        f"llm:\n  models:\n    - {{model: scripted, base_url: '{url}'}}\n"
        f"  concurrency: {CONCURRENCY}\n  timeout_s: 30\n  finisher_share: 0\n"
    )
    (task_dir / "task.yaml").write_text(text)
    return task_dir / "task.yaml"


def one_run(arm: str, seed: int, candidates: int) -> Figures:
    before = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedLLMServer(default=MatmulModel(seed, DELAY_S)) as server,
    ):
        folder = Path(tmp)
        task = write_task(folder, server.openai_url, ARMS[arm])
        command = [
            sys.executable, "-m", "evolve", "run", str(task), "--name", "spread",
            "--seed", str(seed), "--sandbox", "process", "--candidates", str(candidates),
            "--workers", "1", "--wall-time", "400", "--plain", "--results", str(folder / "results"),
        ]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}
        started = time.monotonic()
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        wall_s = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"{arm} seed {seed} failed:\n{done.stdout[-3000:]}{done.stderr}")
        calls = len(server.requests)
        with Store(f"sqlite:///{folder / 'results' / 'evolve.db'}") as store:
            proposals = [p for p in store.proposals("spread") if p.operator in LLM_OPERATORS]
            counts = store.status_counts("spread")
            siblings = sum(
                p.outcome == "duplicate"
                and p.nearest_id is not None
                and (owner := store.candidate(p.nearest_id)) is not None
                and owner.parent_ids[:1] == p.parent_ids[:1]
                for p in proposals
            )
    outcomes = [p.outcome for p in proposals]
    evaluated = sum(n for status, n in counts.items() if status != "pending") - 1  # the seed
    return Figures(
        arm,
        seed,
        len(proposals),
        outcomes.count("duplicate"),
        siblings,
        outcomes.count("too_similar"),
        calls,
        evaluated,
        wall_s,
        (before, os.getloadavg()[0]),
    )


def row(f: Figures) -> str:
    share = f"{f.duplicates / f.proposals:.0%}" if f.proposals else "-"
    similar = f"{f.too_similar / f.proposals:.0%}" if f.proposals else "-"
    per_child = f"{f.calls / f.evaluated:.2f}" if f.evaluated else "-"
    return (
        f"| {f.arm} | {f.seed} | {f.proposals} | {f.duplicates} ({share}; {f.siblings}) | "
        f"{f.too_similar} ({similar}) | {f.calls} | {f.evaluated} | {per_child} | "
        f"{f.wall_s:.0f} | {f.load[0]:.2f} / {f.load[1]:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=40)
    args = parser.parse_args()
    print(
        "| arm | seed | model proposals | duplicates (share; of a sibling) | too similar | "
        "model calls | evaluated children | calls per child | wall s | load before / after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in range(args.seeds):
        for arm in ARMS:
            print(row(one_run(arm, seed, args.candidates)), flush=True)


if __name__ == "__main__":
    main()
