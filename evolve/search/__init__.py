"""Parent selection state, derived from the store and updated one result at a time, by the
search strategy the task names (a plugin: evolve/plugin/registry.py)."""

from __future__ import annotations

from collections.abc import Sequence

from evolve.plugin import registry
from evolve.search.islands import Islands
from evolve.search.map_elites import MapElitesStrategy
from evolve.search.pareto import ParetoStrategy, pareto_front
from evolve.search.strategy import IslandStrategy, Pick, Scored, SearchStrategy
from evolve.task.schema import Objective, SearchSpec

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
    """The strategy registered under `search.strategy` (evolve/plugin/registry.py); the task loader
    has already refused a name nothing is registered under, and a combination a built-in
    cannot run (pareto with one objective, map_elites without features)."""
    cls = registry.load_class("strategy", spec.strategy, SearchStrategy)
    return cls.from_task(spec, objectives, seed_id)  # type: ignore[attr-defined,no-any-return]
