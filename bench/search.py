"""Which search strategy gets the most out of a fixed number of proposals: `islands`,
`map_elites` and `pareto`, each with the novelty filter off and on, on landscapes built to
mislead a search that follows the score.

No model, Ray or store is involved: the real strategy objects (evolve.search.make_strategy)
and the real NoveltyIndex are driven in-process. One run is N proposals; each proposal:

1. the strategy picks a parent (`pick`);
2. a scripted stochastic proposer, standing in for a model, writes a child: a real Program
   whose EVOLVE-BLOCK holds `@knob` values, so the novelty filter sees code, not numbers;
3. a child whose code_hash was already evaluated is a duplicate: the store would not
   evaluate it again, with or without novelty, so it is free in both arms;
4. with novelty on, a child the index finds too similar to an evaluated one is rejected:
   an evaluation saved. The rejection is also sorted by whether its knob values equal its
   nearest neighbour's (the same behaviour: truly nothing lost) or not (a real change that
   the filter threw away);
5. otherwise the landscape gives its metrics, evolve.engine.scoring.score gives its score, and the
   strategy gets `Scored(...)`; migrations run as the engine runs them.

The proposer, per proposal (shares of proposals):
- 50% tune: 1-2 knobs moved as the autotuner moves them (evolve.mutators.autotuner's
  mutate_value: a log-normal step of sigma 0.25 for a float, an octave or a jump for a
  pow2, another option for a choice); floats are written to 3 decimals, as a model writes;
- 15% crossover with `strategy.partner`: each knob from either parent (a tune when there
  is no partner);
- 15% cosmetic: the parent's values with a one-line comment added, changed or dropped, as
  a reply that only "explains" or tidies;
- 15% repeat: one of the last 5 children proposed from this parent again, half of them
  with a cosmetic change (a tune when there are none): a model that forgets what it tried;
- 5% rewrite: every knob drawn afresh over its range, a bold new idea.

Landscapes (four float knobs X0..X3 in [0, 1]; the seed has all four at 0.15):
- trap, on X0 and X1 (X2 and X3 do nothing, as many edits a model makes do nothing): a
  broad hill of height 0.6 (sigma 0.3) at (0.25, 0.25) beside the seed and a narrow peak
  of 1.0 (sigma 0.1) at (0.8, 0.8); between them fitness is ~0, so every step from the
  hill towards the peak scores worse. Second objective `cost` = mean(X0, X1), minimised
  (weight 0.1): it points back into the trap, so a Pareto front gets no help from it.
- needle, on all four, separable: per knob a hill of 0.6 (sigma 0.1) at 0.3 and a needle
  of 1.0 (sigma 0.04) at 0.85 behind a valley of ~0 around 0.6; fitness is the mean over
  knobs (0.6 on the hills, +0.1 for each knob on its needle). Second objective `reach` =
  mean(x), maximised (weight 0.1): it rewards walking through the valley, the case where a
  second objective should help a front.
- matmul_c: the real task's knobs (cflags, three pow2 tiles, loop order), scored from a
  table measured once with the real c_kernel evaluator (bench/data/matmul_c_landscape.json,
  written by --measure-matmul: the seed's setting and MATMUL_PER_COMBO random tilings for
  each of the 36 (cflags, loop order) pairs, at n = 256 with MATMUL_PARAMS). A child takes
  the metrics of the measured setting with its cflags and loop order that is nearest in
  log2 tile sizes (L1; ties to the first measured). Objectives as in its pareto.yaml:
  `speedup` (timed in pairs with the seed, so the table holds up on a loaded machine),
  maximised, and `code_bytes` (the object's machine code), minimised with weight 1e-4.
MAP-Elites cells: the synthetic landscapes by their mean metric (10 bins) and `spread`, the
max - min of the knobs that matter (4 bins); matmul_c by code_bytes (8 bins over the
measured range) and code_length (4 bins). Otherwise every strategy has the task defaults
(3 islands, migration every 25 evaluations, pressure 1.5, 10% exploration). The novelty
threshold is per landscape (NOVELTY): 0.9 on the synthetic ones, where a one-number edit of
the 13-token block scores below 0.8; 1.0, the most lenient, on matmul_c, whose 500-token
block makes a one-knob edit ~0.98 similar, which 64 MinHash permutations often read as 1.0.

Reported per configuration, over seeds 0..S-1 (the arms of one seed start alike): the
median and min-max of the best primary metric (fitness, or speedup) among the evaluated
programs after N proposals; how many runs reached the landscape's goal (past the hills'
0.6, or a speedup in the top 2% of the measured settings); the median number of
evaluations, of exact duplicates (free in both arms) and of proposals the novelty filter
rejected, with the share of those whose knob values equalled their nearest neighbour's.
About 2 minutes on 2 cores for the defaults; --measure-matmul adds about 6 (217
evaluations).
Run: `.venv/bin/python bench/search.py [--seeds 20] [--proposals 200] [--measure-matmul]`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import random
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from landscapes import (  # bench/landscapes.py, beside this script
    MATMUL_TABLE,
    ROOT,
    Landscape,
    MatmulTable,
    fresh_value,
    matmul_landscape,
    synthetic,
    values_of,
)
from machine import machine, say  # bench/machine.py, beside this script
from matmul_table import measure_matmul  # beside this script

from evolve.engine.scoring import score
from evolve.mutators.autotuner import mutate_value
from evolve.plugin.knobs import Knob, Value, find_knobs, set_knobs
from evolve.plugin.program import Program
from evolve.search import Pick, Scored, make_strategy
from evolve.search.novelty import NoveltyIndex
from evolve.task.schema import SearchSpec

STRATEGIES = ("islands", "map_elites", "pareto")
NOVELTY = {"trap": 0.9, "needle": 0.9, "matmul_c": 1.0}

# The proposer's operators and their shares of proposals (see the docstring).
OPERATORS = {"tune": 0.50, "crossover": 0.15, "cosmetic": 0.15, "repeat": 0.15, "rewrite": 0.05}
FLOAT_SIGMA = 0.25
RECENT = 5  # children per parent the proposer may repeat
NOTES = (
    "keep the working set small",
    "same values, clearer comment",
    "try the previous setting again",
    "this should vectorise better",
    "small cleanup, no change in behaviour",
    "explain the parameter choice",
)

# -- the scripted proposer -----------------------------------------------------------------


def comment_prefix(path: str) -> str:
    return "#" if path.endswith(".py") else "//"


def with_note(program: Program, note: str | None) -> Program:
    """The program with its proposer's note (one comment line opening its first block)
    set to `note`, or dropped when None."""
    path = program.main_file
    prefix = f"{comment_prefix(path)} note:"
    lines = program.files[path].splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if "EVOLVE-BLOCK-START" in line)
    if lines[start + 1].startswith(prefix):
        del lines[start + 1]
    if note is not None:
        lines.insert(start + 1, f"{prefix} {note}\n")
    return program.replace({**program.files, path: "".join(lines)})


def written(knob: Knob, value: Value) -> Value:
    return round(float(value), 3) if knob.kind == "float" else value


class Proposer:
    """A model stand-in: mostly small edits of the parent, some crossovers, and a share of
    replies that change nothing that runs (see the docstring for the mix)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sent: dict[int, deque[Program]] = {}

    def propose(
        self, parent_id: int, parent: Program, partner: Callable[[], Program | None]
    ) -> Program:
        rng = self.rng
        operator = rng.choices(list(OPERATORS), weights=list(OPERATORS.values()))[0]
        child: Program | None = None
        if operator == "repeat" and self.sent.get(parent_id):
            child = rng.choice(self.sent[parent_id])
            if rng.random() < 0.5:
                child = self.cosmetic(child)
        elif operator == "crossover":
            other = partner()
            if other is not None:
                child = self.crossover(parent, other)
        elif operator == "cosmetic":
            child = self.cosmetic(parent)
        elif operator == "rewrite":
            knobs = find_knobs(parent)
            fresh = {i: written(k, fresh_value(k, rng)) for i, k in enumerate(knobs)}
            child = set_knobs(parent, knobs, fresh)
        if child is None:  # a tune, or an operator that had nothing to work with
            child = self.tune(parent)
        self.sent.setdefault(parent_id, deque(maxlen=RECENT)).append(child)
        return child

    def tune(self, parent: Program) -> Program:
        knobs = find_knobs(parent)
        moved = self.rng.sample(range(len(knobs)), self.rng.randint(1, min(2, len(knobs))))
        values = {
            i: written(knobs[i], mutate_value(knobs[i], self.rng, FLOAT_SIGMA)) for i in moved
        }
        return set_knobs(parent, knobs, values)

    def crossover(self, parent: Program, other: Program) -> Program:
        knobs, theirs = find_knobs(parent), find_knobs(other)
        values = {i: theirs[i].value for i in range(len(knobs)) if self.rng.random() < 0.5}
        return set_knobs(parent, knobs, values)

    def cosmetic(self, program: Program) -> Program:
        if self.rng.random() < 0.2:
            return with_note(program, None)
        return with_note(program, self.rng.choice(NOTES))


