"""LLM edit operators: a model sees the parent and proposes a structural change.

`diff` asks for SEARCH/REPLACE blocks, `rewrite` for the whole evolve block; `crossover`
shows a second parent and `fix` a failed one with its feedback, both answered as diffs. A reply that
cannot be applied (a block that does not match, prose instead of code, an edit outside the
EVOLVE-BLOCK) goes back to the model as feedback for exactly one repair turn; it is never
silently skipped. Every call, repaired or not, travels back with the result, so the driver
records what was paid for, and a proposal that fails says how (evolve.plugin.proposal_outcomes):
"outside_block" or "unparseable_after_repair" when the repair fails too, "empty" or
"retries_exhausted" when the model gave no usable reply.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from evolve.llm.client import LLMCall, LLMClient

from evolve.llm import ModelConfig, Price, parse_model
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Proposal
from evolve.mutators.edits import EditError, apply_diff, apply_rewrite, parse_diff
from evolve.mutators.prompt import PromptContext, build_prompt, repair_prompt
from evolve.plugin.program import Program
from evolve.plugin.proposal_outcomes import Outcome
from evolve.task.schema import LLMSpec, ModelSpec


class LLMEditorParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LLMEditor(Mutator):
    """One operator ("diff" or "rewrite") over the task's weighted models."""

    Params = LLMEditorParams

    def __init__(
        self,
        operator: str,
        params: Mapping[str, Any],
        llm: LLMSpec,
        context: PromptContext,
        templates: Path | None,
    ) -> None:
        self.name = operator
        self.params = LLMEditorParams.model_validate(dict(params))
        self.llm = llm
        self.context = context
        self.templates = templates
        self.clients = ModelClients(llm)

    def propose(self, request: MutationRequest) -> Proposal:
        client = self.clients.pick(request)
        parent = request.parent
        if self.name == "crossover" and not request.others:
            raise MutationError("crossover needs a second parent; the island has only one")
        system, user = build_prompt(
            self.name,
            self.context,
            parent,
            request.others,
            self.templates,
            attempts=request.attempts,
            in_flight=request.in_flight,
            neighbours=request.neighbours,
            racing=request.racing,
            digest=request.digest,
            metric_names=request.metric_names,
        )
        messages = [{"role": "user", "content": user}]
        calls: list[LLMCall] = []
        reply = self._ask(client, system, messages, calls)
        try:
            child = self._apply(parent.program, reply)
        except EditError as problem:
            messages += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": repair_prompt(str(problem), self.templates)},
            ]
            reply = self._ask(client, system, messages, calls)
            try:
                child = self._apply(parent.program, reply)
            except EditError as again:
                raise MutationError(
                    f"{self.name}: the reply could not be applied, even after one repair: {again}",
                    calls,
                    again.outcome,
                ) from None
        record = {
            "operator": self.name,
            "mutator": self.name,
            "model": client.config.label,
            "repaired": len(messages) > 1,
        }
        if self.name == "crossover":
            record["partner"] = request.others[0].id
        return Proposal(child, record, tuple(calls))

    def _ask(
        self, client: LLMClient, system: str, messages: list[dict[str, str]], calls: list[LLMCall]
    ) -> str:
        completion = client.complete(
            system, messages, max_tokens=self.llm.max_tokens, temperature=self.llm.temperature
        )
        calls.extend(completion.calls)
        if completion.text is None:
            raise no_reply(self.name, completion.calls, calls)
        return completion.text

    def _apply(self, parent: Program, reply: str) -> Program:
        if self.name == "rewrite":
            return apply_rewrite(parent, reply)
        return apply_diff(parent, parse_diff(reply))


OUTAGE = frozenset({"rate_limited", "server_error", "timeout"})  # the provider's side


def no_reply(who: str, attempts: Sequence[LLMCall], calls: Sequence[LLMCall]) -> MutationError:
    """The error for a request that produced no usable reply. Neither an empty reply nor a
    refusal (a bad key, an unknown model: status "error") is retried (evolve/llm/retry.py),
    so the last attempt says which it was: the model had nothing to say ("empty"), every
    attempt met an outage ("retries_exhausted"), or the request itself is wrong ("failed",
    which counts toward the fruitless stop), or the key or model was refused ("refused",
    which stops the run: its message is the client's one line, evolve/llm/failures.py)."""
    statuses = ", ".join(call.status for call in attempts) or "no attempt was made"
    last = attempts[-1].status if attempts else "error"
    if last == "refused":
        return MutationError(attempts[-1].error or f"{who}: refused", calls, "refused")
    outcome: Outcome = (
        "empty" if last == "empty" else "retries_exhausted" if last in OUTAGE else "failed"
    )
    return MutationError(f"{who}: no usable reply from the model ({statuses})", calls, outcome)


class ModelClients:
    """A client per configured model, with its weight, built on the first request.

    Mutators are made in the driver and run in the proposal workers. Building the clients
    there, not here, keeps the SDKs (over a second to import) out of the driver's start-up:
    the driver only pickles the mutator."""

    def __init__(self, llm: LLMSpec) -> None:
        self.llm = llm
        self._built: list[tuple[LLMClient, float]] | None = None

    def pick(self, request: MutationRequest) -> LLMClient:
        """The model the engine's bandit chose for this request, else one drawn by weight."""
        clients = self._clients()
        if request.model is not None:
            for client, _ in clients:
                if client.config.label == request.model:
                    return client
            raise MutationError(f"no configured model is labelled {request.model!r}")
        rng = random.Random(request.seed)
        return rng.choices([c for c, _ in clients], [w for _, w in clients])[0]

    def _clients(self) -> list[tuple[LLMClient, float]]:
        if self._built is None:
            from evolve.llm.client import LLMClient  # the SDKs load only where models are used

            llm = self.llm
            prices = {label: Price(**p.model_dump()) for label, p in llm.prices.items()}
            self._built = [
                (
                    LLMClient(
                        model_config(m), timeout_s=llm.timeout_s,
                        max_attempts=llm.max_attempts, prices=prices,
                    ),
                    m.weight,
                )
                for m in llm.models
            ]  # fmt: skip
        return self._built


def key_names(llm: LLMSpec | None) -> list[str]:
    """The variables the task's model keys come from, which no Ray process may inherit."""
    return sorted({model_config(m).key_env for m in llm.models}) if llm else []


def model_config(spec: ModelSpec) -> ModelConfig:
    """A task's model entry as the client wants it; ValueError names what is wrong."""
    if spec.base_url:
        return parse_model(
            {"model": spec.model, "base_url": spec.base_url, "api_key_env": spec.api_key_env}
        )
    config = parse_model(spec.model)
    return replace(config, api_key_env=spec.api_key_env) if spec.api_key_env else config
