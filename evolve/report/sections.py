"""The report's sections, each from the run's facts: a title and its HTML, or a one-line
note where the run has nothing for it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from math import inf
from typing import Any

from evolve.report import failures, operators, plots
from evolve.report.facts import RunFacts
from evolve.report.lineage_view import view as lineage_view
from evolve.report.markup import Safe, duration, join, note, number, percent, table, tag, usd
from evolve.report.progress import WHOLE_RUN, Fall, replay
from evolve.search.pareto import pareto_front
from evolve.store import EvaluationRecord
from evolve.views.objective_terms import Terms

REASONS_PER_STAGE = 8
FRONT_ROWS = 30
FALLS_TOLD = 8  # falls of the best a caption names one by one


@dataclass(frozen=True)
class Section:
    key: str  # its anchor in the page
    title: str
    body: Safe


def sections(facts: RunFacts) -> list[Section]:
    return [
        Section("progress", "The best so far", progress(facts)),
        Section("operators", "Operators and models", operators_and_models(facts)),
        Section("failures", "Failures and dropped proposals", failures_and_drops(facts)),
        Section("lineage", "Lineage of the best", lineage(facts)),
        Section("pareto", "Pareto front", pareto(facts)),
        Section("counters", "Hardware counters, best against seed", counters(facts)),
        Section("setting", "Task, hardware and budgets", setting(facts)),
    ]


def _figure(svg: str, caption: str) -> Safe:
    return tag("figure", join([Safe(svg), tag("figcaption", caption)]))


def progress(facts: RunFacts) -> Safe:
    first = facts.evaluations[0].started_at if facts.evaluations else facts.run.created_at
    replayed = replay(facts.candidates, facts.evaluations, min(facts.run.created_at, first))
    if not replayed.curves:
        return note("No evaluation has passed yet, so there is no score to plot.")
    terms = facts.terms
    failed = sum(r.score is None for r in replayed.remeasures)
    marks = f"{len(replayed.remeasures)} re-measurements (marked x), {failed} of them failed."
    whole = replayed.curves.get(WHOLE_RUN)
    marks += _falls(whole.falls if whole is not None else [], terms)
    sizes = Counter(c.island for c in facts.candidates.values())
    best: dict[int, float] = {}
    for candidate in facts.candidates.values():
        if candidate.score is not None and candidate.score > best.get(candidate.island, -inf):
            best[candidate.island] = candidate.score
    rows = [(island, sizes[island], terms.score_cell(best.get(island))) for island in sorted(sizes)]
    return join(
        [
            tag("p", f"Ranked by {terms.ranking()}."),
            _figure(plots.progress(replayed, "candidates", terms), f"Against candidates. {marks}"),
            _figure(
                plots.progress(replayed, "seconds", terms), "Against wall time since the run began."
            ),
            table(["island", "candidates", f"best {terms.name}"], rows, numeric={0, 1, 2}),
        ]
    )


def _falls(falls: list[Fall], terms: Terms) -> str:
    """The caption's account of each time the run's best got worse: never silently."""
    if not falls:
        return " The run's best never got worse."
    told = [
        f"#{f.candidate_id} {'failed its' if f.failed else 'measured worse in a'} "
        f"re-measurement, {terms.amount(f.before)} to "
        + ("no score" if f.after is None else terms.amount(f.after))
        for f in falls[:FALLS_TOLD]
    ]
    more = f", and {len(falls) - FALLS_TOLD} more" if len(falls) > FALLS_TOLD else ""
    return (
        f" The run's best got worse {len(falls)} time(s), each where its leader was measured "
        f"again (marked ◇): {'; '.join(told)}{more}. A candidate's score is its worst "
        "measurement."
    )


def operators_and_models(facts: RunFacts) -> Safe:
    tallies = operators.by_operator(facts.candidates, facts.proposals)
    if not tallies:
        return note("No operator has proposed a child yet.")
    names = [t.name for t in tallies]
    rates = {
        "accepted": [t.acceptance for t in tallies],
        "improved": [t.improved / t.proposals if t.proposals else 0.0 for t in tallies],
    }
    parts = [
        tag(
            "p",
            "Accepted: the proposal became a candidate that passed its evaluation. "
            f"Improved: that candidate beats its parent ({facts.terms.better}). "
            f"{facts.terms.improvement.capitalize()}: by how much, summed over the improved.",
            class_="note",
        ),
        _figure(plots.bars("operators", names, rates, "share of proposals"), "Per operator."),
        _tally_table("operator", tallies, facts.terms),
    ]
    models = operators.by_model(facts.candidates, facts.proposals, facts.spend)
    if not models:
        parts.append(note("No model was called in this run."))
        return join(parts)
    paid = [m for m in models if m.name != operators.NO_MODEL]
    spend_plot = plots.bars(
        "models",
        [m.name for m in paid],
        {"USD": [m.cost_usd for m in paid]},
        "USD spent",
    )
    parts += [
        _figure(spend_plot, "Spend per model, from the ledger of model calls."),
        _tally_table("model", models, facts.terms),
        table(
            ["model", "calls", "failed calls", "input tokens", "output tokens", "USD"],
            [
                (
                    f"{s.provider}:{s.model}",
                    *(s.calls, s.failed, s.input_tokens, s.output_tokens),
                    _cost(s.cost_usd, s.input_tokens + s.output_tokens),
                )
                for s in facts.spend
            ],
            numeric={1, 2, 3, 4, 5},
            caption="The ledger of model calls",
        ),
    ]
    return join(parts)


def _cost(value: float, tokens: int) -> str:
    """A model in no price table is charged 0.0, which is not what it costs."""
    return "unpriced" if value == 0 and tokens > 0 else usd(value)


def _tally_costs(tally: operators.Tally) -> tuple[str, int, str]:
    """USD, tokens and USD per improvement; an unpriced model's improvements have no price
    either."""
    spent = _cost(tally.cost_usd, tally.tokens)
    each = spent if spent == "unpriced" else usd(tally.cost_per_improvement)
    return spent, tally.tokens, each


def _tally_table(what: str, tallies: list[operators.Tally], terms: Terms) -> Safe:
    return table(
        [
            what,
            *("proposals", "candidates", "accepted", "rate", "improved"),
            *(terms.improvement, f"most {terms.improvement} at once"),
            *("USD", "tokens", "USD per improvement"),
        ],
        [
            (
                t.name,
                t.proposals,
                t.candidates,
                t.accepted,
                percent(t.accepted, t.proposals),
                t.improved,
                terms.gained(t.gain),
                terms.gained(t.best_gain),
                *_tally_costs(t),
            )
            for t in tallies
        ],
        numeric=set(range(1, 11)),
    )


def failures_and_drops(facts: RunFacts) -> Safe:
    parts: list[Safe] = [tag("h3", "Failed evaluations")]
    stages = failures.by_stage(facts.failures)
    if stages:
        parts += [
            _counted(
                "failures",
                stages,
                "evaluations",
                "failed evaluations",
                f"{stages.total()} of {len(facts.evaluations)} evaluations failed, "
                "by the stage that failed.",
            ),
            table(
                ["stage", "reason", "evaluations", "first candidate"],
                [
                    (r.stage, r.text, r.count, f"#{r.example}")
                    for r in failures.reasons(facts.failures, REASONS_PER_STAGE)
                ],
                numeric={2, 3},
                caption=f"The commonest reasons of each stage, at most {REASONS_PER_STAGE}",
            ),
        ]
    else:
        parts.append(note("No evaluation failed."))
    parts.append(tag("h3", "Dropped proposals"))
    dropped = failures.dropped(facts.proposals)
    if not dropped:
        parts.append(note("No proposal was dropped."))
        return join(parts)
    parts += [
        _counted(
            "dropped",
            dropped,
            "proposals",
            "proposals",
            f"{dropped.total()} of {len(facts.proposals)} proposals made no candidate.",
        ),
        table(["outcome", "proposals"], dropped.most_common(), numeric={1}),
    ]
    return join(parts)


def _counted(name: str, counts: Counter[str], series: str, axis: str, caption: str) -> Safe:
    """A bar per kind, commonest on top."""
    ranked = counts.most_common()
    labels, values = [kind for kind, _ in ranked], [n for _, n in ranked]
    return _figure(plots.bars(name, labels, {series: values}, axis, counts=True), caption)


def lineage(facts: RunFacts) -> Safe:
    tree = facts.tree
    if tree is None or facts.best is None:
        return lineage_view(facts)
    shown = len(tree.chain) + tree.hidden - 1
    partners = sum(not edge.primary for edge in tree.edges)
    summary = (
        f"The best, #{facts.best.id} ({facts.headline}), is {shown} "
        "generations from the seed"
        + (f"; crossover partners joining its chain (dashed): {partners}." if partners else ".")
    )
    return join([tag("p", summary), lineage_view(facts)])


def pareto(facts: RunFacts) -> Safe:
    objectives = facts.task.objectives
    if len(objectives) < 2:
        return note("The task has one objective, so there is no Pareto front.")
    names = [o.name for o in objectives]
    points = {
        candidate: [float(metrics[name]) for name in names]
        for candidate, metrics in facts.metrics.items()
        if candidate in facts.candidates  # a run being written may have scored one since
        and all(isinstance(metrics.get(name), int | float) for name in names)
    }
    if not points:
        return note(f"No scored candidate reports all of {', '.join(names)}.")
    on_front = pareto_front(points, [o.direction for o in objectives])
    plot = plots.front(
        [(p[0], p[1]) for p in points.values()],
        [(points[c][0], points[c][1]) for c in on_front],
        (f"{names[0]} ({objectives[0].direction})", f"{names[1]} ({objectives[1].direction})"),
    )
    others = f"; the front is over all {len(names)}" if len(names) > 2 else ""
    rows = sorted(on_front, key=lambda c: points[c])[:FRONT_ROWS]
    return join(
        [
            _figure(plot, f"{len(on_front)} of {len(points)} candidates on the front{others}."),
            table(
                ["candidate", *names, "score"],
                [
                    (f"#{c}", *(number(v) for v in points[c]), number(facts.candidates[c].score))
                    for c in rows
                ],
                numeric=set(range(len(names) + 2)),
                caption=f"The front, at most {FRONT_ROWS} rows",
            ),
        ]
    )


def counters(facts: RunFacts) -> Safe:
    seed, best = facts.measured.get("seed"), facts.measured.get("best")
    why = [_uncounted(role, e) for role, e in facts.measured.items() if not e.counters]
    if not any(e.counters for e in facts.measured.values()):
        return join([note("No hardware counters were recorded for the seed or the best."), *why])
    names = sorted({*(seed.counters if seed else {}), *(best.counters if best else {})})
    rows = []
    for name in names:
        old = seed.counters.get(name) if seed else None
        new = best.counters.get(name) if best else None
        ratio = new.value / old.value if old and new and old.value else None
        sources = sorted({c.source for c in (old, new) if c is not None})
        rows.append(
            (
                name,
                number(old.value if old else None),
                number(new.value if new else None),
                "-" if ratio is None else f"{ratio:.3g}x",
                " / ".join(sources),
            )
        )
    ids = [
        f"{role} #{e.candidate_id} (evaluation {e.id})"
        for role, e in facts.measured.items()
        if e.counters
    ]
    return join(
        [
            tag("p", "From " + ", ".join(ids) + "."),
            *why,
            table(["counter", "seed", "best", "best / seed", "source"], rows, numeric={1, 2, 3}),
        ]
    )


def _uncounted(role: str, evaluation: EvaluationRecord) -> Safe:
    """Why a candidate has no counters, in its evaluator's words where a stage named for
    counters said (a tool that cannot run its instructions, a skipped count)."""
    said = [s.feedback for s in evaluation.stages if "counter" in s.name and s.feedback]
    reason = f". Its evaluator said: {said[0].splitlines()[0]}" if said else "."
    return note(f"No counters for the {role}, #{evaluation.candidate_id}{reason}")


def setting(facts: RunFacts) -> Safe:
    run, task = facts.run, facts.task
    objectives = ", ".join(f"{o.direction} {o.name} (weight {o.weight:g})" for o in task.objectives)
    about = table(
        ["", ""],
        [
            ("task", task.name),
            ("evaluator", task.evaluator),
            ("search", task.strategy),
            ("objectives", objectives or "-"),
            ("operators", ", ".join(task.operators) or "-"),
            ("task file", run.task_path),
            ("run status", run.status),
        ],
    )
    nodes = Counter(
        (str(e.node.get("host", "?")), str(e.node.get("cpu", "?")))
        for e in facts.evaluations
        if e.node
    )
    hardware = (
        table(
            ["host", "CPU", "evaluations"],
            [(host, cpu, n) for (host, cpu), n in nodes.most_common()],
            numeric={2},
        )
        if nodes
        else note("The evaluations do not say where they ran.")
    )
    return join(
        [
            tag("h3", "Task"),
            about,
            tag("h3", "Hardware"),
            hardware,
            tag("h3", "Budgets"),
            _budgets(facts),
            tag("details", join([tag("summary", "The task as stored"), tag("pre", run.task_yaml)])),
        ]
    )


def _budgets(facts: RunFacts) -> Safe:
    budget = facts.task.budget
    tokens = sum(s.input_tokens + s.output_tokens for s in facts.spend)
    rows: list[tuple[str, float, float | None, Callable[[Any], str]]] = [
        ("wall time", facts.run.wall_s_used, budget and budget.wall_time_s, duration),
        ("candidates", len(facts.candidates), budget and budget.candidates, str),
        (
            "model spend",
            sum(s.cost_usd for s in facts.spend),
            budget and budget.usd,
            lambda value: _cost(value, tokens),
        ),
        ("model tokens", tokens, budget and budget.tokens, str),
    ]
    return table(
        ["budget", "used", "limit", "share used"],
        [
            (
                name,
                show(used),
                "-" if limit is None else show(limit),
                f"{used / limit:.0%}" if limit else "-",
            )
            for name, used, limit, show in rows
        ],
        numeric={1, 2, 3},
        caption="" if budget else "The stored task names no budget.",
    )
