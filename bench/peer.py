"""The loop's own cost with a model in it: `evolve run` against a scripted OpenAI-compatible
server (tests/fakes/llm_server.py) whose "model" answers at once, on a task whose
evaluator runs nothing, so that everything measured is the framework's.

Every reply is a diff that adds one line to the parent's block, so every proposal makes a
new candidate. Figures come from outside the driver: throughput per window from the
store's evaluation times, start-up as the time from the command to the first child's
evaluation, peak memory as the summed RSS of the command's process tree (Ray's processes
included), sampled every 0.2 s. The same start-up and memory figures follow for a run with
no model (the autotuner alone), the smallest a user starts. A last run puts a `--latency`
second delay on every reply, for `--rounds` rounds of replies, and reports slot
efficiency: candidates per second over (model slots / latency), the slots being the model
requests the engine keeps in flight, over the first 10 rounds and over them all (the first
few rounds stand idle longer than the rest).

With `--openevolve PYTHON` (the interpreter of an environment where OpenEvolve is
installed, whose `openevolve-run` sits beside it) the same workload runs through OpenEvolve
too, alternating with evolve, and the ratio per window is printed; without it, evolve's
figures alone. OpenEvolve's times come from its log's iteration lines.

Run: `.venv/bin/python bench/peer.py [--candidates 5000] [--repeats 2] [--latency 2]
[--rounds 20] [--openevolve /path/to/venv/bin/python]`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from machine import load_average, machine, say, spread  # bench/machine.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for the tests' scripted server
from tests.fakes.llm_server import Reply, ScriptedLLMServer, Stall, prompt_text  # noqa: E402

EVOLVE = ROOT / ".venv" / "bin" / "evolve"
SEED = """# EVOLVE-BLOCK-START
A = 1  # @knob int 0..100000
# EVOLVE-BLOCK-END
"""
ANCHOR = "A = 1  # @knob int 0..100000"
WINDOWS = (50, 300, 1000, 2000, 3500, 5000, 10000, 20000)  # candidates evaluated


class NewLineModel:
    """A model that adds a line no program had before under the anchor line, so that every
    answer is a new candidate; after `latency_s`, if given. It notes when it was first
    asked, on this machine's clock."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.counter = itertools.count(1)
        self.lock = threading.Lock()
        self.first_asked: float | None = None

    def __call__(self, body: dict[str, Any]) -> Reply | Stall:
        if ANCHOR not in prompt_text(body):
            raise AssertionError("the prompt did not show the parent's code")
        with self.lock:
            n = next(self.counter)
            self.first_asked = self.first_asked or time.time()
        diff = f"<<<<<<< SEARCH\n{ANCHOR}\n=======\n{ANCHOR}\nV{n} = {n}\n>>>>>>> REPLACE\n"
        reply = Reply(diff, input_tokens=100, output_tokens=20)
        return Stall(self.latency_s, reply) if self.latency_s else reply


def write_task(folder: Path, candidates: int, url: str | None = None, concurrency: int = 8) -> Path:
    """`candidates` children of the seed, made by the model at `url`; without one, by the
    autotuner alone: no proposal worker, the smallest run there is."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "seed.py").write_text(SEED)
    model = f"""\
        search: {{islands: 4, migration_interval: 50}}
        mutators:
          - name: diff
        llm:
          models:
            - {{model: scripted, base_url: "{url}"}}
          timeout_s: 30
          concurrency: {concurrency}
          finisher_share: 0
        """
    alone = """\
        mutators:
          - name: autotuner
        """
    task = folder / "task.yaml"
    task.write_text(
        textwrap.dedent(
            f"""\
            name: {"peer" if url else "offline"}
            seed: seed.py
            evaluator: {{name: synthetic, params: {{target: 1000000}}}}
            objectives: [{{name: distance, direction: minimize}}]
            budget: {{candidates: {candidates + 1}}}
            sandbox: {{backend: process}}
            """
        )
        + textwrap.dedent(model if url else alone)
    )
    return task


def tree_rss(root: int) -> int:
    """Bytes of RSS summed over `root` and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack += children.get(pid, [])
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(found[1]) * 1024 if found else 0
    return total


def watched(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `command` to its end, sampling its process tree's RSS; when it started, and
    the peak. Its output goes to a file: a pipe nobody reads would stall a chatty one."""
    started, peak = time.time(), 0
    with open(cwd / "output.log", "w+") as output:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=output)
        while process.poll() is None:
            peak = max(peak, tree_rss(process.pid))
            time.sleep(0.2)
        if process.returncode != 0:
            output.seek(0)
            raise RuntimeError(f"{command[0]} failed: {output.read()[-2000:]}")
    return {"started": started, "peak": peak}


def run_evolve(folder: Path, task: Path, workers: int) -> dict[str, Any]:
    """One `evolve run`: when each candidate's evaluation finished, from the store."""
    db = folder / "evolve.db"
    command = [str(EVOLVE), "run", str(task), "--plain", "--workers", str(workers)]
    run = watched([*command, "--db", f"sqlite:///{db}"], folder)
    with sqlite3.connect(db) as connection:
        run["finished"] = [
            row[0]
            for row in connection.execute(
                "SELECT finished_at FROM evaluations WHERE kind = 'evaluate' ORDER BY finished_at"
            )
        ][1:]  # the seed is no proposal's
    return run


ITERATION = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (?:[\w.]+ - )?INFO - Iteration \d+: ", re.M
)


