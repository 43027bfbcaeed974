"""The lineage tree as inline SVG, with a hidden panel for every edge that the page's script
shows beside the tree when an edge or a node is hovered or clicked.

The chain of first parents runs down one column, the seed (or the oldest ancestor shown)
on top and the best at the bottom; a crossover partner off the chain sits to its right,
one on the chain is joined by an arc on the left. The SVG is drawn here rather than by
matplotlib because every edge must be an element the script can find by its key.
"""

from __future__ import annotations

from evolve.report.facts import RunFacts
from evolve.report.lineage import DIFF_LINES, PAGE_DIFF_LINES, Edge, Tree, edge_diff
from evolve.report.markup import Safe, join, note, tag

ROW = 54  # px between generations
TOP = 34
CHAIN_X = 100  # room on the left for the arcs to partners on the chain
PARTNER_X = 370
LABEL_PX = 250  # a label's width at LABEL_CHARS
RADIUS = 8
LABEL_CHARS = 32
ROOT = "root"  # the key of the first node's panel: it has no edge above it


def view(facts: RunFacts) -> Safe:
    tree = facts.tree
    if tree is None:
        return note("No candidate has a score yet, so there is no best to trace.")
    return join(
        [
            tag(
                "div",
                join([tag("div", _svg(tree, facts), class_="tree-scroll"), _panel_host()]),
                class_="lineage",
            ),
            join(_panels(tree, facts)),
        ]
    )


def _panel_host() -> Safe:
    hint = tag("p", "Hover over or click an edge or a node to see its change.", class_="note")
    return tag("aside", hint, id="edge-panel", class_="panel", aria_live="polite")


def _y(index: int) -> float:
    return TOP + index * ROW


def _svg(tree: Tree, facts: RunFacts) -> Safe:
    place = {candidate: index for index, candidate in enumerate(tree.chain)}
    side: dict[str, float] = {}  # an off-chain partner's edge key -> its node's y
    parts: list[Safe] = []
    if tree.hidden:
        words = f"… {tree.hidden} older ancestors, back to the seed, not shown"
        parts.append(tag("text", words, x=CHAIN_X - RADIUS, y=12, class_="muted"))
    for edge in tree.edges:
        child_y = _y(place[edge.child])
        if edge.parent in place:
            parent_y = _y(place[edge.parent])
            if edge.primary:
                shape = f"M{CHAIN_X},{parent_y + RADIUS} L{CHAIN_X},{child_y - RADIUS}"
            else:
                bend = CHAIN_X - 24 - min(CHAIN_X - 34, (child_y - parent_y) / 6)
                shape = (
                    f"M{CHAIN_X - RADIUS},{parent_y} C{bend},{parent_y} "
                    f"{bend},{child_y} {CHAIN_X - RADIUS},{child_y}"
                )
        else:
            side[edge.key] = child_y - ROW / 2
            shape = f"M{PARTNER_X - RADIUS},{child_y - ROW / 2} L{CHAIN_X + RADIUS},{child_y}"
        kind = "edge" if edge.primary else "edge partner"
        lines = join([tag("path", d=shape, class_="line"), tag("path", d=shape, class_="hit")])
        parts.append(tag("g", lines, class_=kind, data_edge=edge.key, tabindex=0))
    primary = {edge.child: edge.key for edge in tree.edges if edge.primary}
    best, seed = tree.chain[-1], facts.seed.id if facts.seed is not None else None
    for index, candidate in enumerate(tree.chain):
        role = "best" if candidate == best else "seed" if candidate == seed else ""
        key = primary.get(candidate, ROOT)
        parts.append(_node(facts, candidate, CHAIN_X, _y(index), key, role))
    for edge in tree.edges:
        if edge.key in side:
            parts.append(_node(facts, edge.parent, PARTNER_X, side[edge.key], edge.key, "side"))
    height = _y(len(tree.chain) - 1) + ROW / 2
    width = (PARTNER_X if side else CHAIN_X) + LABEL_PX
    return tag(
        "svg",
        join(parts),
        xmlns="http://www.w3.org/2000/svg",
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        class_="tree",
        role="img",
        aria_label="lineage of the best candidate",
    )


def _node(facts: RunFacts, candidate: int, x: float, y: float, key: str, role: str) -> Safe:
    outline = facts.candidates.get(candidate)
    score = outline.score if outline is not None else None
    figure = "-" if score is None else facts.terms.amount(score)
    label = f"#{candidate}  {figure}  {_made_by(facts, candidate)}"
    if len(label) > LABEL_CHARS:
        label = label[: LABEL_CHARS - 1] + "…"
    classes = " ".join(filter(None, ["node", role, "unscored" if score is None else ""]))
    body = join(
        [
            tag("circle", cx=x, cy=y, r=RADIUS),
            tag("text", label, x=x + RADIUS + 6, y=y + 4),
        ]
    )
    return tag("g", body, class_=classes, data_edge=key, tabindex=0)


