"""The llvm_inline evaluator: a Python should_inline(features) -> bool makes every inlining
decision of clang-19, and the score is the code size it leads to.

Cascade: `fast_tier` (a few files, about a second) for every candidate; `train` (the rest
of the training corpus) only for candidates at least as good as the seed on the fast tier;
`heldout`, reported as a metric and never an objective. Each tier is two sandbox runs: the
candidate's policy decides while clang emits throwaway IR, then the trusted driver replays
those decisions into objects that are measured and, where a guard exists, linked and run.

With `policy_language: cpp` the policy is a C++ shouldInline built (stage `build`) into a
pass plugin whose inline advisor makes the decide run's decisions; see plugin.py.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evolve.evaluators.llvm_inline.baselines import Baseline, load_or_compute
from evolve.evaluators.llvm_inline.corpus import cache_root, ensure_corpus
from evolve.evaluators.llvm_inline.jobs import Compiled, manifest, run_driver
from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.evaluators.llvm_inline.plugin import PLUGIN, build_advisor, build_plugin
from evolve.evaluators.llvm_inline.scoring import compare_guards, describe, geomean_ratio
from evolve.evaluators.llvm_inline.units import Unit, gather, units_in
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.stages import Runner, StageFailed, stage
from evolve.plugin.taskpaths import confine

REPLAY_CACHE = 512  # replayed tiers kept per worker, keyed by their decisions
# The metrics a leaderboard shows first, in this order; per-file sizes follow.
HEADLINE = ("size_ratio", "heldout_ratio", "fast_ratio", "train_text_bytes", "compile_s")


class LLVMInlineEvaluator(Evaluator):
    """Metrics: size_ratio (training geomean of size / -Oz size, the objective), heldout_ratio,
    fast_ratio, byte totals, compile_s (clang's CPU seconds on the training files under the
    candidate's decisions), and `text.<unit>` per file. `limits` bounds each sandbox run,
    which compiles a whole tier, so the task's timeout_s must cover its slowest tier."""

    name = "llvm_inline"
    Params = LLVMInlineParams  # what the task loader checks a typo against

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = LLVMInlineParams.model_validate(dict(params))
        corpus_dir = self.params.corpus_dir
        self.corpus = confine(task_dir, corpus_dir, "corpus_dir") if corpus_dir else None
        self.limits = Limits()
        heldout = ("heldout", "large") if self.params.large else ("heldout",)
        self.tiers: dict[str, tuple[Unit, ...]] = {
            "fast_tier": units_in(("fast",)),
            "train": tuple(u for u in units_in(("train",)) if u.split == "train"),
            "heldout": units_in(heldout),
        }
        self.files: dict[str, dict[str, bytes]] = {}
        self.baseline: Baseline | None = None
        self.seed_fast_ratio: float | None = None
        self.advisor: bytes | None = None  # the C++ route's trusted advisor object, built once
        # Knob steps often leave every decision as it was; a replay is deterministic, so its
        # result is reused instead of compiling the same objects again.
        self.replayed: OrderedDict[tuple[str, ...], list[Compiled]] = OrderedDict()

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Fetch the corpus if needed, compute (or load) stock sizes, and score the seed on
        the fast tier: later candidates must match it there to earn the full corpus."""
        self._load(sandbox)
        self.seed_fast_ratio = None
        result = self.cascade(seed, sandbox, tiers=("fast_tier",))
        if not result.ok:
            raise RuntimeError(f"the seed policy fails ({result.status}):\n{result.feedback}")
        self.seed_fast_ratio = result.metrics["fast_ratio"]

    def prompt_rules(self) -> str:
        """What the policy may read and how it must answer, for the model's prompt."""
        p = self.params
        if p.policy_language == "cpp":
            policy = (
                "`bool shouldInline(const evolve::CallSite &site)` (evolve_inline.h), built "
                f"with {p.cxx} into a pass plugin; it may include LLVM's headers; each file "
                f"compiled with it may take {p.plugin_timeout_s:g} s"
            )
        else:
            default = '; `features["inlining_default"]` is LLVM\'s own advice'
            default = default if p.include_default else ""
            policy = (
                f"`should_inline(features) -> bool`: features is a dict of ints, named as "
                f"{p.clang} sends them{default}. It must return True or False within "
                f"{p.decision_timeout_ms:g} ms a call; importing it may take "
                f"{p.import_timeout_s:g} s"
            )
        return "\n".join(
            [
                f"- The policy is {policy}.",
                f"- Only its decisions leave the sandbox: {p.clang} {p.opt_level} compiles "
                f"every file with them, .text is measured against {p.reference_level}, and "
                "programs with a guard are run: a changed output fails the candidate.",
            ]
        )

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """`seed` is unused: compilation has no random inputs to refresh."""
        return self.cascade(program, sandbox, tiers=tuple(self.tiers))

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """The fast tier alone, for the agent's drafts: the policy runs on real code and the
        guards compare, in about a second."""
        if self.baseline is None:
            self._load(sandbox)
        return self.cascade(program, sandbox, tiers=("fast_tier",))

    def _load(self, sandbox: Sandbox) -> None:
        root = self.corpus or ensure_corpus()
        self.files = {tier: gather(root, units) for tier, units in self.tiers.items()}
        everything = tuple(u for units in self.tiers.values() for u in units)
        run = Runner(sandbox, self.limits)
        self.baseline = load_or_compute(
            run, self.params, everything, gather(root, everything), cache_root() / "baselines"
        )

    def build(self, run: Runner, program: Program) -> bytes:
        """The C++ route's plugin for `program`; StageFailed says why it does not build."""
        if self.advisor is None:
            self.advisor = build_advisor(run, self.params)
        return build_plugin(run, self.params, self.advisor, program)

    def decide_and_replay(
        self, run: Runner, program: Program, tier: str, plugin: bytes | None = None
    ) -> list[Compiled]:
        """The tier's units compiled with the program's decisions, measured by trusted runs.
        The C++ route's `plugin` is built here when the caller has not built it already."""
        units = self.tiers[tier]
        if self.params.policy_language == "cpp":
            candidate = {PLUGIN: plugin if plugin is not None else self.build(run, program)}
            policy, plugin_path = "", PLUGIN
        else:
            candidate = {f"candidate/{path}": text for path, text in program.as_bytes().items()}
            policy, plugin_path = f"candidate/{program.main_file}", ""
        plan = manifest(
            self.params,
            "decide",
            units,
            level=self.params.opt_level,
            timeout_s=self.limits.timeout_s,
            policy=policy,
            plugin=plugin_path,
        )
        decided = run_driver(run, plan, self.files[tier], candidate)
        key = (tier, *(unit.decisions for unit in decided))
        if key in self.replayed:
            self.replayed.move_to_end(key)
            return self.replayed[key]
        plan = manifest(
            self.params,
            "replay",
            units,
            level=self.params.opt_level,
            timeout_s=self.limits.timeout_s,
            decisions={unit.name: unit.decisions for unit in decided},
        )
        compiled = run_driver(run, plan, self.files[tier])
        self.replayed[key] = compiled
        if len(self.replayed) > REPLAY_CACHE:
            self.replayed.popitem(last=False)
        return compiled

    def cascade(self, program: Program, sandbox: Sandbox, tiers: tuple[str, ...]) -> EvalResult:
        """The named tiers in order, stopping at the first failure; prepare and bench/ run
        fewer tiers than `evaluate` does."""
        if self.baseline is None:
            raise RuntimeError("llvm_inline: prepare() must run before evaluate()")
        baseline, params = self.baseline, self.params
        run = Runner(sandbox, self.limits)
        stages: list[StageResult] = []
        train: list[Compiled] = []
        plugin: bytes | None = None
        with suppress(StageFailed):
            if params.policy_language == "cpp":
                with stage(stages, "build"):
                    plugin = self.build(run, program)
            for tier in tiers:
                with stage(stages, tier) as current:
                    compiled = self.decide_and_replay(run, program, tier, plugin)
                    changed = compare_guards(compiled, baseline.guards, params.opt_level)
                    if changed:
                        raise StageFailed(changed)
                    sizes = {unit.name: unit.text_bytes for unit in compiled}
                    ratio = geomean_ratio(sizes, baseline.reference)
                    current.feedback = describe(
                        tier,
                        compiled,
                        baseline.reference,
                        baseline.stock,
                        params.opt_level,
                        params.reference_level,
                    )
                    current.metrics = {f"text.{name}": float(size) for name, size in sizes.items()}
                    if tier == "heldout":
                        current.metrics["heldout_ratio"] = ratio
                        current.metrics["heldout_text_bytes"] = float(sum(sizes.values()))
                        continue
                    train += compiled
                    if tier == "fast_tier":
                        current.metrics["fast_ratio"] = ratio
                        self._gate(ratio)
                    else:
                        every = {unit.name: unit.text_bytes for unit in train}
                        current.metrics["size_ratio"] = geomean_ratio(every, baseline.reference)
                        current.metrics["train_text_bytes"] = float(sum(every.values()))
                        current.metrics["compile_s"] = sum(unit.cpu_seconds for unit in train)
        result = EvalResult.from_stages(stages, sandbox=run.summary())
        first = {name: result.metrics[name] for name in HEADLINE if name in result.metrics}
        result.metrics = {**first, **result.metrics}
        return result

    def _gate(self, ratio: float) -> None:
        seed = self.seed_fast_ratio
        if self.params.gate_on_seed and seed is not None and ratio > seed:
            raise StageFailed(
                f"the fast tier's size ratio {ratio:.4f} is worse than the seed's {seed:.4f}, "
                "so the training corpus was not compiled"
            )
