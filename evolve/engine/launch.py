"""What `evolve run` does once its task file has loaded: say first who proposes children
(refusing a run where nothing could), choose the sandbox, choose where the workers run
(this machine, or the Ray cluster --ray-address names, joined without the secrets), create
or resume the run, drive the engine to the end, and fail a run that evolved nothing.

Kept apart from evolve/cli/commands.py so that the command line answers a bad task file before it
imports any of this: the store and the engine take most of a second to import, Ray more.
"""

from __future__ import annotations

import logging
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from rich.markup import escape

from evolve.engine import verification
from evolve.engine.ending import Ended
from evolve.engine.loop import Engine, Outcome
from evolve.engine.pool import SetupFailed
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.mutators import LLM_OPERATORS
from evolve.mutators.llm import key_names
from evolve.plugin.knobs import find_knobs
from evolve.plugin.results import OK
from evolve.runtime import guardian, lease, orphans
from evolve.runtime.runlog import run_log
from evolve.runtime.sandbox_choice import usable_sandbox
from evolve.store import CandidateRecord, RunRecord, Store
from evolve.store import location as store_location
from evolve.store.schema import PENDING
from evolve.task.loading import LoadedTask, TaskFileError, changed_files, make_evaluator, parse_task
from evolve.task.openevolve import run_defaults
from evolve.task.run_names import new_run_name, run_dir
from evolve.task.schema import ModelSpec
from evolve.ui.console import console, errors
from evolve.ui.dashboard import Dashboard, PlainLog
from evolve.views.figures import RunFigures
from evolve.views.objective_terms import Terms

log = logging.getLogger("evolve.engine.launch")


@dataclass(frozen=True)
class Finished:
    """A run that finished and crowned a best candidate."""

    run_name: str
    best_id: int
    best_score: float | None
    seed_id: int
    folder: Path  # the run's folder of results: its best program, run.log


@dataclass(frozen=True)
class RunOptions:
    """How `evolve run` was asked to run, beyond the task itself."""

    workers: int | None = None
    plain: bool = False
    ray_address: str | None = None
    backend: str | None = None  # the sandbox, when not the task's
    log_level: str = "INFO"
    candidates: int | None = None  # budget overrides, for this invocation
    wall_time_s: float | None = None

    def budgeted(self, task: LoadedTask) -> LoadedTask:
        """The task with --candidates and --wall-time in place of its own budget."""
        update = {
            key: value
            for key, value in (("candidates", self.candidates), ("wall_time_s", self.wall_time_s))
            if value is not None
        }
        if not update:
            return task
        budget = task.spec.budget.model_copy(update=update)
        return replace(task, spec=task.spec.model_copy(update={"budget": budget}))


def open_store(url: str) -> Store:
    """The store a run writes, after marking the runs of drivers killed on this host `killed`
    and cleaning up what they left (evolve/runtime/orphans.py)."""
    store = Store(url)
    orphans.sweep(store)
    return store


def found_store(db: str | None, results: Path | None) -> store_location.StoreLocation:
    """The existing store a resumed run means (evolve/store/location.py), or Ended (exit
    code 2) saying where it looked; never a new, empty one."""
    try:
        return store_location.for_reading(db, results)
    except store_location.StoreNotFound as exc:
        raise Ended(2, str(exc)) from None


def introduce(task: LoadedTask) -> None:
    """The run's first line: who proposes its children, the models or the offline
    autotuner alone. A run whose only proposer is the autotuner, in a seed without @knob
    values for it to vary, could propose nothing at all: it ends (exit code 2) instead."""
    spec = task.spec
    mutators = [m.name for m in spec.mutators]
    if spec.llm is not None and any(name in LLM_OPERATORS for name in mutators):
        models = ", ".join(_described(model) for model in spec.llm.models)
        console.print(escape(f"models: {models}; mutators: {', '.join(mutators)}"))
        return
    knobs = len(find_knobs(task.seed))
    if not knobs:
        raise Ended(
            2,
            f"{task.path}: the autotuner is this task's only mutator, and the seed has no "
            "@knob values for it to vary, so nothing could be proposed: mark the constants it "
            "may tune with @knob (see the README), or add an `llm:` section and a `diff` or "
            "`rewrite` mutator",
        )
    unasked = " (the task names models, but no mutator asks them)" if spec.llm else ""
    console.print(
        f"no model proposes{unasked}: the autotuner alone varies the seed's {knobs} @knob "
        "value(s), offline. To let a model propose edits, add an `llm:` section and a `diff` "
        "or `rewrite` mutator (see the README).",
        highlight=False,
    )


