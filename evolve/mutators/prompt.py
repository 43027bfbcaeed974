"""Prompts for the LLM operators, built from text templates that a task may override.

Templates are `string.Template` files ($name placeholders): filling one runs no code, so
a task's own templates are safe to load. A task's template folder is searched first, then
the built-in `templates/` folder. system.txt, the operator templates (diff, rewrite,
crossover, fix) and the answer formats (format_diff, format_rewrite) may all use:

    $task          the task description and its objectives
    $hardware      where candidates are measured (see evolve.hardware)
    $notes         the task's notes (its knowledge file)
    $parent        the current program in full: files, score, metrics
    $feedback      the evaluator's feedback on the current program, head and tail kept
    $inspirations  other programs of the island, their EVOLVE-BLOCKs only
    $partner       crossover's second parent in full
    $format        the answer format: format_diff.txt, or format_rewrite.txt for rewrite
    $language      the main file's language, for code fences
    $path          the file whose first block a rewrite replaces

agent.txt (the agent's first message) may also use $max_turns; its notes are not
pasted in but searched with the read_notes tool.

repair.txt follows the first prompt in the same conversation and sees only $error, why
the previous answer could not be applied.

A line holding only a placeholder whose value is empty is dropped with the blank line
after it, so a task without notes gets no empty "Notes" gap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path, PurePosixPath
from string import Template

from evolve.mutators.base import Parent
from evolve.mutators.edits import rewrite_target
from evolve.program import split_segments

OPERATORS = ("diff", "rewrite", "crossover", "fix", "agent")
FEEDBACK_LIMIT = 6000  # characters of feedback shown, head and tail together
INSPIRATION_LIMIT = 3000  # characters of each inspiration's EVOLVE-BLOCKs
MAX_INSPIRATIONS = 3
LANGUAGES = {
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cu": "cuda",
    ".cuh": "cuda",
    ".py": "python",
    ".rs": "rust",
    ".go": "go",
    ".sh": "bash",
    ".s": "asm",
    ".ll": "llvm",
}
LONE_PLACEHOLDER = re.compile(r"^\s*\$(?:(\w+)|\{(\w+)\})\s*$")
# Notes are written once, perhaps on another machine; the hardware is read where the run is.
HARDWARE_WINS = (
    "Read from the system (/proc, sysfs, nvidia-smi) when this run started. Where the notes "
    "say otherwise about the hardware, this section is right."
)


@dataclass(frozen=True)
class PromptContext:
    """What every prompt of a run shares; plain data, so it pickles to Ray workers."""

    description: str
    objectives: tuple[tuple[str, str], ...]  # (metric name, "maximize" | "minimize")
    notes: str = ""
    hardware: str = ""
    language: str = ""  # of the main file, for code fences


def language_for(path: str) -> str:
    """The code-fence language of a file, from its extension; empty when unknown."""
    return LANGUAGES.get(PurePosixPath(path).suffix.lower(), "")


def build_prompt(
    operator: str,
    context: PromptContext,
    parent: Parent,
    others: Sequence[Parent],
    templates: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """The (system, user) prompt asking `operator` to make a child of `parent`.

    `others` are the island's top and diverse programs, best first. For crossover the
    first of them is the second parent, shown in full; the rest are inspirations.
    `extra` adds placeholders for one operator's template (the agent's $max_turns).
    """
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; choose one of {', '.join(OPERATORS)}")
    inspirations = list(others)
    partner = ""
    if operator == "crossover":
        if not inspirations:
            raise ValueError("crossover needs a second parent in `others`")
        partner = _program_section("The second program", inspirations.pop(0), context)
    values = {
        "task": _task_section(context),
        "hardware": _hardware_section(context.hardware),
        "notes": _section("Notes on this task", context.notes),
        "parent": _program_section("The current program", parent, context),
        "feedback": _section(
            "Evaluator feedback on the current program", truncate(parent.feedback)
        ),
        "inspirations": _inspirations_section(inspirations[:MAX_INSPIRATIONS], context),
        "partner": partner,
        "language": context.language,
        "path": rewrite_target(parent.program),
        **(extra or {}),
    }
    values["format"] = _render(
        "format_rewrite.txt" if operator == "rewrite" else "format_diff.txt", templates, values
    )
    return _render("system.txt", templates, values), _render(f"{operator}.txt", templates, values)


def repair_prompt(error: str, templates: Path | None = None) -> str:
    """The follow-up user message after a reply that could not be applied, quoting `error`.

    It is sent in the same conversation, after the first prompt and the model's reply, so
    it need not repeat the program or the answer format.
    """
    return _render("repair.txt", templates, {"error": truncate(error)})


def truncate(text: str, limit: int = FEEDBACK_LIMIT) -> str:
    """`text` cut to about `limit` characters, keeping its head and tail at line breaks.

    Compiler output and test logs put the first error at the head and the summary at the
    tail; the middle is what can go.
    """
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit // 2) :]
    head = head[: head.rfind("\n") + 1] or head
    tail = tail[tail.find("\n") + 1 :] or tail
    omitted = len(text) - len(head) - len(tail)
    return f"{head}[... {omitted} characters omitted ...]\n{tail}"


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip()}" if body.strip() else ""


def _hardware_section(described: str) -> str:
    if not described.strip():
        return ""
    return _section("Hardware the program is measured on", f"{described.strip()}\n{HARDWARE_WINS}")


def _task_section(context: PromptContext) -> str:
    goals = ", ".join(f"{name} ({direction})" for name, direction in context.objectives)
    return _section("Task", f"{context.description.strip()}\n\nObjectives: {goals}")


def _score(parent: Parent) -> str:
    if parent.score is None:
        return "no score: it failed evaluation"
    return f"score {parent.score:.6g}, higher is better"


def _program_section(title: str, parent: Parent, context: PromptContext) -> str:
    metrics = ", ".join(f"{name} = {value:.6g}" for name, value in parent.metrics.items())
    parts = [f"## {title} ({_score(parent)})"]
    if metrics:
        parts.append(f"Metrics: {metrics}")
    for path, text in parent.program.files.items():
        parts.append(f"### {path}\n{_fenced(_fence_language(path, parent, context), text)}")
    return "\n".join(parts)


def _inspirations_section(others: Sequence[Parent], context: PromptContext) -> str:
    """Other programs' EVOLVE-BLOCKs only: the frozen code is the same in all of them."""
    shown = []
    for other in others:
        blocks = []
        for path, text in other.program.files.items():
            mutable = "".join("".join(s.lines) for s in split_segments(path, text) if s.mutable)
            if mutable.strip():
                code = truncate(mutable, INSPIRATION_LIMIT)
                blocks.append(f"{path}:\n{_fenced(_fence_language(path, other, context), code)}")
        shown.append(f"### Program {other.id} ({_score(other)})\n" + "\n".join(blocks))
    title = "Other programs of this population, for ideas (their EVOLVE-BLOCKs only)"
    return _section(title, "\n\n".join(shown))


