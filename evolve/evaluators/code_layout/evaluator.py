"""The code_layout evaluator: a Python order(functions, calls) -> list[str] decides where
each hot function of a real program goes in its binary, and the score is the instruction
cache misses that layout gives on the program's workloads.

Per candidate, two sandbox runs. In the first, the candidate's order() reads the training
profile and returns names; that list is all that leaves the run, and it must hold each hot
function exactly once. In the second, with no candidate code, the driver writes the list
as lld's --symbol-ordering-file, links the objects (built once with -ffunction-sections),
runs every workload natively (its output must equal the default build's) and under
callgrind's cache simulator, and counts misses, lines and pages. The objects, the profile
and the reference layouts (the linker's order, lld's hfsort and cdsort) are made once and
cached (artifacts.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evolve.evaluators.code_layout.candidate import ask_candidate, check_order
from evolve.evaluators.code_layout.jobs import plan_for, run_driver
from evolve.evaluators.code_layout.params import CodeLayoutParams
from evolve.evaluators.code_layout.programs import RECIPES
from evolve.evaluators.code_layout.ready import SPLITS, Ready, make_ready
from evolve.evaluators.code_layout.scoring import (
    MEASURES,
    Measured,
    check_guards,
    describe,
    split_metrics,
)
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.program import Program
from evolve.plugin.results import Counter, EvalResult, StageResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.stages import Runner, StageFailed, stage
from evolve.plugin.taskpaths import confine
from evolve.plugin.watchdog import sandbox_time

MEASURED_CACHE = 256  # measurements kept per worker, keyed by the order: a link is deterministic
HEADLINE = ("i1_ratio", "heldout_i1_ratio", "lines_ratio", "pages_ratio", "ll_ratio")
METRICS = frozenset(
    [f"{split}{m}_ratio" for split in ("", "heldout_") for m in MEASURES]
    + [f"{split}_{m}" for split in ("train", "heldout") for m in (*MEASURES, "wall_s")]
)


class CodeLayoutEvaluator(Evaluator):
    """Metrics: i1_ratio (the objective: training I1 misses / the default order's, geomean
    over workloads), ll_ratio, lines_ratio, pages_ratio, their heldout_ twins (reported,
    never optimised), totals (train_i1, heldout_pages, ...) and wall seconds."""

    name = "code_layout"
    Params = CodeLayoutParams

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = CodeLayoutParams.model_validate(dict(params))
        self.recipe = RECIPES[self.params.program]
        folder = confine(task_dir, self.params.workloads, "workloads")
        self.workloads: dict[str, dict[str, bytes]] = {}
        for split in SPLITS:
            found = sorted((folder / split).glob(f"*{self.recipe.suffix}"))
            if not found:
                raise ValueError(
                    f"code_layout: no {split} workloads: {folder / split} holds no "
                    f"*{self.recipe.suffix} file"
                )
            self.workloads[split] = {f"{split}-{p.stem}": p.read_bytes() for p in found}
        self.limits = Limits()
        self.ready: Ready | None = None
        self.measured: OrderedDict[tuple[str, ...], Measured] = OrderedDict()

    def metric_problem(self, name: str) -> str | None:
        """Why an objective named `name` could not be scored, checked when the task loads."""
        if name in METRICS:
            return None
        return f"code_layout reports no metric {name!r}; it has {', '.join(sorted(METRICS))}"

    def worst_case_s(self, limits: Limits) -> float:
        """The candidate's run and the trusted measurement, each up to its limit."""
        return sandbox_time(2, limits)

    def prompt_rules(self) -> str:
        p = self.params
        return "\n".join(
            [
                "- `order(functions, calls) -> list[str]`: functions are the hot functions "
                "(executed by a training workload), each a dict with name, size (bytes), "
                "section and instructions (self instruction count); calls are dicts with "
                "caller, callee and count. Return every hot function's name exactly once; "
                f"the rest keep the linker's order. It may take {p.order_timeout_s:g} s.",
                f"- Only the names leave the sandbox: {p.cc} objects are linked by ld.lld "
                "with them as --symbol-ordering-file, the workloads run under callgrind with "
                f"a {p.i1} (size,ways,line) I1 cache, and outputs must match the default "
                "build's.",
            ]
        )

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Build, profile and measure the references (each cached), then check the seed."""
        self._load(sandbox)
        result = self.evaluate(seed, sandbox, seed=0)
        if not result.ok:
            raise RuntimeError(f"the seed layout fails ({result.status}):\n{result.feedback}")

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """The whole evaluation, there being no cheaper stage worth a draft; the first one
        on a worker makes (or reads from the cache) the objects, profile and references."""
        if self.ready is None:
            self._load(sandbox)
        return self.evaluate(program, sandbox, seed=seed)

    def _load(self, sandbox: Sandbox) -> None:
        self.ready = make_ready(
            Runner(sandbox, self.limits), self.params, self.recipe, self.workloads
        )
        self.measured.clear()

    def measure(self, run: Runner, ready: Ready, names: list[str]) -> Measured:
        """The layout `names` linked and measured by the trusted driver (reused if seen)."""
        cached = self.measured.get(tuple(names))
        if cached is not None:
            self.measured.move_to_end(tuple(names))
            return cached
        plan = plan_for(self.params, "measure", ordering={"order": "order.txt"}, **ready.common)
        files = {**ready.shipped, "order.txt": "".join(f"{n}\n" for n in names).encode()}
        measured = Measured.from_report(run_driver(run, plan, files)[0])
        self.measured[tuple(names)] = measured
        if len(self.measured) > MEASURED_CACHE:
            self.measured.popitem(last=False)
        return measured

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """`seed` is unused: the workloads are fixed files and callgrind is deterministic."""
        ready = self.ready
        if ready is None:
            raise RuntimeError("code_layout: prepare() must run before evaluate()")
        training, baseline = ready.training, ready.baseline
        run = Runner(sandbox, self.limits)
        stages: list[StageResult] = []
        counters: dict[str, Counter] = {}
        with suppress(StageFailed):
            with stage(stages, "order") as current:
                names = ask_candidate(run, self.params, program, training.functions, training.calls)
                check_order(names, training.hot)
                current.feedback = f"{len(names)} hot functions ordered"
            with stage(stages, "measure") as current:
                measured = self.measure(run, ready, names)
                check_guards(measured, ready.references)
                splits = {split: list(self.workloads[split]) for split in SPLITS}
                current.metrics = {
                    **split_metrics(measured, baseline, splits["train"], ""),
                    **split_metrics(measured, baseline, splits["heldout"], "heldout_"),
                }
                perf = measured.perf_source
                current.feedback = (
                    describe(measured, baseline, splits, ready.lld_sorts)
                    + f"\nI1 and LL from callgrind's cache simulator; wall_s: the median of "
                    f"{self.params.wall_repeats} native runs, timed by the trusted driver; "
                    f"perf: {perf}"
                )
                counters = self._counters(measured, splits)
        result = EvalResult.from_stages(stages, sandbox=run.summary(), counters=counters)
        first = {name: result.metrics[name] for name in HEADLINE if name in result.metrics}
        result.metrics = {**first, **result.metrics}
        return result

    def _counters(self, measured: Measured, splits: Mapping[str, list[str]]) -> dict[str, Counter]:
        """Each count with who counted it: callgrind's simulation, or perf where readable."""
        simulated = f"callgrind cache simulation (I1 {self.params.i1})"
        counters = {}
        for split, names in splits.items():
            records = [measured.workloads[n] for n in names]
            counters[f"{split}.I1_misses"] = Counter(
                sum(r["I1_misses"] for r in records), simulated
            )
            counters[f"{split}.LLi_misses"] = Counter(
                sum(r["LLi_misses"] for r in records), simulated
            )
            if measured.perf_source == "perf":
                for event in self.params.perf_events:
                    total = sum(r["perf"][event] for r in records)
                    counters[f"{split}.{event}"] = Counter(total, "perf")
        return counters
