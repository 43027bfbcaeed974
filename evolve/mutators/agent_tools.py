"""The agent's tools: test a draft in the sandbox, look at the run's programs, search the notes.

Every tool answers in text written for the model, and a bad call (unknown id, garbled
arguments, edits that do not apply) is answered with what went wrong rather than raised:
the model reads it and tries again, as a person would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evolve.llm.conversation import Tool
from evolve.mutators import notes_search
from evolve.mutators.base import Parent
from evolve.mutators.edits import EditError, apply_diff, parse_diff
from evolve.mutators.prompt import truncate
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Sandbox
from evolve.task.schema import SandboxSpec

if TYPE_CHECKING:
    from evolve.executors import Actor
    from evolve.plugin.evaluator import Evaluator
    from evolve.store import CandidateRecord

MAX_TOP = 10
EDITS = {
    "type": "string",
    "description": "SEARCH/REPLACE blocks against the current program, in the answer format",
}
TOOLS = (
    Tool(
        "evaluate_draft",
        "Build and check a draft (the current program with your edits) in the sandbox. "
        "Returns each stage's status and feedback. Drafts are not measured for speed.",
        {"type": "object", "properties": {"edits": EDITS}, "required": ["edits"]},
    ),
    Tool(
        "show_candidate",
        "A program of this run: its code, status, score, metrics and evaluator feedback.",
        {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    ),
    Tool(
        "lineage",
        "The ancestors of a program, newest first: how it was made, and their scores.",
        {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    ),
    Tool(
        "top_candidates",
        f"The k best programs of this run so far (k at most {MAX_TOP}), the crowned "
        "champion first, each saying how often its score was measured.",
        {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
    ),
    Tool(
        "read_notes",
        "Search the task's notes (its knowledge file): returns the section whose heading "
        "the topic names, else the few paragraphs or list items nearest to the topic.",
        {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    ),
    Tool(
        "submit",
        "Submit your final edits; the program is measured and joins the population. Without "
        "edits, the last draft is submitted. This ends your turn.",
        {"type": "object", "properties": {"edits": EDITS}},
    ),
)


@dataclass(frozen=True)
class AgentServices:
    """What the tools reach: the evaluator and a sandbox for drafts, the store's reader."""

    evaluator: Evaluator
    sandbox: SandboxSpec
    reader: Actor  # an evolve.propose.store_reader.StoreReader on the driver's node


class Toolbox:
    """The tools of one proposal. It opens a sandbox on the first draft and must be closed."""

    def __init__(
        self, parent: Parent, services: AgentServices, notes: str, *, max_drafts: int, seed: int
    ) -> None:
        self.parent = parent
        self.services = services
        self.notes = notes
        self.max_drafts = max_drafts
        self.seed = seed
        self.drafts: list[str] = []  # the status of each draft evaluated
        self.last_draft: Program | None = None
        self._sandbox: Sandbox | None = None

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()

    def apply(self, edits: Any) -> Program:
        """The current program with `edits` applied; EditError says why not, for the model."""
        if not isinstance(edits, str) or not edits.strip():
            raise EditError("`edits` must be SEARCH/REPLACE blocks, as text")
        return apply_diff(self.parent.program, parse_diff(edits))

    def call(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Any tool but submit, which the agent's loop handles since it ends the turn."""
        try:
            if name == "evaluate_draft":
                return self.evaluate_draft(arguments.get("edits"))
            if name == "show_candidate":
                return self.show_candidate(_integer(arguments, "id"))
            if name == "lineage":
                return self.lineage(_integer(arguments, "id"))
            if name == "top_candidates":
                return self.top_candidates(_integer(arguments, "k"))
            if name == "read_notes":
                return self.read_notes(str(arguments.get("topic", "")))
        except (EditError, ValueError) as problem:
            return f"error: {problem}"
        known = ", ".join(tool.name for tool in TOOLS)
        return f"error: there is no tool named {name!r}; the tools are {known}"

    def evaluate_draft(self, edits: Any) -> str:
        if len(self.drafts) >= self.max_drafts:
            return f"error: the draft limit ({self.max_drafts}) is reached; submit your best edits"
        program = self.apply(edits)
        self.last_draft = program
        result = self._evaluate(program)
        self.drafts.append(result.status)
        lines = [f"draft {len(self.drafts)}: {result.status}"]
        for stage in result.stages:
            lines.append(f"- {stage.name}: {'passed' if stage.ok else 'FAILED'}")
            if stage.feedback.strip():
                lines.append(truncate(stage.feedback.strip(), 3000))
        if result.ok:
            lines.append("The draft builds and passes the check; submit it or improve it.")
        elif not result.stages:
            lines.append(truncate(result.feedback, 3000))
        return "\n".join(lines)

    def _evaluate(self, program: Program) -> EvalResult:
        """What the evaluator's `draft` runs: build and check only, where it can stop there."""
        evaluator = self.services.evaluator
        if self._sandbox is None:
            evaluator.limits = self.services.sandbox.limits()
            self._sandbox = self.services.sandbox.open()
        seed = self.seed + len(self.drafts)
        return evaluator.draft(program, self._sandbox, seed=seed)

    def show_candidate(self, candidate_id: int) -> str:
        found = self.services.reader.call("candidate", candidate_id).result()
        if found is None:
            return f"error: this run has no candidate #{candidate_id}"
        candidate, evaluation = found
        lines = [_summary(candidate)]
        if evaluation is not None:
            metrics = ", ".join(f"{k} = {v:.6g}" for k, v in evaluation.metrics.items())
            lines += [f"metrics: {metrics}"] if metrics else []
            if evaluation.feedback.strip():
                lines.append("feedback:\n" + truncate(evaluation.feedback.strip(), 3000))
        for path, text in candidate.program.files.items():
            lines.append(f"--- {path}\n{text}")
        return "\n".join(lines)

    def lineage(self, candidate_id: int) -> str:
        ancestry = self.services.reader.call("lineage", candidate_id).result()
        if not ancestry:
            return f"error: this run has no candidate #{candidate_id}"
        return "\n".join(_summary(candidate) for candidate in ancestry)

    def top_candidates(self, k: int) -> str:
        best = self.services.reader.call("top", max(1, min(k, MAX_TOP))).result()
        lines = [f"{_summary(candidate)} ({standing})" for candidate, standing in best]
        return "\n".join(lines) or "nothing is scored yet"

    def read_notes(self, topic: str) -> str:
        """The section of the notes that `topic` names, else the parts nearest to it."""
        if not self.notes.strip():
            return "this task has no notes"
        return notes_search.find(self.notes, topic)


def _integer(arguments: Mapping[str, Any], name: str) -> int:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"`{name}` must be an integer")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"`{name}` must be an integer, not {value!r}") from None


def _summary(candidate: CandidateRecord) -> str:
    score = "no score" if candidate.score is None else f"score {candidate.score:.6g}"
    how = candidate.mutation.get("operator", "?")
    model = candidate.mutation.get("model")
    made = f"{how} by {model}" if model else how
    parents = ", ".join(f"#{p}" for p in candidate.parent_ids) or "none"
    return f"#{candidate.id}: {candidate.status}, {score}; made by {made}; parents {parents}"
