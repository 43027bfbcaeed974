"""What losing a node costs a run on a Ray cluster: throughput before and after, how long
the loop stalls, how soon the run notices, and how soon a fresh node is put to work.

The cluster is the tests' (tests/ray_nodes.py): worker nodes in containers of the sandbox
image, one CPU each, the head on this host. The run is `evolve run --ray-address` with two
workers on the synthetic evaluator, whose every evaluation takes `--delay` seconds, so a
healthy run's throughput is known in advance (two workers / delay, less the loop's
overhead). Once a quarter of the budget is evaluated, one worker node is killed; once the
run has gone on alone for `--alone` seconds, a fresh node is started. Every figure comes
from the store's evaluation times, i.e. from outside the driver.

Run from the repository root: `.venv/bin/python bench/cluster.py [--delay 0.5]
[--candidates 120]`. It needs Docker, the sandbox image (`evolve sandbox build`) and a
PostgreSQL store: `--db`, by default $EVOLVE_TEST_POSTGRES_URL (`.ci/postgres.sh`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from machine import load_average, machine, say  # bench/machine.py, beside this script

from evolve.engine.pool import START_DEADLINE_S
from evolve.store import EvaluationRecord, Store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for the tests' cluster harness
from tests.ray_nodes import HEALTH_CHECKS, RayNodes  # noqa: E402

SEED = """# EVOLVE-BLOCK-START
A = 1  # @knob int 0..64
B = 1  # @knob int 0..64
# EVOLVE-BLOCK-END
"""
TASK = """\
name: cluster-bench
seed: seed.py
evaluator: {{name: synthetic, params: {{target: 100, delay_s: {delay}}}}}
objectives: [{{name: distance, direction: minimize}}]
search: {{islands: 2, migration_interval: 10}}
budget: {{candidates: {candidates}}}
sandbox: {{backend: process}}
"""
RETRIED = re.compile(r"worker died during #(\d+)")
POLL_S = 0.3
RUN_TIMEOUT_S = 900.0


@dataclass
class Timeline:
    """Wall-clock times (time.time(), as the store keeps them) of what the bench did."""

    killed: float = 0.0
    joined: float | None = None  # the fresh node counted alive by the head
    victim: str = ""
    survivor: str = ""
    fresh: str = ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per evaluation")
    parser.add_argument("--candidates", type=int, default=120, help="the run's budget")
    parser.add_argument(
        "--alone", type=float, default=15.0, help="seconds on one node before a fresh one joins"
    )
    parser.add_argument("--no-rejoin", action="store_true", help="never start a fresh node")
    parser.add_argument("--db", default=os.environ.get("EVOLVE_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    if not args.db:
        parser.error("no store: pass --db, or export EVOLVE_TEST_POSTGRES_URL (.ci/postgres.sh)")
    say(f"machine: {machine()}; {load_average()}")
    run = f"cluster-bench-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory() as tmp, RayNodes.running(workers=2) as nodes:
        folder = Path(tmp)
        (folder / "seed.py").write_text(SEED)
        (folder / "task.yaml").write_text(TASK.format(delay=args.delay, candidates=args.candidates))
        say(
            f"cluster: head on this host (0 CPUs), worker nodes {', '.join(nodes.live)} "
            f"(containers, 1 CPU each); a dead node is declared after "
            f"{_detection_s():.0f} s of failed health checks"
        )
        say(f"run {run}: {args.candidates} candidates, {args.delay} s each, 2 workers")
        log = folder / "driver.log"
        driver = subprocess.Popen(
            [sys.executable, "-m", "evolve", "run", "task.yaml", "--name", run,
             "--ray-address", nodes.address, "--db", args.db, "--workers", "2", "--plain"],
            cwd=folder, env=nodes.driver_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            timeline = _drive(nodes, driver, log, args, run)
            code = driver.wait(timeout=RUN_TIMEOUT_S)
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
        if code != 0:
            say(log.read_text()[-4000:])
            raise SystemExit(f"the run failed (exit {code})")
        with Store(args.db) as store:
            evaluations = store.run_evaluations(run)
        _report(evaluations, timeline, log.read_text(), args)


def _drive(
    nodes: RayNodes, driver: subprocess.Popen[bytes], log: Path, args: argparse.Namespace, run: str
) -> Timeline:
    """Kill a node a quarter of the way in, and start a fresh one `--alone` s later."""
    timeline = Timeline()
    first = nodes.live[:2]
    with Store(args.db) as store:
        while _evaluated(store, run, first) < args.candidates // 4:
            if driver.poll() is not None:
                raise SystemExit(f"the run ended before the kill:\n{log.read_text()[-4000:]}")
            time.sleep(POLL_S)
    timeline.victim, timeline.survivor = first
    nodes.kill(timeline.victim)
    timeline.killed = time.time()
    say(f"killed {timeline.victim}")
    if args.no_rejoin:
        return timeline
    while time.time() < timeline.killed + args.alone and driver.poll() is None:
        time.sleep(POLL_S)
    if driver.poll() is None:
        timeline.fresh = nodes.add_worker().name
        timeline.joined = time.time()
        say(f"{timeline.fresh} joined")
    return timeline


def _evaluated(store: Store, run: str, hosts: list[str]) -> int:
    """Evaluations so far, once every node in `hosts` has one (else 0)."""
    done = store.run_evaluations(run)
    seen = {e.sandbox.get("node", {}).get("host") for e in done}
    return len(done) if seen >= set(hosts) else 0


def _report(
    evaluations: list[EvaluationRecord], timeline: Timeline, output: str, args: argparse.Namespace
) -> None:
    killed, joined = timeline.killed, timeline.joined
    fresh_done = [e for e in evaluations if _host(e) == timeline.fresh]
    grown = min((e.started_at for e in fresh_done), default=None)
    # From when both nodes evaluate: the seed is evaluated alone, before any child exists.
    first = max(
        min(e.finished_at for e in evaluations if _host(e) == host)
        for host in (timeline.victim, timeline.survivor)
    )
    last = max(e.finished_at for e in evaluations)
    ideal = 2 / args.delay
    say()
    say(f"{'phase':<34} {'span s':>7} {'evaluated':>9} {'cand/s':>7} {'of ideal':>9}")
    phases = [
        ("before the kill (2 nodes)", first, killed, ideal),
        ("after the kill (1 node)", killed, grown or last, ideal / 2),
    ]
    if grown is not None:
        phases.append(("once the fresh node works (2)", grown, last, ideal))
    for name, start, end, best in phases:
        count = sum(start < e.finished_at <= end and e.kind == "evaluate" for e in evaluations)
        span = end - start
        rate = count / span if span > 0 else 0.0
        say(f"{name:<34} {span:>7.1f} {count:>9} {rate:>7.2f} {rate / best:>8.0%}")
    say()
    finished = sorted(e.finished_at for e in evaluations if e.finished_at > killed - args.delay)
    window = [t for t in finished if t <= (grown or last)]
    gaps = [(b - a, a) for a, b in pairwise([killed, *window])]
    stall, stall_from = max(gaps, default=(0.0, killed))
    survivor = [e for e in evaluations if _host(e) == timeline.survivor]
    after = sorted(e.finished_at for e in survivor if e.finished_at > killed)
    retried = RETRIED.search(output)
    redo = [e for e in evaluations if retried and e.candidate_id == int(retried[1])]
    say(f"{'after the kill of ' + timeline.victim:<52} {'seconds':>8}")
    rows = [
        ("longest gap between finished evaluations (stall)", stall),
        ("  which began at", stall_from - killed),
        ("first evaluation finished on the surviving node", after[0] - killed if after else None),
        (
            f"lost job #{retried[1] if retried else '?'} retried: started",
            redo[-1].started_at - killed if redo else None,
        ),
        ("  and finished", redo[-1].finished_at - killed if redo else None),
        ("fresh node joined (ray start done)", joined - killed if joined else None),
        ("first evaluation started on the fresh node", grown - killed if grown else None),
    ]
    for name, value in rows:
        say(f"{name:<52} {'-' if value is None else f'{value:8.1f}':>8}")
    say(f"(the pool gives up a worker Ray cannot place after {START_DEADLINE_S:.0f} s)")
    shrunk = [line for line in output.splitlines() if "the pool" in line or "died" in line]
    if shrunk:
        say("the driver said:")
        for line in shrunk:
            say(textwrap.shorten(line, 160))


def _host(evaluation: EvaluationRecord) -> str:
    return str(evaluation.sandbox.get("node", {}).get("host", ""))


def _detection_s() -> float:
    period = float(HEALTH_CHECKS["RAY_health_check_period_ms"]) / 1000
    return period * float(HEALTH_CHECKS["RAY_health_check_failure_threshold"])


if __name__ == "__main__":
    main()