def _described(model: ModelSpec) -> str:
    where = f" at {model.base_url}" if model.base_url else ""
    return f"{model.model}{where} (weight {model.weight:g})"


def new_run(
    options: RunOptions,
    task: LoadedTask,
    seed: int | None,
    name: str | None,
    db: str | None,
    results: Path | None,
) -> Finished:
    defaults = run_defaults(task.text, task.root)  # an OpenEvolve config's, where it has them
    options = replace(options, workers=options.workers or defaults.workers)
    seed = seed if seed is not None else defaults.seed
    task = usable_sandbox(options.budgeted(task), options.backend)
    location = store_location.for_writing(db, results)
    location.results.mkdir(parents=True, exist_ok=True)
    with _cluster(options.ray_address, task) as cluster, open_store(location.url) as store:
        run_name = name or new_run_name(task.spec.name)
        if store.get_run(run_name):
            raise Ended(2, f"a run named {run_name!r} exists: use --resume {run_name}")
        me = lease.holder()
        record = store.create_run(
            run_name,
            task_path=str(task.path),
            task_yaml=task.text,
            seed=seed or 0,
            settings={
                "host": me["host"],  # whose newest run a bare --resume means
                "user": me["user"],
                "workers": options.workers,
                "task_sha256": task.digest,
                "task_files": dict(task.files),
                "objectives": [(o.name, o.direction) for o in task.spec.objectives],
                "strategy": task.spec.search.strategy,
                "budget": task.spec.budget.model_dump(),  # with this invocation's overrides
                verification.SETTING: task.unverified,
            },
        )
        lease.take(store, run_name, me)  # a new run: nobody else can hold it
        return execute(task, store, record, options, location.results, me, cluster)


def resumed_run(
    options: RunOptions, resume: str | None, db: str | None, results: Path | None
) -> Finished:
    """Resume the run named `resume` (None: the newest this user started on this host).
    Every reason not to is found before Ray starts, and ends it (exit code 2)."""
    location = found_store(db, results)
    me = lease.holder()
    with open_store(location.url) as store:
        if resume is None:
            record = store.latest_run(host=me["host"], user=me["user"])
        else:
            record = store.get_run(resume)
    if record is None:
        wanted = (
            f"of yours on this machine (user {me['user']} on host {me['host']}); "
            "`evolve runs` lists every run, and --resume RUN names one"
            if resume is None
            else f"named {resume!r}"
        )
        raise Ended(2, f"the store holds no run {wanted}")
    try:
        task = parse_task(record.task_yaml, Path(record.task_path))
    except TaskFileError as exc:
        raise Ended(2, f"the stored task no longer loads: {exc}") from None
    introduce(task)
    if resume is None:
        console.print(
            f"your latest run on this machine (user {me['user']} on host {me['host']}) is "
            f"{record.name}",
            highlight=False,
        )
    # A run from before fingerprints were kept has none to compare against.
    changed = changed_files(task, record.settings.get("task_files", task.files))
    if changed:
        raise Ended(
            2,
            f"{task.path}: cannot resume {record.name}: {', '.join(changed)} changed since it "
            "started; start a new run instead",
        )
    task = usable_sandbox(options.budgeted(task), options.backend)
    with open_store(location.url) as store:
        try:
            lease.take(store, record.name, me)
        except lease.LeaseHeld as held:
            raise Ended(2, str(held)) from None
        store.record_budget(record.name, task.spec.budget.model_dump())
    console.print(f"resuming run [bold]{record.name}[/bold]")
    with _cluster(options.ray_address, task) as cluster, open_store(location.url) as store:
        workers = options.workers or record.settings.get("workers")
        options = replace(options, workers=workers)
        return execute(task, store, record, options, location.results, me, cluster)