def _made_by(facts: RunFacts, candidate: int) -> str:
    outline = facts.candidates.get(candidate)
    if outline is None or not outline.parent_ids:
        return "seed"
    mutation = outline.mutation
    operator = str(mutation.get("operator") or mutation.get("mutator") or "?")
    model = mutation.get("model")
    return f"{operator} ({model})" if model else operator


def _panels(tree: Tree, facts: RunFacts) -> list[Safe]:
    """The root's panel and every edge's, the newest edges' diffs first in the page's
    budget of lines, since the changes nearest the best are the ones to read."""
    panels = [_root_panel(tree, facts)]
    room = PAGE_DIFF_LINES
    for edge in reversed(tree.edges):
        if room > 0:
            diffs, cut = edge_diff(edge, facts.lineage, min(DIFF_LINES, room))
            room -= sum(len(lines) for lines in diffs)
            panels.append(_edge_panel(edge, facts, diffs, cut))
        else:  # the page's lines are spent: no diff is made at all, however big
            panels.append(_edge_panel(edge, facts, [], None))
    return panels


def _root_panel(tree: Tree, facts: RunFacts) -> Safe:
    first = tree.chain[0]
    outline = facts.candidates[first]
    what = "the seed, the task's own program" if not outline.parent_ids else "the oldest shown"
    facts_list = _facts_list(
        [
            (facts.terms.name, facts.terms.score_cell(outline.score)),
            ("status", outline.status),
            ("island", outline.island),
            ("generation", outline.generation),
        ]
    )
    body = join([tag("h3", f"#{first}: {what}"), facts_list])
    return tag("div", body, id=f"panel-{ROOT}", class_="panel-src", hidden="hidden")


def _edge_panel(edge: Edge, facts: RunFacts, diffs: list[list[str]], cut: int | None) -> Safe:
    """`cut`: the diff's lines left out; None where no diff was made."""
    child, parent = facts.candidates[edge.child], facts.candidates.get(edge.parent)
    mutation = child.mutation
    how = "made from" if edge.primary else "crossover partner of"
    terms = facts.terms
    gain = (
        f" ({terms.compare(child.score, parent.score, level='same')})"
        if parent is not None and parent.score is not None and child.score is not None
        else ""
    )
    rows = [
        ("operator", _made_by(facts, edge.child)),
        ("change", mutation.get("summary") or "-"),
        (
            terms.name,
            f"{terms.score_cell(parent.score if parent else None)} → "
            f"{terms.score_cell(child.score)}{gain}",
        ),
        ("status", child.status),
        ("island, generation", f"{child.island}, {child.generation}"),
    ]
    if mutation.get("changes"):
        rows.insert(2, ("knobs", _knobs(mutation["changes"])))
    body = join(
        [
            tag("h3", f"#{edge.child}, {how} #{edge.parent}"),
            _facts_list(rows),
            _diff(diffs) if diffs else "",
            note("The two programs are the same.") if not diffs and cut == 0 else "",
            note(f"{cut} more lines of diff not shown: evolve diff {edge.parent} {edge.child}")
            if cut
            else "",
            note(f"Diff not shown, the page holds enough: evolve diff {edge.parent} {edge.child}")
            if cut is None
            else "",
        ]
    )
    return tag("div", body, id=f"panel-{edge.key}", class_="panel-src", hidden="hidden")


def _knobs(changes: object) -> str:
    if not isinstance(changes, dict):
        return str(changes)
    return ", ".join(
        f"{where} {pair[0]} → {pair[1]}"
        if isinstance(pair, list) and len(pair) == 2
        else str(where)
        for where, pair in changes.items()
    )


def _facts_list(rows: list[tuple[str, object]]) -> Safe:
    return tag("dl", join(join([tag("dt", name), tag("dd", value)]) for name, value in rows))


def _diff(diffs: list[list[str]]) -> Safe:
    """Headers are known by their place, the first two lines of each file's diff, never by
    their first characters, which a removed line starting with "--" shares."""
    lines: list[Safe] = []
    for file_lines in diffs:
        for index, line in enumerate(file_lines):
            text = line.removesuffix("\n")
            kind = "head" if index < 2 else {"@": "hunk", "+": "add", "-": "del"}.get(line[:1])
            lines.append(tag("span", text + "\n", class_=kind))
    return tag("pre", join(lines), class_="diff")
