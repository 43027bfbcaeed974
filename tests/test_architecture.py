"""The layering that docs/ARCHITECTURE.md describes, checked on the code itself: the core
reaches sandboxes and evaluators only through the plugin registry, each layer imports only
the layers beneath it, and no two modules import each other, openly or from inside a
function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evolve",)
PLUGINS = ("evolve.sandboxes", "evolve.evaluators")

# What each part of evolve may import of evolve beyond itself (by its package under evolve/).
# The core between `api` and the store (engine, propose, task, search, mutators, executors,
# runtime, views, ui, report) leans on itself and on every layer beneath it.
MAY_IMPORT = {
    "plugin": set(),  # the toolkit plugins are written against: evolve's floor
    "evaluators": {"plugin"},
    "sandboxes": {"plugin"},
    "llm": {"plugin"},
    "store": {"plugin", "llm"},
}
ONLY_FROM = {  # a part, and the only parts that may import it
    "cli": {"__main__"},  # the command line is the top: nothing of evolve's builds on it
    "api": {"cli"},
}


def test_importing_every_core_module_loads_no_sandbox_or_evaluator() -> None:
    core = [
        name for name in modules()
        if not name.startswith(PLUGINS) and ".migrations." not in name
        and name != "evolve.__main__"
    ]  # fmt: skip
    probe = f"""
import importlib, sys
for name in {core!r}:
    importlib.import_module(name)
print(sorted(m for m in sys.modules if m.startswith({PLUGINS!r})))
"""
    shown = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "[]"


def part(module: str) -> str:
    """The part of evolve a module belongs to: its package under evolve/, or its own name
    for a module at the top (`api`, `__main__`)."""
    return module.split(".")[1] if "." in module else "evolve"


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import (module -> what it imports) that crosses the layers the wrong way."""
    found = []
    for module, targets in graph.items():
        mine = part(module)
        for target in targets:
            theirs = part(target)
            if theirs in (mine, "evolve"):
                continue
            if mine in MAY_IMPORT and theirs not in MAY_IMPORT[mine]:
                found.append(f"{module} -> {target}: {mine} may import only {MAY_IMPORT[mine]}")
            elif theirs in ONLY_FROM and mine not in ONLY_FROM[theirs]:
                found.append(f"{module} -> {target}: only {ONLY_FROM[theirs]} may import {theirs}")
    return sorted(found)


def import_graph() -> dict[str, set[str]]:
    """Every module and what it imports of evolve, at its top or inside a function."""
    known = modules()
    graph = {}
    for name, path in known.items():
        top, late = imports(path, name, known)
        graph[name] = top | late
    return graph


def test_each_layer_imports_only_the_layers_beneath_it() -> None:
    assert layer_violations(import_graph()) == []


def test_the_layer_check_finds_a_planted_violation() -> None:
    """A plugin module that reached into the engine, an evaluator into a sandbox backend,
    and the store into the command line are each named."""
    graph = import_graph()
    graph["evolve.plugin.results"].add("evolve.engine.loop")
    graph["evolve.evaluators.synthetic"].add("evolve.sandboxes.process")
    graph["evolve.store.schema"].add("evolve.cli.commands")
    planted = layer_violations(graph)
    assert [line.split(":")[0] for line in planted] == [
        "evolve.evaluators.synthetic -> evolve.sandboxes.process",
        "evolve.plugin.results -> evolve.engine.loop",
        "evolve.store.schema -> evolve.cli.commands",
    ]


def test_the_package_root_holds_only_the_entry_points() -> None:
    """Every module lives in the package of its concept; each package says what it holds."""
    root = sorted(p.name for p in (ROOT / "evolve").glob("*.py"))
    assert root == ["__init__.py", "__main__.py", "api.py"]
    for init in (ROOT / "evolve").glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 12, f"{init.relative_to(ROOT)} says nothing of itself"


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, name: str, known: dict[str, Path]) -> tuple[set[str], set[str]]:
    """The project modules `name` imports when it loads, and those it imports only inside a
    function. A package's import of its own submodule is how packages work, not a cycle."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top: set[str] = set()
    late: set[str] = set()

    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    def visit(nodes: list[ast.stmt], at_top: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue  # for the type checker only: never imported at run time
            if isinstance(node, ast.Import | ast.ImportFrom):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                else:
                    base = node.module or ""
                    if node.level:
                        up = package.split(".")[: len(package.split(".")) - node.level + 1]
                        base = ".".join([*up, base] if base else up)
                    targets = [f"{base}.{alias.name}" for alias in node.names]
                for target in targets:
                    module = resolve(target) if target.split(".")[0] in PACKAGES else None
                    if module and module != name and not module.startswith(name + "."):
                        (top if at_top else late).add(module)
            inner = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    visit([c for c in children if isinstance(c, ast.stmt | ast.excepthandler)],
                          at_top and not inner)  # fmt: skip

    visit(ast.parse(path.read_text()).body, True)
    return top, late


def test_no_module_imports_one_that_imports_it_back() -> None:
    known = modules()
    graph: dict[str, set[str]] = {}
    deferred: dict[str, set[str]] = {}
    for name, path in known.items():
        graph[name], deferred[name] = imports(path, name, known)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            module = todo.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                todo.extend(graph[module])
        return False

    cycles = [
        f"{a} -> {b}"
        for a in known
        for b in graph[a] | deferred[a]
        if b != a and reaches(b, a) and not a.startswith(b + ".")
    ]
    assert cycles == []
