"""The best candidate's lineage: its first parents back to the seed, and the other parents
(crossover partners) of each, with the change along every edge.

The shape is traced in memory from the run's outlines, and only the programs it shows are
read. A run of thousands of generations shows its newest `limit` ancestors and says how
many older ones it left out, so that the page stays a few megabytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evolve.store import CandidateRecord
from evolve.store.records import CandidateOutline
from evolve.views.program_diff import file_diffs

DIFF_LINES = 400  # of one edge's diff; the rest is counted, not shown
PAGE_DIFF_LINES = 12_000  # of all the edges' diffs, the newest edges' first: about 1 MB


@dataclass(frozen=True)
class Edge:
    key: str  # names the edge in the page: "e" and a number, never data from the store
    parent: int
    child: int
    primary: bool  # the child's first parent, whose program it was made from


@dataclass(frozen=True)
class Tree:
    chain: tuple[int, ...]  # the oldest shown first, the best last
    edges: tuple[Edge, ...]
    hidden: int  # older ancestors left out of the chain

    @property
    def ids(self) -> list[int]:
        """Every candidate the tree shows."""
        return sorted({*self.chain, *(edge.parent for edge in self.edges)})


def trace(candidates: Mapping[int, CandidateOutline], best: int, limit: int) -> Tree:
    chain: list[int] = []
    seen: set[int] = set()  # a corrupt store's cycle must not loop for ever
    node = candidates.get(best)
    while node is not None and node.id not in seen:
        chain.append(node.id)
        seen.add(node.id)
        node = candidates.get(node.parent_ids[0]) if node.parent_ids else None
    chain.reverse()
    hidden = max(0, len(chain) - limit)
    chain = chain[hidden:]
    edges: list[Edge] = []
    for index, child in enumerate(chain):
        for place, parent in enumerate(candidates[child].parent_ids):
            shown = parent in candidates and (place > 0 or index > 0)
            if shown:
                edges.append(Edge(f"e{len(edges)}", parent, child, primary=place == 0))
    return Tree(tuple(chain), tuple(edges), hidden)


def edge_diff(
    edge: Edge, records: Mapping[int, CandidateRecord], room: int
) -> tuple[list[list[str]], int]:
    """The child against this parent, file by file (evolve/views/program_diff.py), cut to `room`
    lines in all; and how many lines were cut."""
    parent, child = records.get(edge.parent), records.get(edge.child)
    if parent is None or child is None:
        return [], 0
    kept: list[list[str]] = []
    cut = 0
    for lines in file_diffs(parent, child):
        cut += max(0, len(lines) - room)
        if room > 0:
            kept.append(lines[:room])
        room = max(0, room - len(lines))
    return kept, cut
