"""Prompts for the LLM operators, built from text templates that a task may override.

Templates are `string.Template` files ($name placeholders): filling one runs no code, so
a task's own templates are safe to load. A task's template folder is searched first, then
the built-in `templates/` folder. system.txt, the operator templates (diff, rewrite,
crossover, fix, agent) and the answer formats (format_diff, format_rewrite, which cannot
hold $format, themselves) may all use:

    $task          the task description and its objectives
    $rules         what a candidate may use: the evaluator's allowlists (cflags, headers...)
    $hardware      where candidates are measured (see evolve.plugin.hardware)
    $notes         the task's notes (its knowledge file)
    $format        the answer format: format_diff.txt, or format_rewrite.txt for rewrite
    $digest        the run so far: the best score, what each operator achieved, failures
    $parent        the current program in full: files, score, metrics
    $feedback      the evaluator's feedback on the current program, head and tail kept
    $inspirations  other programs, best first, each as its changes to the current program's
                   EVOLVE-BLOCKs (the knobs it sets otherwise in words, the rest as diff
                   hunks without the unchanged lines), with its score and key metrics
    $partner       crossover's second parent: its metrics, and its changes to the current
                   program's EVOLVE-BLOCKs
    $legend        the unit and meaning of each metric the run reports
    $attempts      the current program's recent children and what became of them, the
                   programs the run holds one small change from it, then the proposals
                   on it still in flight ("Being tried now"), and its siblings with
                   proposals in flight
    $language      the main file's language, for code fences
    $path          the file whose first block a rewrite replaces

The system prompt is the same for every proposal of a run that one operator makes, so a
provider can cache it: it holds the fixed sections ($task, $rules, $hardware, $notes,
$legend, $format). The legend there covers the metrics the run reports (the engine passes
their names); a metric shown that they leave out is explained in the user message. A fixed
section that the system template uses is left out of the user message,
where it would only repeat; one it does not use stays where the operator template puts it.
So the operator templates list them too, and a task's own system.txt without $notes still
has its notes shown.

agent.txt (the agent's first message) may also use $max_turns. The agent's notes are not
pasted in, not even into its system prompt, but searched with the read_notes tool.

repair.txt follows the first prompt in the same conversation and sees only $error, why
the previous answer could not be applied.

A line holding only a placeholder whose value is empty is dropped with the blank line
after it, so a task without notes gets no empty "Notes" gap.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from importlib import resources
from pathlib import Path, PurePosixPath
from string import Template

from evolve.mutators.base import Neighbour, Parent, PastAttempt
from evolve.mutators.edits import rewrite_target
from evolve.mutators.small_change import knob_set
from evolve.plugin import metric_glossary
from evolve.plugin.clipping import middle_truncate
from evolve.plugin.program import split_segments

OPERATORS = ("diff", "rewrite", "crossover", "fix", "agent")
FIXED_SECTIONS = frozenset({"task", "rules", "hardware", "notes", "legend", "format"})
FEEDBACK_LIMIT = 6000  # characters of feedback shown, head and tail together
INSPIRATION_LIMIT = 3000  # characters of each inspiration's changes or EVOLVE-BLOCKs
KEY_METRICS = 5  # metrics shown beside an inspiration's score, the objectives first
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
# How a past attempt ended, where the outcome's own word reads badly in a sentence.
ENDINGS = {
    "candidate": "not evaluated yet",
    "pending": "not evaluated yet",
    "unparseable_after_repair": "the answer could not be applied",
    "outside_block": "it edited outside the EVOLVE-BLOCK",
    "empty": "the answer was empty",
    "timeout": "timed out",
}


@dataclass(frozen=True)
class PromptContext:
    """What every prompt of a run shares; plain data, so it pickles to Ray workers."""

    description: str
    objectives: tuple[tuple[str, str], ...]  # (metric name, "maximize" | "minimize")
    notes: str = ""
    hardware: str = ""
    language: str = ""  # of the main file, for code fences
    rules: str = ""  # the evaluator's prompt_rules(): what a candidate may use
    evaluator: str = ""  # its name, for what its metrics mean (evolve.plugin.metric_glossary)


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
    *,
    attempts: Sequence[PastAttempt] = (),
    digest: str = "",
    in_flight: Sequence[str] = (),
    metric_names: Sequence[str] = (),
    neighbours: Sequence[Neighbour] = (),
    racing: Sequence[Neighbour] = (),
) -> tuple[str, str]:
    """The (system, user) prompt asking `operator` to make a child of `parent`.

    `others` are the programs the engine chose to show, best first, every one of them. For
    crossover the first is the second parent, shown with all its metrics; the rest are
    inspirations. Both are shown as their changes to the parent's EVOLVE-BLOCKs.
    `attempts` are the parent's recent proposals and `digest` the run's (evolve.propose.digest);
    `in_flight` names the other proposals on the parent not answered yet,
    `neighbours` the programs the run holds one small change from it, and `racing` its
    siblings with proposals not answered yet, each with the change that made it.
    `metric_names` are the metrics the run reports, whose legend the system prompt holds;
    without them every metric shown is explained in the user message.
    `extra` adds placeholders for one operator's template (the agent's $max_turns).
    """
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; choose one of {', '.join(OPERATORS)}")
    inspirations = list(others)
    partner: Parent | None = None
    if operator == "crossover":
        if not inspirations:
            raise ValueError("crossover needs a second parent in `others`")
        partner = inspirations.pop(0)
    values = {
        "task": _task_section(context),
        "rules": _section("Rules every program must follow", context.rules),
        "hardware": _hardware_section(context.hardware),
        "notes": _section("Notes on this task", context.notes),
        "digest": _section("This run so far", digest),
        "parent": _program_section("The current program", parent, context),
        "feedback": _section(
            "Evaluator feedback on the current program", truncate(parent.feedback)
        ),
        "inspirations": _inspirations_section(parent, inspirations, context),
        "partner": _partner_section(parent, partner, context) if partner else "",
        "legend": _section(
            "What the metrics mean", metric_glossary.legend(metric_names, context.evaluator)
        ),
        "attempts": _joined(
            _attempts_section(attempts, parent),
            _neighbours_section(neighbours),
            _in_flight_section(in_flight),
            _racing_section(racing),
        ),
        "language": context.language,
        "path": rewrite_target(parent.program),
        **(extra or {}),
    }
    values["format"] = _render(
        "format_rewrite.txt" if operator == "rewrite" else "format_diff.txt", templates, values
    )
    shown = _shown_metrics(parent, partner, inspirations, context)
    return _system_and_user(operator, templates, values, shown, metric_names, context.evaluator)


def _system_and_user(
    operator: str,
    templates: Path | None,
    values: Mapping[str, str],
    shown: Sequence[str],
    metric_names: Sequence[str],
    evaluator: str,
) -> tuple[str, str]:
    """The fixed sections the system template uses go there and nowhere else, so the
    system prompt is the same for every proposal of the operator: a prefix to cache.
    The user message explains the metrics it shows that the system prompt's legend does
    not: all of them where the system template has no legend."""
    system_text, origin = _load("system.txt", templates)
    in_system = set(FIXED_SECTIONS.intersection(Template(system_text).get_identifiers()))
    system_values = values
    if operator == "agent":  # it searches its notes with a tool instead
        in_system.discard("notes")
        system_values = {**values, "notes": ""}
    system = _fill(system_text, origin, system_values)
    explained = (
        {_label(name, evaluator) for name in metric_names} if "legend" in in_system else set()
    )
    unexplained = [name for name in shown if _label(name, evaluator) not in explained]
    title = "What the other metrics mean" if explained else "What the metrics mean"
    user_values = {
        **values,
        **dict.fromkeys(in_system, ""),
        "legend": _section(title, metric_glossary.legend(unexplained, evaluator)),
    }
    user = _render(f"{operator}.txt", templates, user_values)
    return system, user


def _label(metric: str, evaluator: str) -> str:
    """What a metric's legend line is headed by: `text.<file>` covers every file."""
    known = metric_glossary.meaning(metric, evaluator)
    return known.label if known else metric


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
    return middle_truncate(text, limit)


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip()}" if body.strip() else ""