# -- one run -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    best: float
    evaluations: int
    duplicates: int
    saved: int  # rejected by the novelty filter, so never evaluated
    saved_same: int  # of those, children with their nearest neighbour's knob values


def run_once(
    landscape: Landscape, strategy_name: str, novelty: bool, seed: int, proposals: int
) -> Outcome:
    rng = random.Random(f"{landscape.name}:{seed}")  # the arms share their start
    spec = SearchSpec(
        strategy=strategy_name,
        features=list(landscape.features) if strategy_name == "map_elites" else [],
        novelty_threshold=NOVELTY[landscape.name] if novelty else None,
    )
    strategy = make_strategy(spec, landscape.objectives, seed_id=0)
    index = NoveltyIndex(NOVELTY[landscape.name]) if novelty else None
    programs: dict[int, Program] = {}
    seen: set[str] = set()
    best = -math.inf
    evaluated = 0

    def evaluate(program: Program, island: int) -> None:
        nonlocal best
        candidate_id = len(programs)
        programs[candidate_id] = program
        seen.add(program.code_hash)
        if index is not None:
            index.add(candidate_id, program)
        metrics = landscape.measure(values_of(program))
        value = None if metrics is None else score(metrics, landscape.objectives)
        if metrics is None or value is None:
            return
        best = max(best, metrics[landscape.primary])
        strategy.add(Scored(candidate_id, island, value, metrics, program.code_length))

    evaluate(landscape.seed, 0)
    proposer = Proposer(rng)
    duplicates = saved = saved_same = 0
    for _ in range(proposals):
        pick = strategy.pick(rng)
        if pick is None:
            raise RuntimeError(f"{strategy_name} has no parent on {landscape.name}")

        def partner(pick: Pick = pick) -> Program | None:
            other = strategy.partner(pick, rng)
            return None if other is None else programs[other]

        child = proposer.propose(pick.parent_id, programs[pick.parent_id], partner)
        if child.code_hash in seen:
            duplicates += 1
            continue
        hit = index.too_similar(child) if index is not None else None
        if hit is not None:
            saved += 1
            saved_same += values_of(child) == values_of(programs[hit[0]])
            continue
        evaluate(child, pick.island)
        evaluated += 1
        strategy.migrations_due(evaluated)
    return Outcome(best, evaluated, duplicates, saved, saved_same)


