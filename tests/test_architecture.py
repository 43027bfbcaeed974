"""The layering that docs/ARCHITECTURE.md describes, checked on the code itself: the core
reaches sandboxes and evaluators only through its registries, and no two modules import
each other, openly or from inside a function."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evolve", "sandboxes", "evaluators")


def test_importing_every_core_module_loads_no_sandbox_or_evaluator() -> None:
    probe = """
import importlib, pkgutil, sys
import evolve
for found in pkgutil.walk_packages(evolve.__path__, "evolve."):
    if ".migrations.versions." not in found.name and found.name != "evolve.__main__":
        importlib.import_module(found.name)
print(sorted(m for m in sys.modules if m.split(".")[0] in ("sandboxes", "evaluators")))
"""
    shown = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "[]"


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
