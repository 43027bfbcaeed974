"""The agent: a model that drafts, tests its drafts in the sandbox, and submits one child.

It runs a multi-turn tool loop (evolve.llm.conversation) on either provider's tool API.
Drafts are evaluated only as far as build and check; they are paid for and recorded as
model calls, but never become candidates. Only the submitted program does. Turns, drafts
and tokens are capped, so one proposal cannot spend the run's budget on its own; the token
cap shrinks further when the run's budget has less left (`MutationRequest.token_cap`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from evolve.llm.conversation import AssistantTurn, ToolResults, Turn
from evolve.mutators.agent_tools import TOOLS, AgentServices, Toolbox
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Proposal
from evolve.mutators.edits import EditError
from evolve.mutators.llm import ModelClients, no_reply
from evolve.mutators.prompt import PromptContext, build_prompt
from evolve.plugin.program import Program
from evolve.task.schema import LLMSpec

if TYPE_CHECKING:
    from evolve.llm.client import LLMCall, LLMClient

BUDGET_CAP = "what the run's budget leaves for this proposal"
NUDGE = "Call a tool: evaluate_draft to test edits, or submit to finish."
EMPTY_NUDGE = f"Your last reply was empty. {NUDGE}"

logger = logging.getLogger(__name__)


class AgentParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int = Field(8, ge=1, le=100, description="model replies per proposal")
    max_drafts: int = Field(4, ge=0, description="drafts evaluated per proposal")
    max_tokens: int = Field(
        60_000, ge=1, description="input + output tokens per proposal, all turns together"
    )


class Agent(Mutator):
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
        self.clients = ModelClients(llm)

    def propose(self, request: MutationRequest) -> Proposal:
        client = self.clients.pick(request)
        extra = {"max_turns": str(self.params.max_turns)}
        system, user = build_prompt(
            "agent",
            self.context,
            request.parent,
            request.others,
            self.templates,
            extra,
            attempts=request.attempts,
            in_flight=request.in_flight,
            neighbours=request.neighbours,
            racing=request.racing,
            digest=request.digest,
            metric_names=request.metric_names,
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
            child, turns = self._converse(
                client, system, [user], toolbox, calls, self._token_cap(request)
            )
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

    def _token_cap(self, request: MutationRequest) -> tuple[int, str]:
        """The tokens this proposal may use, and which limit set them: the agent's own cap,
        or less when the run's budget has less left (the engine's `token_cap`)."""
        own = self.params.max_tokens
        if request.token_cap is not None and request.token_cap < own:
            return request.token_cap, BUDGET_CAP
        return own, "the agent's max_tokens"

    def _converse(
        self,
        client: LLMClient,
        system: str,
        turns: list[Turn],
        toolbox: Toolbox,
        calls: list[LLMCall],
        cap: tuple[int, str],
    ) -> tuple[Program, int]:
        """Turns until a submit that applies. An empty reply is answered with a nudge and
        costs a turn: the conversation so far was paid for and a second try mostly works. A
        turn lost to failed requests (429s, 5xx, timeouts) ends the proposal."""
        empty_turns = 0
        for turn in range(1, self.params.max_turns + 1):
            _within(cap, calls)
            exchange = client.converse(
                system,
                turns,
                TOOLS,
                max_tokens=self.llm.max_tokens,
                temperature=self.llm.temperature,
            )
            calls.extend(exchange.calls)
            if exchange.turn is None:
                failure = no_reply("agent", exchange.calls, calls)
                if failure.outcome != "empty":
                    raise failure
                empty_turns += 1
                logger.info("agent: turn %d came back empty; nudging the model", turn)
                _nudge(turns)
                continue
            turns.append(exchange.turn)
            child, results = self._act(exchange.turn, toolbox)
            if child is not None:
                return child, turn
            turns.append(ToolResults(results) if results else NUDGE)
        if empty_turns == self.params.max_turns:
            raise MutationError(
                f"agent: all {empty_turns} turns came back empty; nothing was submitted",
                calls,
                "empty",
            )
        raise MutationError(
            f"agent: {self.params.max_turns} turns used and nothing was submitted",
            calls,
            "out_of_turns",
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


def _within(cap: tuple[int, str], calls: list[LLMCall]) -> None:
    """Raise once the proposal's calls have used its token cap; `cap` says which limit. A
    cap the run's budget set ends the proposal as `budget` (the run had no more to give
    it), the agent's own cap as `out_of_turns`."""
    limit, source = cap
    spent = sum(call.input_tokens + call.output_tokens for call in calls)
    if spent >= limit:
        raise MutationError(
            f"agent: {spent} tokens used, the cap is {limit} ({source}); nothing was submitted",
            calls,
            "budget" if source == BUDGET_CAP else "out_of_turns",
        )


def _nudge(turns: list[Turn]) -> None:
    """Ask again after an empty reply. A nudge after the user's own words joins them, as
    strict chat templates (Mistral's, Gemma's) refuse two user messages in a row; after
    tool results it is a message of its own, which both APIs accept (Anthropic joins
    consecutive user turns)."""
    last = turns[-1]
    if not isinstance(last, str):
        turns.append(EMPTY_NUDGE)
    elif not last.endswith(EMPTY_NUDGE):
        turns[-1] = f"{last}\n\n{EMPTY_NUDGE}"