# -- the report ----------------------------------------------------------------------------


def spread(values: Sequence[float], digits: int) -> str:
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


HEADER = (
    "| landscape | strategy | novelty | best after N: median (min-max) | runs reaching goal "
    "| evaluations | exact duplicates | rejected as too similar: median (min-max) "
    "| rejected with the same knobs |"
)


def row(landscape: Landscape, strategy: str, novelty: bool, outcomes: list[Outcome]) -> str:
    digits = 2 if landscape.primary == "speedup" else 3
    median = statistics.median
    reached = sum(o.best >= landscape.goal for o in outcomes)
    saved = same = "-"
    if novelty:
        total = sum(o.saved for o in outcomes)
        saved = spread([o.saved for o in outcomes], 0)
        same = f"{sum(o.saved_same for o in outcomes) / total:.0%}" if total else "-"
    return (
        f"| {landscape.name} | {strategy} | {'on' if novelty else 'off'} | "
        f"{spread([o.best for o in outcomes], digits)} | {reached}/{len(outcomes)} | "
        f"{median(o.evaluations for o in outcomes):.0f} | "
        f"{median(o.duplicates for o in outcomes):.0f} | {saved} | {same} |"
    )


def bench(landscapes: list[Landscape], seeds: int, proposals: int) -> list[str]:
    rows = []
    for landscape in landscapes:
        for strategy in STRATEGIES:
            for novelty in (False, True):
                started = time.perf_counter()
                outcomes = [
                    run_once(landscape, strategy, novelty, seed, proposals) for seed in range(seeds)
                ]
                rows.append(row(landscape, strategy, novelty, outcomes))
                say(f"  {rows[-1]}  [{time.perf_counter() - started:.1f} s]")
    return rows


# -- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20, help="runs per configuration")
    parser.add_argument("--proposals", type=int, default=200, help="proposals per run")
    parser.add_argument(
        "--measure-matmul", action="store_true", help=f"measure {MATMUL_TABLE.name} anew first"
    )
    parser.add_argument(
        "--backend", choices=("docker", "process"), default="process", help="for --measure-matmul"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    now = datetime.datetime.now().astimezone()
    say(f"bench/search.py, {now:%Y-%m-%d %H:%M %Z}; machine: {machine()}")
    if args.measure_matmul:
        measure_matmul(args.backend)
    table = MatmulTable(json.loads(MATMUL_TABLE.read_text()))
    landscapes = [synthetic("trap"), synthetic("needle"), matmul_landscape(table)]
    say(
        f"settings: {args.seeds} seeds x {args.proposals} proposals per configuration; "
        f"proposer shares {OPERATORS}; novelty thresholds {NOVELTY}"
    )
    say(
        f"matmul_c scores are looked up in a measured table, not evaluated: "
        f"{MATMUL_TABLE.relative_to(ROOT)}, measured {table.data['measured']} on "
        f"{table.data['machine']} ({len(table.data['points'])} settings, "
        f"params {table.data['params']})"
    )
    say()
    rows = bench(landscapes, args.seeds, args.proposals)
    say()
    say(
        f"{args.seeds} seeds x {args.proposals} proposals, {now:%Y-%m-%d}, {machine()}. "
        "Best = fitness on the synthetic landscapes; on matmul_c, the speedup over the seed "
        f"looked up in a table measured on {table.data['machine']} "
        f"({table.data['measured'][:10]}), not evaluated."
    )
    say()
    say(HEADER)
    say("|---" * (HEADER.count("|") - 1) + "|")
    for line in rows:
        say(line)
    minutes, seconds = divmod(time.perf_counter() - started, 60)
    say()
    say(f"wall time {int(minutes)} min {seconds:.0f} s")


if __name__ == "__main__":
    main()