@contextmanager
def _cluster(address: str | None, task: LoadedTask) -> Iterator[Executor | None]:
    """The Ray cluster at `address` for the length of a run, joined with the task's model
    keys withheld ("local" starts a private Ray instance on this machine); a cluster that
    cannot be joined ends the run (exit code 1) before the store is touched, with one line
    that says why and what to change (evolve/runtime/cluster.py). Without an address, None: the
    run's workers are this machine's processes (evolve/executors/local.py), Ray is not
    loaded, and a guardian cleans up after a driver killed outright (evolve/runtime/guardian.py)."""
    if address is None:
        watcher = guardian.start(guardian.LOCAL, key_names(task.spec.llm))
        try:
            yield None
        finally:
            watcher.kill()  # a run that ended cleanly leaves it nothing to do
            watcher.wait()
        return
    from evolve.executors.on_ray import RayExecutor
    from evolve.runtime import cluster

    try:
        owned = cluster.connect(None if address == "local" else address, key_names(task.spec.llm))
    except (ConnectionError, RuntimeError) as exc:
        where = f"the Ray cluster at {address}" if address != "local" else "a local Ray instance"
        raise Ended(1, f"could not start or join {where}: {exc}") from None
    try:
        yield RayExecutor()
    finally:
        if owned:
            cluster.shutdown()


def execute(
    task: LoadedTask,
    store: Store,
    record: RunRecord,
    options: RunOptions,
    results: Path,
    me: dict[str, Any],
    cluster: Executor | None = None,
) -> Finished:
    """Drive the run, whose lease `me` holds, to its end, on `cluster` or else on this
    machine; the lease ends with its status. A run that does not finish with a crowned best
    ends (Ended) with its exit code."""
    run_name = record.name
    log_level = options.log_level
    folder = run_dir(results, run_name)
    folder.mkdir(parents=True, exist_ok=True)
    console.print(f"run [bold]{run_name}[/bold]: results in {folder}/, store {store.display_url}")
    console.print(f"log: {folder / 'run.log'} (--log-level {log_level})")
    executor = cluster or LocalExecutor(folder, key_names(task.spec.llm))
    cpus = executor.cpus()
    workers = options.workers or max(1, cpus - 1)
    if workers > cpus:  # each worker needs a CPU: the rest would wait for one forever
        where = "the cluster has" if cluster else "this machine has"
        console.print(
            f"[yellow]warning:[/yellow] {workers} workers asked for, but {where} "
            f"{cpus} CPUs: running {cpus}"
        )
        log.warning("%d workers asked for on %d CPUs: running %d", workers, cpus, cpus)
        workers = cpus
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stops as Ctrl-C does
    live = not options.plain and console.is_terminal
    unverified = task.unverified is not None
    terms = Terms(tuple(task.spec.objectives), task.spec.evaluator.name)
    observer = (
        Dashboard(store, run_name, console, unverified=unverified)
        if live
        else PlainLog(console, unverified=unverified, terms=terms)
    )
    heartbeat = lease.Heartbeat(store, run_name, me)

    def end(status: str) -> None:
        store.end_lease(run_name, me, status)

    try:
        with heartbeat.running(), observer, run_log(folder, log_level), closing(executor):
            log.info("run %s starts with %d worker(s) (%s)", run_name, workers, executor.kind)
            if ray_logs := executor.logs_folder():
                log.info("what the workers print is kept in %s", ray_logs)
            evaluator = make_evaluator(task)
            engine = Engine(
                task, store, record, evaluator, executor, workers=workers, results_dir=results,
                observer=observer, holds_run=heartbeat.holds,
            )  # fmt: skip
            outcome = engine.run()
            barren = outcome.failure or _evolved_nothing(store, engine, outcome)
            if barren:
                log.error("%s", barren)
    except lease.RunTakenOver:
        _taken_over(run_name)
    except KeyboardInterrupt:
        if heartbeat.lost:
            _taken_over(run_name)
        end("stopped")
        console.print(f"\nstopped. Continue with: evolve run --resume {run_name}")
        raise Ended(130) from None
    except SetupFailed as exc:
        end("failed")
        log.error("the evaluator's set-up failed: %s", exc)
        raise Ended(
            1,
            str(exc),
            f"Nothing was evolved: fix the above first (`evolve check {task.path}` tries the "
            "seed alone, in seconds).",
        ) from None
    except Exception as exc:
        end("failed")
        resume = f"The store keeps what finished. Continue with: evolve run --resume {run_name}"
        raise Ended(1, str(exc), resume) from exc
    seed = store.candidate(outcome.seed_id)
    if seed is not None and seed.score is None and seed.status != "pending":
        _seed_failed(store, task, record, seed, me)
    if barren:
        end("failed")
        raise Ended(1, barren)
    end("finished")
    console.print(f"finished: {outcome.reason}")
    best = outcome.best
    if best is None:
        raise Ended(
            1,
            "no candidate was crowned (none passed, or none measured consistently); see: "
            f"evolve show {outcome.seed_id}",
        )
    figures = RunFigures(store, record)
    measured = figures.measurement(best.id)
    unverified = f" ({verification.WORD})" if task.unverified else ""
    console.print(
        f"best: candidate #{best.id}, {figures.headline(best.id)}{unverified}; "
        f"{figures.terms.ranking()}",
        highlight=False,
    )
    if measured is not None and measured.metrics:
        console.print(f"its metrics: {figures.terms.metrics(measured.metrics)}", highlight=False)
    console.print(
        f"written to {folder / 'best'}/\n"
        f"see it with: evolve show {best.id}    the board: evolve leaderboard {run_name}"
    )
    return Finished(run_name, best.id, best.score, outcome.seed_id, folder)


