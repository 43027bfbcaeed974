"""A run's results in its objectives' own words: the metric, its unit, which way is better,
and how far a program moved from the seed.

The stored score is the weighted sum of the objectives with every minimized one negated
(evolve/engine/scoring.py), so that one number ranks candidates in one direction. That sign is the
engine's business: a run time of 0.053 s, stored as -0.053, reaches a person as
`run_wall_s 0.053 s`. With one objective a score turns back into its metric exactly (score /
weight, negated when minimized); with several it is a weighted sum with no unit, shown as
`score`, with what it sums spelled out where a view names what ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evolve.plugin.metric_glossary import meaning
from evolve.task.schema import Objective

DIGITS = 4  # significant digits of a figure shown to a person
# Units in which less of the metric is a faster program: its ratio reads "Nx faster".
TIME_UNITS = frozenset({"s", "ms", "us", "ns", "cycles"})
LEVEL = 0.005  # a ratio this close to 1 reads "level with the seed"


def in_unit(score: float, objective: Objective) -> float:
    """A stored score as `objective`'s own value: the inverse of evolve/engine/scoring.py's sum
    for a run with that one objective."""
    value = score / objective.weight
    return value if objective.direction == "maximize" else -value


@dataclass(frozen=True)
class Terms:
    """How one run's figures are told: its objectives (none known: plain scores) and its
    evaluator, whose metric names the glossary knows the units of."""

    objectives: tuple[Objective, ...] = ()
    evaluator: str = ""

    @property
    def single(self) -> Objective | None:
        """The objective a score stands for; None where the score is a sum of several."""
        return self.objectives[0] if len(self.objectives) == 1 else None

    def unit(self, name: str) -> str:
        known = meaning(name, self.evaluator)
        return known.unit if known is not None else ""

    def value(self, name: str, number: float) -> str:
        """Metric `name`'s `number` with its unit: `0.05282 s`, `2.82x`, `5120 B`."""
        known = meaning(name, self.evaluator)
        return known.value(number, DIGITS) if known is not None else f"{number:.{DIGITS}g}"

    def amount(self, score: float) -> str:
        """A stored score as its objective's value with the unit (`0.05282 s`), or, for a
        sum of several objectives, the score itself."""
        one = self.single
        return self.value(one.name, in_unit(score, one)) if one else f"{score:.{DIGITS}g}"

    def figure(self, score: float | None) -> str:
        """A stored score named: `run_wall_s 0.05282 s`, or `score 1.9` for several."""
        if score is None:
            return "no score"
        one = self.single
        return f"{one.name if one else 'score'} {self.amount(score)}"

    @property
    def name(self) -> str:
        """What a column of figures is headed: the metric and its unit, or `score`."""
        one = self.single
        return self.column(one.name) if one else "score"

    def column(self, name: str) -> str:
        """A column of metric `name` headed with its unit, `run_wall_s (s)`; a ratio's `x`
        goes on each cell instead."""
        unit = self.unit(name)
        return f"{name} ({unit})" if unit and unit != "x" else name

    def cell(self, name: str, number: float | None) -> str:
        """A cell of metric `name`'s column: the number, with `x` for a ratio."""
        if number is None:
            return "-"
        return f"{number:.{DIGITS}g}" + ("x" if self.unit(name) == "x" else "")

    def score_cell(self, score: float | None) -> str:
        """A cell of the column `name` heads: a stored score as its objective's value."""
        one = self.single
        if one is None or score is None:
            return "-" if score is None else f"{score:.{DIGITS}g}"
        return self.cell(one.name, in_unit(score, one))

    @property
    def better(self) -> str:
        one = self.single
        return "lower is better" if one and one.direction == "minimize" else "higher is better"

    def ranking(self) -> str:
        """What ranks the candidates, in words: `run_wall_s (s), lower is better`; for
        several objectives, the sum they make."""
        if self.single is not None or not self.objectives:
            return f"{self.name}, {self.better}"
        summed = " and ".join(f"{_weighted(o)}{o.name} ({o.direction}d)" for o in self.objectives)
        return f"score, the weighted sum of {summed}, higher is better"

    def against_seed(self, score: float, seed: float) -> str:
        """How a stored score compares with the seed's, in the objective's words: `37x
        faster`, `2.1x higher`, `lower by 3`, `level with the seed`; for several
        objectives, which score is higher."""
        if self.single is None and score != seed:
            return f"{'higher' if score > seed else 'lower'} than the seed's {seed:.{DIGITS}g}"
        return self.compare(score, seed, level="level with the seed")

    def compare(self, score: float, base: float, *, level: str = "level") -> str:
        """How stored score `score` stands against `base`: the ratio of their objective's
        values in its words where both are positive (`37x faster`, `1.2x larger`), else
        the difference (`higher by 0.3`; always so for a sum of several objectives, whose
        ratio means nothing); `level` where they are within `LEVEL`."""
        one = self.single
        if one is None:
            if score == base:
                return level
            return f"{'higher' if score > base else 'lower'} by {abs(score - base):.{DIGITS}g}"
        up, down = _words(one, self.unit(one.name))
        value, old = in_unit(score, one), in_unit(base, one)
        if value > 0 and old > 0:
            ratio = value / old if one.direction == "maximize" else old / value
            if abs(ratio - 1) < LEVEL:
                return level
            return f"{ratio:.3g}x {up}" if ratio > 1 else f"{1 / ratio:.3g}x {down}"
        if value == old:
            return level
        return f"{up if score > base else down} by {self.value(one.name, abs(value - old))}"

    @property
    def improvement(self) -> str:
        """What an improvement of the stored score is, in the objective's words: `run_wall_s
        cut`, `speedup gained`, `score gained`."""
        one = self.single
        if one is None:
            return "score gained"
        return f"{one.name} {'cut' if one.direction == 'minimize' else 'gained'}"

    def gained(self, delta: float) -> str:
        """A rise of the stored score as the amount its objective improved by, with the unit:
        `0.3 s` (of time cut); the score's own rise for several objectives."""
        one = self.single
        return self.value(one.name, delta / one.weight) if one else f"{delta:.{DIGITS}g}"

    def headline(self, score: float, seed: float | None) -> str:
        """A program's figure beside the seed's: `run_wall_s 0.053 s, seed 1.95 s: 37x
        faster`; the figure alone where the seed has none."""
        if seed is None:
            return self.figure(score)
        return f"{self.figure(score)}, seed {self.amount(seed)}: {self.against_seed(score, seed)}"

    def metrics(self, metrics: Mapping[str, float]) -> str:
        """Every metric with its unit, `name value` each, comma-separated."""
        return ", ".join(f"{name} {self.value(name, value)}" for name, value in metrics.items())


def _weighted(objective: Objective) -> str:
    return "" if objective.weight == 1 else f"{objective.weight:g} x "


def _words(objective: Objective, unit: str) -> tuple[str, str]:
    """The words for a better and a worse figure: a time (or a ratio of times, `x`) is
    faster or slower, a size smaller or larger, anything else higher or lower."""
    maximize = objective.direction == "maximize"
    if (unit in TIME_UNITS and not maximize) or (unit == "x" and maximize):
        return "faster", "slower"
    if unit == "B":
        return ("larger", "smaller") if maximize else ("smaller", "larger")
    return ("higher", "lower") if maximize else ("lower", "higher")