def run_openevolve(
    python: str, folder: Path, url: str, iterations: int, workers: int
) -> dict[str, Any]:
    """The same workload through OpenEvolve's runner (an evaluator that returns at once,
    `workers` parallel evaluations, diffs, 4 islands): when each iteration completed, from
    its log."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial.py").write_text(SEED)
    (folder / "evaluator.py").write_text(
        "def evaluate(program_path):\n    return {'combined_score': 0.0}\n"
    )
    (folder / "config.yaml").write_text(
        textwrap.dedent(
            f"""\
            max_iterations: {iterations}
            checkpoint_interval: {iterations + 1}
            log_level: INFO
            llm:
              api_base: "{url}"
              models: [{{name: scripted, weight: 1.0}}]
              timeout: 30
            database: {{population_size: 1000, num_islands: 4}}
            evaluator: {{parallel_evaluations: {workers}, cascade_evaluation: false}}
            diff_based_evolution: true
            """
        )
    )
    runner = str(Path(python).parent / "openevolve-run")
    command = [runner, "initial.py", "evaluator.py", "--config", "config.yaml", "--output", "out"]
    run = watched(command, folder, {**os.environ, "OPENAI_API_KEY": "unused"})
    log = next((folder / "out" / "logs").glob("*.log")).read_text()
    stamps = [
        datetime.strptime(found, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for found in ITERATION.findall(log)
    ]
    run["finished"] = sorted(stamps)
    return run


def windows(finished: list[float]) -> dict[tuple[int, int], float]:
    """Candidates per second between the marks of WINDOWS that the run reached."""
    marks = [mark for mark in WINDOWS if mark <= len(finished)]
    return {
        (low, high): (high - low) / (finished[high - 1] - finished[low - 1])
        for low, high in itertools.pairwise(marks)
    }


def report(name: str, runs: list[dict[str, Any]]) -> dict[tuple[int, int], list[float]]:
    """Print a framework's windows, start-up and peak memory; its rates by window."""
    rates: dict[tuple[int, int], list[float]] = {}
    for run in runs:
        for window, rate in windows(run["finished"]).items():
            rates.setdefault(window, []).append(rate)
    say(f"{name}, {len(runs)} run(s):")
    for (low, high), values in rates.items():
        say(f"  candidates {low}-{high}: {spread(values, '.0f')} per second")
    startups = [run["finished"][0] - run["started"] for run in runs]
    say(f"  start-up (command to the first child evaluated): {spread(startups, '.1f')} s")
    peaks = [run["peak"] / 2**20 for run in runs]
    say(f"  peak RSS of the process tree: {spread(peaks, '.0f')} MB")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="model requests in flight")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds, for slot efficiency")
    parser.add_argument("--rounds", type=int, default=20, help="of replies, for slot efficiency")
    parser.add_argument("--openevolve", help="python of an environment with OpenEvolve")
    args = parser.parse_args()
    say(f"{machine()}, {load_average()}")
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for _ in range(args.repeats):  # alternated, so that background load hits both alike
        with (
            tempfile.TemporaryDirectory() as tmp,
            ScriptedLLMServer(default=NewLineModel()) as server,
        ):
            folder = Path(tmp)
            task = write_task(folder / "task", args.candidates, server.openai_url, args.concurrency)
            ours.append(run_evolve(folder, task, args.workers))
            if args.openevolve:
                theirs.append(
                    run_openevolve(
                        args.openevolve, folder / "oe", server.openai_url, args.candidates,
                        args.workers,
                    )
                )  # fmt: skip
    say(f"scripted model answering at once, {args.workers} workers, {args.candidates} candidates")
    rates = report(f"evolve ({args.concurrency} model requests in flight)", ours)
    if theirs:
        peer = report("OpenEvolve", theirs)
        for window, values in rates.items():
            if window in peer:
                ratio = statistics.median(values) / statistics.median(peer[window])
                say(f"  evolve / OpenEvolve, candidates {window[0]}-{window[1]}: {ratio:.2f}x")
    offline = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            task = write_task(Path(tmp) / "task", args.candidates)
            offline.append(run_evolve(Path(tmp), task, args.workers))
    say(f"no model (the autotuner alone), {args.workers} workers, {args.candidates} candidates:")
    startups = [run["finished"][0] - run["started"] for run in offline]
    say(f"  start-up (command to the first child evaluated): {spread(startups, '.1f')} s")
    say(f"  peak RSS of the process tree: {spread([r['peak'] / 2**20 for r in offline], '.0f')} MB")
    slow = NewLineModel(args.latency)
    slots = args.workers + args.concurrency  # model requests the engine keeps in flight
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(default=slow) as server:
        folder = Path(tmp)
        task = write_task(folder / "task", args.rounds * slots, server.openai_url, args.concurrency)
        finished = run_evolve(folder, task, args.workers)["finished"]
    assert slow.first_asked is not None
    ideal = slots / args.latency
    say(f"slot efficiency at {args.latency:g} s per reply, {slots} model slots "
        f"(candidates/s of the {ideal:.2f} the slots allow):")  # fmt: skip
    # From the first request to a round's last child evaluated: every child waited a reply.
    for rounds in sorted({min(10, args.rounds), args.rounds}):
        children = min(rounds * slots, len(finished))  # a run cut short reports what it did
        rate = children / (finished[children - 1] - slow.first_asked)
        say(f"  over the first {rounds} rounds of replies: {rate:.2f} = {rate / ideal:.1%}")


if __name__ == "__main__":
    main()