def _hardware_section(described: str) -> str:
    if not described.strip():
        return ""
    return _section("Hardware the program is measured on", f"{described.strip()}\n{HARDWARE_WINS}")


def _task_section(context: PromptContext) -> str:
    goals = ", ".join(f"{name} ({direction})" for name, direction in context.objectives)
    return _section("Task", f"{context.description.strip()}\n\nObjectives: {goals}")


def _score(parent: Parent, *, said: bool = True) -> str:
    """Its score; `said`: with which way is better, where the prompt has not said it yet."""
    if parent.score is None:
        return "no score: it failed evaluation"
    return f"score {parent.score:.6g}, higher is better" if said else f"score {parent.score:.6g}"


def _metrics(parent: Parent, names: Sequence[str], context: PromptContext) -> str:
    return ", ".join(
        metric_glossary.shown(name, parent.metrics[name], context.evaluator) for name in names
    )


def _key_metrics(parent: Parent, context: PromptContext) -> list[str]:
    """The objectives' metrics, then the others in the order the evaluator reported them;
    not one whose value is the score's (a lone objective's, as a rule), shown beside it."""
    objectives = [name for name, _ in context.objectives if name in parent.metrics]
    rest = [name for name in parent.metrics if name not in objectives]
    named = [name for name in [*objectives, *rest] if parent.metrics[name] != parent.score]
    return named[:KEY_METRICS]


