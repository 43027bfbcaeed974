"""A candidate's family as a tree: its ancestry back to the seed, or its descendants.

The run's outline is read in two queries (`Store.candidate_outlines`, `Store.first_models`)
and the tree is built from it in memory, so a run of ten thousand candidates costs the same
round trips however deep the tree goes.

Which way is better: a stored score is already "higher is better", whatever the objectives
say, because evolve/engine/scoring.py makes it the weighted sum of the objectives with every
minimized one negated (and the store keeps the lowest of a candidate's measurements). So a
child is better than its parent exactly when its score rose. The objectives, read from the
task YAML stored with the run, choose only the unit a change is told in: with one objective,
that metric (score / weight, negated when minimized), so a runtime that fell reads "-0.12
(-3.4%) better" instead of a rise in a negative number; with several, the score itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from evolve.store import RunRecord, Store
from evolve.store.records import CandidateOutline
from evolve.task.schema import Objective
from evolve.task.stored import task_info
from evolve.views.objective_terms import in_unit

SCORE = Objective(name="score", direction="maximize")  # several objectives: their sum


@dataclass(frozen=True)
class Member:
    """One candidate as the tree shows it: what made it, and nothing of its code."""

    id: int
    parent_ids: tuple[int, ...]
    status: str
    score: float | None
    operator: str
    model: str | None
    summary: str


@dataclass(frozen=True)
class Change:
    """A candidate against its first parent, in the run's unit (see the module docstring)."""

    before: float
    after: float
    better: bool | None  # None: the same score

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def percent(self) -> float | None:
        """Of the parent's size, so a fall and a rise read alike; None from a zero parent."""
        return None if self.before == 0 else 100 * self.delta / abs(self.before)


@dataclass
class Branch:
    member: Member
    change: Change | None
    repeat: bool = False  # already in the tree above: its own branches are not repeated
    hidden: int = 0  # next-level candidates the depth limit cut here
    branches: list[Branch] = field(default_factory=list)


@dataclass(frozen=True)
class LineageTree:
    run_name: str
    descendants: bool  # else the ancestry
    unit: Objective
    root: Branch
    depth: int | None
    cut: int  # candidates beyond the depth limit, none of them shown


def lineage_tree(
    store: Store, candidate_id: int, *, descendants: bool, depth: int | None
) -> LineageTree:
    """The ancestry of the candidate (parents as branches, a crossover's partner too), or
    its descendants (children as branches), `depth` levels deep (None: all). LookupError,
    saying so, when the store has no such candidate."""
    candidate = store.candidate(candidate_id)
    if candidate is None:
        raise LookupError(f"no candidate #{candidate_id} in {store.display_url}")
    run = store.get_run(candidate.run_name)
    if run is None:
        raise RuntimeError(f"#{candidate.id}: its run {candidate.run_name} cannot be read")
    models = store.first_models(run.name)
    family = {c.id: _member(c, models.get(c.id)) for c in store.candidate_outlines(run.name)}
    unit = run_unit(run)
    following = _children(family) if descendants else _parents(family)
    root, shown = _grow(candidate.id, family, following, unit, depth)
    cut = len(_reachable(candidate.id, following) - shown)
    return LineageTree(run.name, descendants, unit, root, depth, cut)


def run_unit(run: RunRecord) -> Objective:
    """The objective a change is told in; `SCORE` for a run with several."""
    objectives = task_info(run).objectives
    return objectives[0] if len(objectives) == 1 else SCORE


def _children(family: dict[int, Member]) -> Callable[[int], Sequence[int]]:
    """Each candidate's children, indexed once: a run's candidates name only their parents."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    for member in family.values():
        for parent in dict.fromkeys(member.parent_ids):
            children[parent].append(member.id)
    return lambda node: children.get(node, [])


def _parents(family: dict[int, Member]) -> Callable[[int], Sequence[int]]:
    return lambda node: [p for p in dict.fromkeys(family[node].parent_ids) if p in family]


def _member(candidate: CandidateOutline, call_model: str | None) -> Member:
    """`call_model`: the model of the candidate's first model call, for a mutation record
    that names none (an agent's, a crossover's)."""
    mutation = candidate.mutation
    operator = str(mutation.get("operator", "?")) if candidate.parent_ids else "seed"
    model = mutation.get("model") or call_model
    summary = str(mutation.get("summary") or "")
    return Member(
        candidate.id,
        candidate.parent_ids,
        candidate.status,
        candidate.score,
        operator,
        model,
        summary,
    )


def _change(member: Member, family: dict[int, Member], unit: Objective) -> Change | None:
    parent = family.get(member.parent_ids[0]) if member.parent_ids else None
    if parent is None or parent.score is None or member.score is None:
        return None
    better = None if member.score == parent.score else member.score > parent.score
    return Change(in_unit(parent.score, unit), in_unit(member.score, unit), better)


def _grow(
    start: int,
    family: dict[int, Member],
    following: Callable[[int], Sequence[int]],
    unit: Objective,
    depth: int | None,
) -> tuple[Branch, set[int]]:
    """The tree in the order it is printed, and the candidates it shows. Built with a stack,
    not recursion, since a long run's ancestry is deeper than Python's recursion limit; a
    candidate is expanded where it is first printed, so each "see above" really is above."""
    shown: set[int] = set()
    top: list[Branch] = []
    stack: list[tuple[int, int, list[Branch]]] = [(start, 0, top)]
    while stack:
        node, level, siblings = stack.pop()
        member = family[node]
        branch = Branch(member, _change(member, family, unit), repeat=node in shown)
        siblings.append(branch)
        if branch.repeat:
            continue
        shown.add(node)
        after = following(node)
        if depth is not None and level == depth:
            branch.hidden = len(after)
            continue
        stack.extend((next_node, level + 1, branch.branches) for next_node in reversed(after))
    return top[0], shown


def _reachable(start: int, following: Callable[[int], Sequence[int]]) -> set[int]:
    seen = {start}
    todo = [start]
    while todo:
        for node in following(todo.pop()):
            if node not in seen:
                seen.add(node)
                todo.append(node)
    return seen
