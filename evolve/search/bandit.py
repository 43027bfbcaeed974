"""Which model, with which operator, makes the next proposal: a cost-aware UCB1 bandit.

An arm is an (operator, model) pair. Its reward is whether the child beat its parent, and
by how much: 0 for a child that failed, was a duplicate or was no better; 0.5 to 1 for one
that improved, growing with the relative gain. Rewards are scale-free, so they compare
across tasks whose scores are GFLOP/s, seconds or size ratios.

The configured weights are priors, not multipliers: each arm starts with PRIOR_PULLS
imagined pulls whose mean reward is PRIOR_REWARD times its weight over the heaviest arm's.
With no data the heavier arm is chosen first; each real pull then counts as much as an
imagined one, so after a few dozen the observed rewards decide, and an arm weighted low
that does best ends up with most of the work. The imagined pulls also stand in for the
usual "try every arm once": an arm never tried gains on the others as their exploration
bonus shrinks.

Cost-aware: an arm's UCB index is divided by its cost per pull relative to the average,
so a model that is half as good and a tenth of the price still gets most of the work.
Arms that cost nothing (a local server) are not divided by zero: costs are floored at a
tenth of the average. The arms' real counts live in the store (the priors are recomputed
from the task's weights), so `--resume` keeps what was learnt.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SEPARATOR = " @ "
COST_FLOOR = 0.1  # of the mean cost per pull
PRIOR_PULLS = 2  # imagined pulls per arm, so a few dozen real ones outweigh its weight
PRIOR_REWARD = 0.5  # the heaviest arm's imagined mean: as if each child beat its parent


def arm_name(operator: str, model: str) -> str:
    return f"{operator}{SEPARATOR}{model}"


def split_arm(arm: str) -> tuple[str, str]:
    operator, _, model = arm.partition(SEPARATOR)
    return operator, model


def improvement_reward(child: float | None, parent: float | None) -> float:
    """Scores are oriented so that higher is better; None means the child failed."""
    if child is None or parent is None or child <= parent:
        return 0.0
    gain = (child - parent) / abs(parent) if parent else 1.0
    return 0.5 + 0.5 * min(1.0, gain)


@dataclass
class ArmStats:
    pulls: int = 0
    reward: float = 0.0
    cost_usd: float = 0.0


class CostAwareBandit:
    def __init__(
        self,
        weights: Mapping[str, float],
        stats: Mapping[str, ArmStats] | None = None,
        exploration: float = math.sqrt(2),
    ) -> None:
        self.weights = dict(weights)
        heaviest = max(self.weights.values(), default=1.0)
        self.prior = {arm: PRIOR_REWARD * w / heaviest for arm, w in self.weights.items()}
        self.stats = {arm: ArmStats() for arm in self.weights}
        for arm, known in (stats or {}).items():
            if arm in self.stats:
                self.stats[arm] = ArmStats(known.pulls, known.reward, known.cost_usd)
        self.exploration = exploration

    def choose(self, rng: random.Random, allowed: Sequence[str] | None = None) -> str:
        """The arm with the best index, ties drawn at random; `allowed` narrows the field,
        e.g. to leave out `fix` while nothing is broken."""
        arms = [a for a in (allowed if allowed is not None else self.weights) if a in self.stats]
        if not arms:
            raise ValueError("no arm to choose from")
        return max(arms, key=lambda arm: (self.index(arm), rng.random()))

    def index(self, arm: str) -> float:
        stats = self.stats[arm]
        pulls = stats.pulls + PRIOR_PULLS
        total = sum(s.pulls for s in self.stats.values()) + PRIOR_PULLS * len(self.stats)
        mean = (stats.reward + PRIOR_PULLS * self.prior[arm]) / pulls
        bonus = self.exploration * math.sqrt(math.log(total) / pulls)
        return (mean + bonus) / self._relative_cost(stats)

    def _relative_cost(self, stats: ArmStats) -> float:
        """1 for an arm never pulled: nothing is known of its price yet."""
        pulls = sum(s.pulls for s in self.stats.values())
        mean = sum(s.cost_usd for s in self.stats.values()) / pulls if pulls else 0.0
        if mean <= 0 or stats.pulls == 0:
            return 1.0
        return max(stats.cost_usd / stats.pulls, COST_FLOOR * mean) / mean

    def pulled(self, arm: str) -> None:
        """Counted when the arm is chosen, not when its proposal returns: proposals chosen
        together must see each other, or a burst would all go to one arm."""
        self.stats[arm].pulls += 1

    def charged(self, arm: str, cost_usd: float) -> None:
        self.stats[arm].cost_usd += cost_usd

    def rewarded(self, arm: str, reward: float) -> None:
        self.stats[arm].reward += reward