def _program_section(title: str, parent: Parent, context: PromptContext) -> str:
    parts = [f"## {title}, #{parent.id} ({_score(parent)})"]
    if parent.metrics:
        parts.append(f"Metrics: {_metrics(parent, list(parent.metrics), context)}")
    for path, text in parent.program.files.items():
        parts.append(f"### {path}\n{_fenced(_fence_language(path, parent, context), text)}")
    return "\n".join(parts)


def _inspirations_section(parent: Parent, others: Sequence[Parent], context: PromptContext) -> str:
    """Other programs as their changes to the current program's EVOLVE-BLOCKs: the code
    they share with it is already in the prompt once. Those scoring at least the current
    program come first, best first; those below it were chosen for being unlike it, and
    are labelled so."""
    ranked = sorted(others, key=lambda o: (o.score is None, -(o.score or 0.0), o.id))
    better = [o for o in ranked if not _below(o, parent)]
    unlike = [o for o in ranked if _below(o, parent)]
    parts = [_inspiration(parent, other, context) for other in better]
    if unlike:
        parts.append(
            "Programs scoring below the current one, shown for ideas unlike it, best first:"
        )
        parts += [_inspiration(parent, other, context) for other in unlike]
    title = "Other programs, best first, as changes to the current program's EVOLVE-BLOCKs"
    return _section(title, "\n\n".join(parts))


def _below(other: Parent, parent: Parent) -> bool:
    """Whether `other` scores below `parent`; nothing does below a failed program."""
    if parent.score is None:
        return False
    return other.score is None or other.score < parent.score


def _partner_section(parent: Parent, partner: Parent, context: PromptContext) -> str:
    """Crossover's second parent, with all its metrics, as its changes to the current
    program: the code outside the EVOLVE-BLOCKs is the same in both."""
    parts = [f"## The second program, #{partner.id} ({_score(partner)})"]
    if partner.metrics:
        parts.append(f"Metrics: {_metrics(partner, list(partner.metrics), context)}")
    return "\n".join([*parts, *_against(parent, partner, context)])


def _inspiration(parent: Parent, other: Parent, context: PromptContext) -> str:
    metrics = _metrics(other, _key_metrics(other, context), context)
    score = _score(other, said=False)  # the current program's heading says which way is better
    about = f"{score}; {metrics}" if metrics else score
    return "\n".join([f"### Program #{other.id} ({about})", *_against(parent, other, context)])


def _against(parent: Parent, other: Parent, context: PromptContext) -> list[str]:
    """Each file's EVOLVE-BLOCKs as their changes to the current program's (see
    `_changes`), or whole where that would be longer (a rewrite) or the current program
    lacks the file."""
    blocks = []
    for path, text in other.program.files.items():
        theirs = _mutable(path, text)
        if not theirs.strip():
            continue
        ours = parent.program.files.get(path)
        knobs, hunks = _changes(_mutable(path, ours), theirs) if ours is not None else ([], "")
        shown = _knobs_and_hunks(knobs, hunks)
        if ours is not None and not shown:
            blocks.append(f"{path}: the same EVOLVE-BLOCKs as the current program")
        elif ours is not None and len(shown) < len(theirs):
            blocks.append(f"{path}, changes to the current program{shown}")
        else:
            code = truncate(theirs, INSPIRATION_LIMIT)
            language = _fence_language(path, other, context)
            blocks.append(f"{path}, its EVOLVE-BLOCKs:\n{_fenced(language, code)}")
    return blocks


def _knobs_and_hunks(knobs: Sequence[str], hunks: str) -> str:
    """`: <knobs set>` and then the other changes as a diff; empty where there is none."""
    said = f": {'; '.join(knobs)}" if knobs else ""
    if not hunks:
        return said
    diff = _fenced("diff", truncate(hunks, INSPIRATION_LIMIT))
    return f"{said}; and:\n{diff}" if said else f":\n{diff}"


def _mutable(path: str, text: str) -> str:
    return "".join("".join(s.lines) for s in split_segments(path, text) if s.mutable)


