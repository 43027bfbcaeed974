"""What every candidate of a task is measured against, made once by trusted runs: the
objects, the profile (with each workload's reference output), and the reference layouts
(the linker's own order, lld's hfsort and cdsort). Each is cached in the user cache.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evolve.evaluators.code_layout.artifacts import cache_root, cached_files, cached_json, key
from evolve.evaluators.code_layout.jobs import DRIVER, plan_for, run_driver
from evolve.evaluators.code_layout.params import CodeLayoutParams
from evolve.evaluators.code_layout.profile import TrainingProfile, training_profile
from evolve.evaluators.code_layout.programs import Recipe
from evolve.evaluators.code_layout.scoring import Measured, check_guards, require_repeatable
from evolve.plugin.stages import Runner, StageFailed

log = logging.getLogger(__name__)

SPLITS = ("train", "heldout")
ALWAYS_CFLAGS = ("-ffunction-sections", "-fno-pie")
LLD_SORTS = ("hfsort", "cdsort")


@dataclass(frozen=True)
class Ready:
    common: dict[str, object]  # the manifest fields every measure run shares
    shipped: dict[str, bytes]  # the objects and workloads every measure run gets
    references: dict[str, dict]  # workload -> the default build's output
    training: TrainingProfile
    baseline: Measured  # the linker's own order
    lld_sorts: dict[str, Measured]  # "lld cdsort" -> its layout, from the same profile


def workload_files(
    recipe: Recipe, workloads: Mapping[str, Mapping[str, bytes]]
) -> dict[str, bytes]:
    return {
        f"workloads/{name}{recipe.suffix}": text
        for split in SPLITS
        for name, text in workloads[split].items()
    }


def workload_entries(
    recipe: Recipe, workloads: Mapping[str, Mapping[str, bytes]]
) -> list[dict[str, object]]:
    """Each workload's name and argv, `{workload}` filled in; the driver fills `{program}`."""
    entries = []
    for split in SPLITS:
        for name in workloads[split]:
            path = f"workloads/{name}{recipe.suffix}"
            argv = [arg.replace("{workload}", path) for arg in recipe.argv]
            entries.append({"name": name, "argv": argv})
    return entries


def build_objects(
    run: Runner, params: CodeLayoutParams, recipe: Recipe, tools: bytes
) -> dict[str, bytes]:
    """The program's objects, keyed by its sources, flags and the sandbox's tool versions."""
    sources = recipe.files()
    cflags = [*params.cflags, *ALWAYS_CFLAGS, *recipe.cflags]
    build_key = key(recipe.name, tools, *cflags, *sorted(sources), *sources.values())
    names = [f"objects/{Path(source).stem}.o" for source in recipe.compiled()]

    def build() -> dict[str, bytes]:
        log.info("code_layout: building %s (%d sources)", recipe.name, len(names))
        plan = plan_for(params, "build", sources=list(recipe.compiled()), cflags=cflags)
        return run_driver(run, plan, sources, collect=names)[1]

    return cached_files(cache_root() / "objects" / build_key, names, build)


def tool_versions(run: Runner, params: CodeLayoutParams) -> bytes:
    """What the sandbox's compiler, linker, objdump, valgrind and C library say they are:
    part of every cache key, so a rebuilt image never serves another image's numbers."""
    cc, objdump = shlex.quote(params.cc), shlex.quote(params.objdump)
    script = (
        f"{cc} --version && {cc} -fuse-ld=lld -Wl,--version && {objdump} --version && "
        "valgrind --version && ldd --version"
    )
    tools = run(["sh", "-c", script], {})
    if not tools.ok:
        raise RuntimeError(
            f"the sandbox lacks a tool code_layout needs ({params.cc}, ld.lld, {params.objdump}, "
            f"valgrind): {tools.describe()}\n{tools.stderr.decode(errors='replace')[-1000:]}"
        )
    return tools.stdout


def make_ready(
    run: Runner,
    params: CodeLayoutParams,
    recipe: Recipe,
    workloads: Mapping[str, Mapping[str, bytes]],
) -> Ready:
    tools = tool_versions(run, params)
    objects = build_objects(run, params, recipe, tools)
    files = workload_files(recipe, workloads)
    common: dict[str, object] = {
        "objects": list(objects),  # in the recipe's order, which is the default layout's
        "libs": list(recipe.libs),
        "workloads": workload_entries(recipe, workloads),
    }
    # Counts differ slightly between backends (the process's memory map does), so each
    # backend profiles and measures its references itself.
    profile_key = key(
        tools, run.sandbox.name, *DRIVER.values(), json.dumps(plan_for(params, "", **common)),
        *objects.values(), *files.values(),
    )  # fmt: skip
    shipped = {**objects, **files}
    root = cache_root()

    def profile() -> dict:
        log.info("code_layout: profiling %d workloads under callgrind", len(files))
        return run_driver(run, plan_for(params, "profile", **common), shipped)[0]

    report = cached_json(root / "profiles" / f"{profile_key}.json", profile)
    training = training_profile(report, list(workloads["train"]))
    references = {w["name"]: w["output"] for w in report["workloads"]}

    def reference(label: str, ordering: dict[str, str], extra: dict[str, bytes]) -> Measured:
        def make() -> dict:
            log.info("code_layout: measuring the %s layout, twice", label)
            plan = plan_for(params, "measure", ordering=ordering, **common)
            first, second = (run_driver(run, plan, {**shipped, **extra})[0] for _ in "12")
            require_repeatable(first, second)
            return first

        parts = (profile_key, label, json.dumps(ordering), *extra.values())
        measured = Measured.from_report(
            cached_json(root / "measured" / f"{key(*parts)}.json", make)
        )
        try:
            check_guards(measured, references)
        except StageFailed as failure:
            raise RuntimeError(
                f"the {label} layout changes a workload's output: {failure}"
            ) from None
        return measured

    graph = {"callgraph.txt": training.call_graph_file()}
    return Ready(
        common=common,
        shipped=shipped,
        references=references,
        training=training,
        baseline=reference("default", {}, {}),
        lld_sorts={
            f"lld {sort}": reference(sort, {"cg_profile": "callgraph.txt", "sort": sort}, graph)
            for sort in LLD_SORTS
        },
    )
