"""The README and docs/ as a reader meets them: a short manual, links that lead somewhere,
and a task reference that names every key the schema accepts, with the sandbox's defaults
as the code has them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from evolve.task.schema import Budget, ChampionSpec, LLMSpec, SandboxSpec, SearchSpec, TaskSpec

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def table(text: str, after: str) -> dict[str, list[str]]:
    """The rows of the first table after the line `after`, by their first cell's name."""
    lines = text.split(after + "\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for name in re.findall(r"`([\w.]+)`", cells[0]):
            rows[name] = cells
    return rows


def test_the_readme_is_a_short_manual() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


@pytest.mark.parametrize(
    ("heading", "schema"),
    [
        ("## Every key", TaskSpec),
        ("### `search`", SearchSpec),
        ("### `budget`", Budget),
        ("### `champion`", ChampionSpec),
        ("### `sandbox`", SandboxSpec),
        ("### `llm`", LLMSpec),
    ],
)
def test_the_task_reference_names_every_key(heading: str, schema: type[BaseModel]) -> None:
    text = (ROOT / "docs" / "task-reference.md").read_text()
    documented = {name.split(".")[0] for name in table(text, heading)}
    assert set(schema.model_fields) <= documented
    # Beyond the schema: only task.yaml's `openevolve:`, which the loader reads itself.
    assert documented - set(schema.model_fields) <= {"openevolve"}


def test_the_sandbox_table_gives_each_default_the_code_has() -> None:
    rows = table((ROOT / "docs" / "task-reference.md").read_text(), "### `sandbox`")
    for name, field in SandboxSpec.model_fields.items():
        shown = rows[name][2].strip("`")
        default = field.get_default(call_default_factory=True)
        if default is None:
            assert "evolve sandbox build" in shown, name
        elif isinstance(default, bool):
            assert shown == str(default).lower(), name
        elif isinstance(default, int | float):
            assert float(shown) == default, name
        else:
            assert shown == str(default), name
