"""How a proposal is made wherever it runs: in the driver for the autotuner, in a proposal
worker (evolve/propose/workers.py) for the others. Apart from the evaluation workers
(evolve/engine/workers.py), which never make one and so never load the mutators."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from evolve.llm.circuit import Refused
from evolve.llm.hooks import CallHooks, SentCalls, hooked
from evolve.llm.reservations import BudgetRefused
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Proposal
from evolve.plugin.proposal_outcomes import Outcome
from evolve.plugin.secrets import Keys


@dataclass(frozen=True)
class MutationFailed:
    reason: str
    calls: tuple[Any, ...] = ()  # model calls made on the way: paid for, so recorded
    trace: str = ""  # the traceback, when the mutator crashed rather than declined
    outcome: Outcome = "failed"
    over_budget: bool = False  # a model request found no room in the run's budgets


def make_proposal(
    mutator: Mutator, request: MutationRequest, keys: Keys, hooks: CallHooks
) -> Proposal | MutationFailed:
    """`keys` are the model keys, sent with each proposal rather than found in the worker's
    environment (which holds none): see evolve/plugin/secrets.py. `hooks` write each model call
    to the ledger as it completes (evolve/llm/hooks.py's `SentCalls` says when that is
    waited for) and hold requests while the provider's circuit is open, or turn them
    away, unsent, once the provider refused the run's key or model.
    Called in the driver for the autotuner, whose microseconds of work a Ray task would
    cost a hundred times over; everything else calls it in a proposal worker."""
    sent: SentCalls | None = None
    result: Proposal | MutationFailed
    try:
        with keys.lent(), hooked(hooks) as sent:
            result = mutator.propose(request)
    except MutationError as exc:
        result = MutationFailed(str(exc), exc.calls, outcome=exc.outcome)
    except Refused as exc:  # the run stops on the refusal another request met
        result = MutationFailed(str(exc), outcome="interrupted")
    except BudgetRefused as exc:  # its calls so far are in the ledger
        result = MutationFailed(str(exc), outcome="budget", over_budget=True)
    except Exception as exc:
        result = MutationFailed(f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
    if sent is not None:  # calls the result lacks, the engine reads from the ledger
        sent.settle(result.calls)
    return result