def _fence_language(path: str, parent: Parent, context: PromptContext) -> str:
    if path == parent.program.main_file and context.language:
        return context.language
    return language_for(path)


def _fenced(language: str, code: str) -> str:
    newline = "" if code.endswith("\n") else "\n"
    return f"```{language}\n{code}{newline}```"


def _load(name: str, folder: Path | None) -> tuple[str, str]:
    """A template's text and where it came from; the task's folder wins."""
    if folder is not None and (folder / name).is_file():
        return (folder / name).read_text(), str(folder / name)
    built_in = resources.files("evolve.mutators") / "templates" / name
    return built_in.read_text(), f"built-in template {name}"


def _render(name: str, folder: Path | None, values: Mapping[str, str]) -> str:
    text, origin = _load(name, folder)
    kept: list[str] = []
    dropping = False
    for line in text.splitlines(keepends=True):
        lone = LONE_PLACEHOLDER.match(line)
        if lone and not values.get(lone[1] or lone[2], "x"):
            dropping = True
            continue
        if dropping and not line.strip():
            dropping = False
            continue
        dropping = False
        kept.append(line)
    try:
        return Template("".join(kept)).substitute(values).strip()
    except KeyError as missing:
        known = ", ".join(f"${k}" for k in values)
        raise ValueError(
            f"{origin}: unknown placeholder ${missing.args[0]} (known here: {known})"
        ) from None
    except ValueError as bad:
        raise ValueError(f"{origin}: {bad}; write $$ for a literal dollar sign") from None
