"""The evaluation workers: long-lived actors (evolve/executors/), so each keeps its sandbox
warm and its baselines.

Proposals are made elsewhere (evolve/propose/making.py: in the driver for the autotuner,
in the actors of evolve/propose/workers.py for a model), and this module imports none of
their code: every evaluation worker loads it, and the mutators with their prompt and model
code would cost each one tens of milliseconds at start and a megabyte or two.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from evolve.plugin.evaluator import Evaluator
from evolve.plugin.hardware import cpu_model
from evolve.plugin.program import Program
from evolve.plugin.results import ERROR, UNAVAILABLE, EvalResult
from evolve.plugin.sandbox import Sandbox, SandboxUnavailable
from evolve.task.schema import SandboxSpec


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
        self.node = {"node_id": self.node_id(), "host": socket.gethostname(), "cpu": cpu_model()}

    def node_id(self) -> str:
        """The node this worker runs on; on one machine, the host."""
        return socket.gethostname()

    def where(self) -> Placement:
        """Answers as soon as the actor is placed, before its slow set-up."""
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
