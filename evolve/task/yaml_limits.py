"""Parsing a task's YAML within limits, so that no file can make the loader hang or crash.

YAML aliases let a few hundred bytes stand for billions of nodes, or for a node inside
itself; deep nesting makes a recursive walk overflow Python's stack. Every later step (the
duplicate-key check, the schema) walks the tree, so the limits are enforced while it is
composed, before anything is expanded: an alias counts as every node it stands for, an
alias to a node that contains it is refused, and nesting is capped, aliases included.
Aliases within the limits keep working, since task authors use them to share settings.

YAML 1.1 also reads `1:2:3` as a base-60 number, and PyYAML converts one in time quadratic
in its length: a 1 MiB value takes most of a minute. A task never needs base 60, so here
such a scalar is a string, and one tagged `!!int` or `!!float` explicitly is refused.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, Event
from yaml.nodes import Node, ScalarNode

MAX_DEPTH = 64  # a task needs about 5
MAX_NODES = 10_000  # a task has about 100; counted after aliases are expanded
SHOWN_LEVELS = 8  # of a field in an error, beyond which the keys add no information

Loc = tuple[str | int, ...]

INT, FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"


class YAMLLimitError(Exception):
    """The YAML breaks a limit; `line` is 1-based and `loc` is where in the task it is."""

    def __init__(self, line: int, loc: Loc, message: str) -> None:
        super().__init__(line, loc, message)
        self.line, self.loc, self.message = line, loc, message


def load(text: str) -> tuple[Node | None, Any]:
    """The node tree (whose marks give lines) and the data built from it, from one parse.

    yaml.YAMLError for bad YAML, YAMLLimitError for YAML over a limit.
    """
    loader = _BoundedLoader(text)
    try:
        tree = loader.get_single_node()
        return tree, loader.construct_document(tree) if tree is not None else None
    finally:
        loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts, while composing, how many nodes and levels the tree will have
    once every alias is expanded."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.loc: list[str | int] = []
        self.depth = 0  # the level of the node being composed; the root is 1
        self.deepest = 0  # the deepest level reached since the innermost open anchor began
        self.nodes = 0  # nodes composed so far, each alias counted as the nodes it stands for
        self.anchored: dict[str, tuple[int, int]] = {}  # anchor -> (its nodes, levels below)
        self.open: set[str] = set()  # anchors whose node is still being composed

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        part = _part(index)
        if part is not None:
            self.loc.append(part)
        self.depth += 1
        try:
            event = self.peek_event()
            if self.depth > MAX_DEPTH:
                raise self._refuse(event, f"nested more than {MAX_DEPTH} levels deep")
            if isinstance(event, AliasEvent):
                self._expand(event)
                return super().compose_node(parent, index)
            self._add(event, 1, self.depth)
            anchor = event.anchor
            if anchor is None:
                return super().compose_node(parent, index)
            return self._compose_anchored(anchor, parent, index)
        finally:
            self.depth -= 1
            if part is not None:
                self.loc.pop()

    def _compose_anchored(self, anchor: str, parent: Node | None, index: Any) -> Node:
        """Compose the node, noting how many nodes and levels an alias to it stands for."""
        before, outer_deepest = self.nodes - 1, self.deepest
        self.deepest = self.depth
        self.open.add(anchor)
        node = super().compose_node(parent, index)
        self.open.discard(anchor)
        self.anchored[anchor] = (self.nodes - before, self.deepest - self.depth)
        self.deepest = max(outer_deepest, self.deepest)
        return node

    def _expand(self, event: AliasEvent) -> None:
        anchor = event.anchor
        if anchor in self.open:
            raise self._refuse(event, f"alias *{anchor} is inside the node it names")
        if anchor not in self.anchored:
            return  # the composer reports the undefined alias
        nodes, below = self.anchored[anchor]
        if self.depth + below > MAX_DEPTH:
            message = f"alias *{anchor} nests the file more than {MAX_DEPTH} levels deep"
            raise self._refuse(event, message)
        self._add(event, nodes, self.depth + below)

    def _add(self, event: Event, nodes: int, reach: int) -> None:
        self.nodes += nodes
        self.deepest = max(self.deepest, reach)
        if self.nodes > MAX_NODES:
            message = f"the file is more than {MAX_NODES} YAML nodes"
            if isinstance(event, AliasEvent):
                message += f" once alias *{event.anchor} is expanded"
            raise self._refuse(event, message)

    def _refuse(self, event: Event, message: str) -> YAMLLimitError:
        """The error at the event's line, under the first few keys that lead there."""
        return YAMLLimitError(event.start_mark.line + 1, tuple(self.loc[:SHOWN_LEVELS]), message)

    def construct_yaml_int(self, node: ScalarNode) -> int:
        _refuse_base_60(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        _refuse_base_60(node)
        return super().construct_yaml_float(node)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        """A value Python cannot hold (a 5000-digit int, month 13) is a YAML error at its
        line rather than a traceback."""
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(None, None, f"bad value: {exc}", node.start_mark) from None


def _refuse_base_60(node: ScalarNode) -> None:
    """ValueError (a YAML error at the node's line, see construct_object) for a number
    written in base 60, which only an explicit tag still sends here."""
    if ":" in str(node.value):
        kind = node.tag.rsplit(":", 1)[-1]
        raise ValueError(f"!!{kind} in base 60 (with ':') is not supported; write it in base 10")


def _without_base_60(
    resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]],
) -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """A copy of `resolvers` in which an int or a float never holds a ':', so that a
    sexagesimal-looking scalar stays a string. Every list is new, so SafeLoader and every
    other loader class keep their own resolvers untouched."""
    no_colon = "(?![^:]*:)"  # a linear scan, before the pattern tries anything
    return {
        first: [
            (tag, re.compile(no_colon + regexp.pattern, regexp.flags))
            if tag in (INT, FLOAT)
            else (tag, regexp)
            for tag, regexp in entries
        ]
        for first, entries in resolvers.items()
    }


_BoundedLoader.yaml_implicit_resolvers = _without_base_60(yaml.SafeLoader.yaml_implicit_resolvers)
# add_constructor gives the class its own copy of the table, as with the resolvers above.
_BoundedLoader.add_constructor(INT, _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor(FLOAT, _BoundedLoader.construct_yaml_float)


def _part(index: Any) -> str | int | None:
    """The step into the task that the composer's `index` stands for: a mapping value's key,
    a list item's index; None for a mapping's key, which is no step at all."""
    if isinstance(index, int):
        return index
    if isinstance(index, ScalarNode):
        return str(index.value)
    return None if index is None else "?"