def _evolved_nothing(store: Store, engine: Engine, outcome: Outcome) -> str | None:
    """Why a run had no child pass: whatever it proposed failed, repeated a program, or
    could not be made. None where a child passed, or where a budget ended the run after a
    child was evaluated: that run evolved, whether or not it beat the seed. A run that
    spent its budget without evaluating a single child tried nothing, and failed."""
    counts = store.status_counts(outcome.run_name)
    if counts.get(OK, 0) > 1:  # the seed, and a child
        return None
    evaluated = sum(n for status, n in counts.items() if status != PENDING)
    if engine.budgets.spent_reason(engine.added) is not None and evaluated > 1:
        return None
    outcomes: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for proposal in store.each_proposal(outcome.run_name):
        outcomes[proposal.outcome or "in flight"] += 1
        if proposal.outcome != "candidate" and proposal.detail:
            reasons[f"{proposal.operator}: {proposal.detail}"] += 1
    said = ", ".join(f"{n} {name}" for name, n in outcomes.most_common()) or "none"
    commonest = ""
    if reasons:
        reason, times = reasons.most_common(1)[0]
        commonest = f"; the commonest failure ({times} times): {reason}"
    return (
        f"nothing could be proposed: {outcome.reason}, and no child passed its evaluation "
        f"(proposals: {said}{commonest})"
    )


def _taken_over(run_name: str) -> NoReturn:
    raise Ended(1, f"another driver took run {run_name} over; stopped")


def _seed_failed(
    store: Store, task: LoadedTask, record: RunRecord, seed: CandidateRecord, me: dict[str, Any]
) -> NoReturn:
    """A seed that fails leaves nothing to evolve: the run failed, and says why."""
    store.end_lease(record.name, me, "failed")
    evaluations = store.evaluations(seed.id)
    feedback = evaluations[-1].feedback.strip() if evaluations else ""
    log.error("the seed #%d failed (%s):\n%s", seed.id, seed.status, feedback)
    errors.print(
        f"[red]error:[/red] the seed #{seed.id} failed ({seed.status}), so there is nothing to "
        "evolve. Its feedback:",
        highlight=False,
    )
    errors.print(feedback or "(none)", highlight=False, markup=False)
    raise Ended(1, hint=f"Fix the seed, then try it alone with: evolve check {task.path}")
