"""`evolve lineage` on screen: a family tree with one line per candidate.

Drawn here rather than with rich's Tree, which indents every level and drops whatever no
longer fits the width: a long run's ancestry is hundreds of generations deep, and at 200
columns rich's Tree showed 75 lines of a 1,435-candidate ancestry. Here a candidate with a
single parent (or, going down, a single child) is drawn straight below it, at the same
indent; only a crossover's parents, or a candidate's several children, fan out. So the
indent grows with forks, not with generations, and no candidate is dropped.
"""

from __future__ import annotations

from rich.text import Text

from evolve.task.schema import Objective
from evolve.views.lineage_tree import SCORE, Branch, Change, LineageTree, Member
from evolve.views.objective_terms import in_unit

FORK, LAST_FORK, PAST_FORK, PAST_LAST = "├── ", "└── ", "│   ", "    "


def lineage_view(tree: LineageTree) -> Text:
    lines = [Text(_title(tree), style="bold")]
    stack: list[tuple[Branch | Text, str, str]] = [(tree.root, "", "")]
    while stack:  # not recursion: a tree can be deeper than Python's recursion limit
        item, lead, under = stack.pop()
        if isinstance(item, Text):
            lines.append(Text(lead, style="dim") + item)
            continue
        lines.append(Text(lead, style="dim") + _label(item, tree.unit))
        below: list[Branch | Text] = [*item.branches]
        if item.hidden:
            below.append(Text(f"... {item.hidden} {_next(tree, item.hidden)}", style="dim"))
        if len(below) == 1:
            stack.append((below[0], under, under))
            continue
        for place, inner in reversed(list(enumerate(below))):
            last = place == len(below) - 1
            fork, past = (LAST_FORK, PAST_LAST) if last else (FORK, PAST_FORK)
            stack.append((inner, under + fork, under + past))
    if tree.cut:
        kin = "descendants" if tree.descendants else "ancestors"
        lines.append(
            Text(
                f"{tree.cut} more {kin} beyond depth {tree.depth}, not shown: "
                "a larger --depth shows them",
                style="yellow",
            )
        )
    return Text("\n").join(lines)


def _title(tree: LineageTree) -> str:
    kin = "descendants" if tree.descendants else "ancestry"
    return (
        f"{kin} of #{tree.root.member.id} in run {tree.run_name}; "
        f"changes against each first parent, in {_unit_words(tree.unit)}"
    )


def _unit_words(unit: Objective) -> str:
    """What a reader needs to read the signs right, the minimized case above all."""
    if unit == SCORE:
        return "score (the objectives' weighted sum, higher is better)"
    lower = "lower" if unit.direction == "minimize" else "higher"
    return f"{unit.name} ({unit.direction}d: {lower} is better)"


def _next(tree: LineageTree, count: int) -> str:
    if tree.descendants:
        return "child not shown" if count == 1 else "children not shown"
    return "parent not shown" if count == 1 else "parents not shown"


def _label(branch: Branch, unit: Objective) -> Text:
    member = branch.member
    label = Text(f"#{member.id}", style="bold")
    if branch.repeat:
        return label.append(" (see above)", style="dim")
    label.append("  ")
    label.append(*_standing(member, unit))
    label.append(f"  {member.operator}", style="cyan")
    if len(member.parent_ids) > 1:
        label.append(" of " + " + ".join(f"#{parent}" for parent in member.parent_ids))
    if member.model:
        label.append(f"  {member.model}", style="magenta")
    if branch.change is not None:
        label.append("  ")
        label.append(*_change(branch.change))
    if member.summary:
        label.append(f"  {member.summary}", style="dim")
    return label


def _standing(member: Member, unit: Objective) -> tuple[str, str]:
    """Its status, and its score in the run's unit once it has one."""
    if member.score is None:
        return member.status, "yellow" if member.status == "pending" else "red"
    return f"{member.status} {unit.name} {in_unit(member.score, unit):.4g}", "green"


def _change(change: Change) -> tuple[str, str]:
    percent = f" ({change.percent:+.1f}%)" if change.percent is not None else ""
    if change.better is None:
        return "same", "dim"
    verdict, style = ("better", "green") if change.better else ("worse", "red")
    return f"{change.delta:+.4g}{percent} {verdict}", style
