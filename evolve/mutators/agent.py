"""The agent: a model that drafts, tests its drafts in the sandbox, and submits one child.

It runs a multi-turn tool loop (evolve.llm.conversation) on either provider's tool API.
Drafts are evaluated only as far as build and check; they are paid for and recorded as
model calls, but never become candidates. Only the submitted program does. Turns, drafts
and tokens are capped, so one proposal cannot spend the run's budget on its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from evolve.llm.conversation import AssistantTurn, ToolResults, Turn
from evolve.mutators.agent_tools import TOOLS, AgentServices, Toolbox
from evolve.mutators.base import MutationError, MutationRequest, Proposal
from evolve.mutators.edits import EditError
from evolve.mutators.llm import model_clients, pick_client
from evolve.mutators.prompt import PromptContext, build_prompt
from evolve.program import Program
from evolve.task import LLMSpec

if TYPE_CHECKING:
    from evolve.llm.client import LLMCall, LLMClient

NUDGE = "Call a tool: evaluate_draft to test edits, or submit to finish."


class AgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int = Field(8, ge=1, le=100, description="model replies per proposal")
    max_drafts: int = Field(4, ge=0, description="drafts evaluated per proposal")
    max_tokens: int = Field(
        60_000, ge=1, description="input + output tokens per proposal, all turns together"
    )


class Agent:
    name = "agent"
    Params = AgentParams

    def __init__(
        self,
        params: Mapping[str, Any],
        llm: LLMSpec,
        context: PromptContext,
        templates: Path | None,
        services: AgentServices,
    ) -> None:
        self.params = AgentParams.model_validate(dict(params))
        self.llm = llm
        self.context = context
        self.templates = templates
        self.services = services
        self.clients = model_clients(llm)

    def propose(self, request: MutationRequest) -> Proposal:
        client = pick_client(self.clients, request)
        extra = {"max_turns": str(self.params.max_turns)}
        system, user = build_prompt(
            "agent", self.context, request.parent, request.others, self.templates, extra
        )
        toolbox = Toolbox(
            request.parent,
            self.services,
            self.context.notes,
            max_drafts=self.params.max_drafts,
            seed=request.seed,
        )
        calls: list[LLMCall] = []
        try:
            child, turns = self._converse(client, system, [user], toolbox, calls)
        finally:
            toolbox.close()
        record = {
            "operator": self.name,
            "mutator": self.name,
            "model": client.config.label,
            "turns": turns,
            "drafts": toolbox.drafts,
        }
        return Proposal(child, record, tuple(calls))

    def _converse(
        self,
        client: LLMClient,
        system: str,
        turns: list[Turn],
        toolbox: Toolbox,
        calls: list[LLMCall],
    ) -> tuple[Program, int]:
        for turn in range(1, self.params.max_turns + 1):
            exchange = client.converse(
                system,
                turns,
                TOOLS,
                max_tokens=self.llm.max_tokens,
                temperature=self.llm.temperature,
            )
            calls.extend(exchange.calls)
            reply = exchange.turn
            if reply is None:
                statuses = ", ".join(call.status for call in exchange.calls)
                raise MutationError(f"agent: no usable reply from the model ({statuses})", calls)
            turns.append(reply)
            child, results = self._act(reply, toolbox)
            if child is not None:
                return child, turn
            spent = sum(call.input_tokens + call.output_tokens for call in calls)
            if spent >= self.params.max_tokens:
                raise MutationError(
                    f"agent: {spent} tokens used, the cap is {self.params.max_tokens}; "
                    "nothing was submitted",
                    calls,
                )
            turns.append(ToolResults(results) if results else NUDGE)
        raise MutationError(
            f"agent: {self.params.max_turns} turns used and nothing was submitted", calls
        )

    def _act(
        self, reply: AssistantTurn, toolbox: Toolbox
    ) -> tuple[Program | None, tuple[tuple[str, str], ...]]:
        """Run the reply's tool calls in order; a submit that applies ends the proposal."""
        results: list[tuple[str, str]] = []
        for use in reply.tool_uses:
            if use.malformed:
                results.append((use.id, f"error: {use.malformed}"))
            elif use.name == "submit":
                try:
                    return self._submission(use.arguments, toolbox), ()
                except EditError as problem:
                    results.append((use.id, f"error: nothing was submitted: {problem}"))
            else:
                results.append((use.id, toolbox.call(use.name, use.arguments)))
        return None, tuple(results)

    @staticmethod
    def _submission(arguments: Mapping[str, Any], toolbox: Toolbox) -> Program:
        if arguments.get("edits"):
            return toolbox.apply(arguments["edits"])
        if toolbox.last_draft is None:
            raise EditError("there is no draft yet; pass `edits`")
        return toolbox.last_draft