def _changes(ours: str, theirs: str) -> tuple[list[str], str]:
    """What turns `ours` into `theirs`: the knobs set to other values, in words
    (evolve/mutators/small_change.py), and the hunks of every other change, each opened by
    a bare `@@` (line numbers within the blocks would mislead). A hunk shows its removed and
    added lines and no unchanged ones, which the current program already shows, but for
    the line that an insertion follows (or precedes, at the start): lines only added would
    not say where they go."""
    old, new = ours.splitlines(), theirs.splitlines()
    knobs: list[str] = []
    hunks = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            pairs = zip(old[i1:i2], new[j1:j2], strict=True)
            named = [words for one, other in pairs if (words := knob_set(one, other))]
            if len(named) == i2 - i1:
                knobs += named
                continue
        lines = [f"-{line}" for line in old[i1:i2]] + [f"+{line}" for line in new[j1:j2]]
        if tag == "insert" and old:
            lines = [f" {old[i1 - 1]}", *lines] if i1 else [*lines, f" {old[0]}"]
        hunks.append("\n".join(["@@", *lines]) + "\n")
    return knobs, "".join(hunks)


def _shown_metrics(
    parent: Parent, partner: Parent | None, others: Sequence[Parent], context: PromptContext
) -> list[str]:
    """Every metric the user message shows, in order of appearance."""
    shown = [*parent.metrics, *(partner.metrics if partner else ())]
    return shown + [name for other in others for name in _key_metrics(other, context)]


def _attempts_section(attempts: Sequence[PastAttempt], parent: Parent) -> str:
    if not attempts:
        return ""
    lines = [
        "Children already proposed from the current program, newest first. Do not propose "
        "any of them again: try something different.",
        *(f"- {_attempt(attempt, parent)}" for attempt in attempts),
    ]
    return _section("Recent attempts on this program", "\n".join(lines))


def _neighbours_section(neighbours: Sequence[Neighbour]) -> str:
    """What one small change to the current program would make again: a setting its own
    change set, made again, or a sibling's change on top of it."""
    if not neighbours:
        return ""
    lines = [
        "Each of these changes to the current program makes a program the run has already "
        "(its score in brackets): do not propose them.",
        *(f"- #{n.id} ({_standing(n)}): {n.change}" for n in neighbours),
    ]
    return _section("Already in the run, one change from this program", "\n".join(lines))


def _standing(neighbour: Neighbour) -> str:
    if neighbour.score is not None:
        return f"{neighbour.score:.4g}"
    return ENDINGS.get(neighbour.status, neighbour.status.replace("_", " "))


def _in_flight_section(in_flight: Sequence[str]) -> str:
    """Requests sent together never see each other's answers: this one is told that it is
    not the only one, so that it does not give the answer every other one gives."""
    if not in_flight:
        return ""
    lines = [
        "Other proposals on the current program were sent and are not answered yet. Their "
        "changes are not known: prefer a change that they are unlikely to make too.",
        *(f"- {label}" for label in in_flight),
    ]
    return _section("Being tried now on this program", "\n".join(lines))


def _racing_section(racing: Sequence[Neighbour]) -> str:
    """Two requests at once on siblings can make one program: each the other's change."""
    if not racing:
        return ""
    lines = [
        "Proposals on these siblings of the current program (its parent with the change "
        "shown) are not answered yet. One that makes the current program's change gives the "
        "program that the same sibling's change made here would: prefer another.",
        *(f"- #{n.id}: {n.change}" for n in racing),
    ]
    return _section("Being tried now on its siblings", "\n".join(lines))


def _joined(*sections: str) -> str:
    return "\n\n".join(section for section in sections if section)


def _attempt(attempt: PastAttempt, parent: Parent) -> str:
    """`diff -> #41 scored 1.92 (parent 1.8): +3/-1 lines in kernel.c: ...`"""
    child = f"#{attempt.child_id}" if attempt.child_id is not None else ""
    if attempt.score is not None:
        versus = f" (parent {parent.score:.6g})" if parent.score is not None else ""
        ending = f"{child} scored {attempt.score:.6g}{versus}"
    else:
        words = ENDINGS.get(attempt.outcome, attempt.outcome.replace("_", " "))
        ending = f"{child} {words}" if child else words
    summary = f": {attempt.summary}" if attempt.summary else ""
    return f"{attempt.operator} -> {ending.strip()}{summary}"


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
    return _built_in(name), f"built-in template {name}"


@functools.cache
def _built_in(name: str) -> str:
    """Read once per process: a proposal worker renders them for every proposal."""
    return (resources.files("evolve.mutators") / "templates" / name).read_text()


def _render(name: str, folder: Path | None, values: Mapping[str, str]) -> str:
    return _fill(*_load(name, folder), values)


def _fill(text: str, origin: str, values: Mapping[str, str]) -> str:
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
