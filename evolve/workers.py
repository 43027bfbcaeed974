"""The Ray side of the engine: evaluation actors, and how a proposal is made wherever it
runs (the agent's store reader is in evolve/store_reader.py, so that these workers never
load the store).

Evaluation runs in long-lived actors so each keeps its sandbox warm and its baselines;
model proposals run in the actors of evolve/proposal_workers.py, which take no CPU slot, so
a slow model never holds an evaluation slot idle (the autotuner, which takes microseconds,
runs in the driver).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from evolve.evaluator import Evaluator
from evolve.hardware import cpu_model
from evolve.llm.hooks import CallHooks, SentCalls, hooked
from evolve.mutators.base import MutationError, MutationRequest, Mutator, Proposal
from evolve.program import Program
from evolve.proposal_outcomes import Outcome
from evolve.results import ERROR, UNAVAILABLE, EvalResult
from evolve.sandbox import Sandbox, SandboxUnavailable
from evolve.secrets import Keys
from evolve.task import SandboxSpec


@dataclass(frozen=True)
class Finished:
    result: EvalResult
    started_at: float
    finished_at: float
    worker: str


@dataclass(frozen=True)
class Placement:
    """Where a worker runs: jobs can ask for a machine kind, or for another worker."""

    name: str  # "worker-3@host"
    node_id: str
    host: str
    cpu: str


@dataclass(frozen=True)
class MutationFailed:
    reason: str
    calls: tuple[Any, ...] = ()  # model calls made on the way: paid for, so recorded
    trace: str = ""  # the traceback, when the mutator crashed rather than declined
    outcome: Outcome = "failed"


@ray.remote(num_cpus=1)
class EvaluationWorker:
    def __init__(self, evaluator: Evaluator, sandbox: SandboxSpec, name: str) -> None:
        self.evaluator = evaluator
        self.evaluator.limits = sandbox.limits()
        self.sandbox_spec = sandbox
        self.sandbox: Sandbox | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="evolve-worker-"))
        self.name = f"{name}@{socket.gethostname()}"
        # Where every evaluation of this worker ran, stored with it: a timing means
        # something only beside timings from the same kind of machine.
        self.node = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "cpu": cpu_model(),
        }

    def where(self) -> Placement:
        """Answers as soon as Ray has placed the actor, before its slow set-up."""
        return Placement(self.name, **self.node)

    def prepare(self, seed: Program) -> str | None:
        """Open the sandbox and run the evaluator's per-worker set-up; the error, if any."""
        try:
            self.sandbox = self.sandbox_spec.open()
            self.evaluator.prepare(seed, self.sandbox, self.workdir)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def close(self) -> None:
        """Give the sandbox (a container, say) and the work dir back before the actor dies."""
        if self.sandbox is not None:
            self.sandbox.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def evaluate(self, program: Program, input_seed: int) -> Finished:
        if self.sandbox is None:
            raise RuntimeError("prepare() must succeed before evaluate()")
        started = time.time()
        try:
            result = self.evaluator.evaluate(program, self.sandbox, seed=input_seed)
        except SandboxUnavailable as exc:
            result = EvalResult(UNAVAILABLE, feedback=str(exc))
        except Exception:
            result = EvalResult(ERROR, feedback="evaluator crashed:\n" + traceback.format_exc())
        result.sandbox = {**result.sandbox, "node": self.node}
        return Finished(result, started, time.time(), self.name)


def make_proposal(
    mutator: Mutator, request: MutationRequest, keys: Keys, hooks: CallHooks
) -> Proposal | MutationFailed:
    """`keys` are the model keys, sent with each proposal rather than found in the worker's
    environment (which holds none): see evolve/secrets.py. `hooks` write each model call
    to the ledger as it completes (evolve/llm/hooks.py's `SentCalls` says when that is
    waited for) and hold requests while the provider's circuit is open.
    Called in the driver for the autotuner, whose microseconds of work a Ray task would
    cost a hundred times over; everything else calls it in a proposal worker."""
    sent: SentCalls | None = None
    result: Proposal | MutationFailed
    try:
        with keys.lent(), hooked(hooks) as sent:
            result = mutator.propose(request)
    except MutationError as exc:
        result = MutationFailed(str(exc), exc.calls, outcome=exc.outcome)
    except Exception as exc:
        result = MutationFailed(f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
    if sent is not None:  # calls the result lacks, the engine reads from the ledger
        sent.settle(result.calls)
    return result
