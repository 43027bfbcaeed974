"""Parent selection state, derived from the store and updated one result at a time."""

from __future__ import annotations

from collections.abc import Sequence

from evolve.search.islands import Islands
from evolve.search.map_elites import MapElitesStrategy
from evolve.search.pareto import ParetoStrategy, pareto_front
from evolve.search.strategy import IslandStrategy, Pick, Scored, SearchStrategy
from evolve.task import Objective, SearchSpec

__all__ = [
    "IslandStrategy",
    "Islands",
    "MapElitesStrategy",
    "ParetoStrategy",
    "Pick",
    "Scored",
    "SearchStrategy",
    "make_strategy",
    "pareto_front",
]


def make_strategy(
    spec: SearchSpec, objectives: Sequence[Objective], seed_id: int
) -> SearchStrategy:
    """The strategy `search.strategy` names; the task loader has already refused a
    combination this cannot build (pareto with one objective, map_elites without features)."""
    if spec.strategy == "map_elites":
        return MapElitesStrategy(spec, seed_id)
    if spec.strategy == "pareto":
        return ParetoStrategy(spec, objectives)
    return IslandStrategy(spec, seed_id)
