"""Plugins by name, through entry points: one mechanism for the four kinds a task names.

An installed distribution registers a plugin under a group of its pyproject.toml
(`[project.entry-points."evolve.strategies"]`, say); evolve's own built-ins are registered
there in the same way, so a plugin of a user's is found exactly as they are. What each kind
must provide is in docs/plugins.md: an evaluator and a mutator are classes (of
evolve.plugin.evaluator.Evaluator and evolve.mutators.Mutator), a strategy a class of
evolve.search.SearchStrategy, a sandbox backend a module with the functions of
evolve.plugin.sandbox.Backend.
"""

from __future__ import annotations

import functools
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

Kind = Literal["evaluator", "mutator", "strategy", "sandbox backend"]
GROUPS: dict[Kind, str] = {
    "evaluator": "evolve.evaluators",
    "mutator": "evolve.mutators",
    "strategy": "evolve.strategies",
    "sandbox backend": "evolve.sandboxes",
}


class UnknownPlugin(KeyError):
    """No plugin of the kind is registered under the name; the message lists those that are."""

    def __str__(self) -> str:
        return str(self.args[0])


def registered(kind: Kind) -> dict[str, EntryPoint]:
    """The plugins of `kind` installed where this process finds modules, by name."""
    return dict(_scan(GROUPS[kind], tuple(sys.path)))


@functools.lru_cache(maxsize=16)
def _scan(group: str, path: tuple[str, ...]) -> tuple[tuple[str, EntryPoint], ...]:
    """The group's entry points, read once per module path (`path`, which entry_points
    reads as sys.path): each read walks every installed distribution's metadata, a few ms,
    and a run's start asks a dozen times."""
    return tuple((ep.name, ep) for ep in entry_points(group=group))


def known(kind: Kind) -> str:
    """The installed names of `kind`, for a message: "a, b, c", or "none"."""
    return ", ".join(sorted(registered(kind))) or "none"


def load(kind: Kind, name: str) -> Any:
    """What the plugin of `kind` registered under `name` points at (a class, or a module);
    UnknownPlugin where none is."""
    found = registered(kind)
    if name not in found:
        raise UnknownPlugin(f"no {kind} plugin named {name!r} (installed: {known(kind)})")
    return found[name].load()


def load_class(kind: Kind, name: str, base: type) -> type:
    """The class registered under `name`, which must derive from `base`: TypeError says
    which base where it does not."""
    loaded = load(kind, name)
    if not (isinstance(loaded, type) and issubclass(loaded, base)):
        value = registered(kind)[name].value
        raise TypeError(
            f"{kind} plugin {name!r} ({value}) is not a subclass of "
            f"{base.__module__}.{base.__qualname__}: derive it from that base"
        )
    return loaded
