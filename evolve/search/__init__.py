"""Parent selection state, derived from the store and updated one result at a time."""

from evolve.search.islands import Islands

__all__ = ["Islands"]
