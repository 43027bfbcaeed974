"""`evolve report`: a real run (the engine, the synthetic evaluator and the autotuner,
plus model proposals, failures and counters written through the Store API as the engine
writes them) becomes one HTML file, which headless Chromium renders: its DOM and its
screenshot say whether the page ran and drew. A hostile program's text must stay text, and
PostgreSQL must give the same page as SQLite."""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from matplotlib.image import imread

from evolve.cli.commands import main
from evolve.engine.loop import Engine
from evolve.engine.scoring import score
from evolve.executors.local import LocalExecutor
from evolve.llm import LLMCall
from evolve.plugin.program import Program
from evolve.plugin.results import ERROR, Counter, EvalResult, StageResult
from evolve.report import write_report
from evolve.report.failures import reason, reasons
from evolve.report.lineage import trace
from evolve.report.progress import WHOLE_RUN, replay
from evolve.store import CandidateRecord, Settlement, Store, default_url
from evolve.store.records import CandidateOutline, EvaluationOutline, FailedEvaluation
from evolve.task.loading import load_task, make_evaluator
from evolve.task.schema import Objective
from tests.conftest import SYNTHETIC_SEED, postgres_schema, store_record

RUN = "r1"
TASK = """\
name: report
seed: seed.py
evaluator:
  name: synthetic
  params: {target: 100, fail_above: 8}
objectives:
  - {name: distance, direction: minimize}
  - {name: knob_sum, direction: minimize, weight: 0.01}
search:
  islands: 2
  migration_interval: 5
budget:
  candidates: 30
sandbox:
  backend: process
"""
OBJECTIVES = [
    Objective(name="distance", direction="minimize"),
    Objective(name="knob_sum", direction="minimize", weight=0.01),
]
NODE = {"node_id": "f" * 40, "host": "report-host", "cpu": "Test CPU 9000"}
PLOTS = ("progress-candidates", "progress-seconds", "operators", "models", "failures")
PLOTS += ("dropped", "pareto")
SECTIONS = ("progress", "operators", "failures", "lineage", "pareto", "counters", "setting")
HOSTILE = (
    "</script><script>window.pwned=1;document.body.dataset.pwned='script'</script>"
    "<img src=x onerror=\"document.body.dataset.pwned='img'\">"
)


# -- writing a run's rows as the engine does ---------------------------------------------


def _evaluate(
    store: Store,
    candidate: CandidateRecord,
    metrics: dict[str, float] | None,
    *,
    kind: str = "evaluate",
    counters: dict[str, Counter] | None = None,
    failure: EvalResult | None = None,
) -> CandidateRecord:
    """An ok evaluation with `metrics`, or `failure` as it is."""
    if failure is None:
        assert metrics is not None
        stage = StageResult("check", True, 0.01, metrics=metrics)
        result = EvalResult.from_stages([stage], counters=counters or {})
    else:
        result = failure
    result.sandbox = {"backend": "process", "node": NODE}
    return store.record_evaluation(
        store_record(store, candidate.id),
        result,
        kind=kind,
        score=score(result.metrics, OBJECTIVES) if result.ok else None,
        input_seed=1,
        worker="w1@report-host",
        started_at=candidate.created_at,
        finished_at=candidate.created_at + 0.5,
    )


def _call(model: str, cost: float, status: str = "ok", prompt: str = "improve it") -> LLMCall:
    provider, name = model.split(":", 1)
    return LLMCall(provider, name, prompt, "a reply", 900, 200, cost, 1.5, status)  # type: ignore[arg-type]


def _propose(
    store: Store,
    operator: str,
    model: str,
    parents: Sequence[CandidateRecord],
    program: Program | None,
    *,
    outcome: str = "candidate",
    summary: str = "",
    call_status: str = "ok",
) -> CandidateRecord | None:
    """A model proposal as the engine records it: opened, its call written as it
    completes, then settled, with its child when it made one."""
    first = parents[0]
    proposal = store.open_proposal(
        RUN, operator=operator, parent_ids=[p.id for p in parents], island=first.island
    )
    cost = 0.0 if call_status != "ok" else 0.0125
    store.add_proposal_call(proposal, _call(model, cost, call_status))
    if outcome != "candidate" or program is None:
        store.settle_proposal(Settlement(proposal, outcome, detail=f"{outcome} detail"))  # type: ignore[arg-type]
        return None
    mutation = {"operator": operator, "mutator": operator, "model": model, "summary": summary}
    if len(parents) > 1:
        mutation["partner"] = parents[1].id
    return store.add_candidate(
        RUN,
        program,
        parent_ids=[p.id for p in parents],
        island=first.island,
        generation=first.generation + 1,
        mutation=mutation,
        settlement=Settlement(proposal, "candidate", summary=summary),
    )


def _edited(parent: CandidateRecord, line: str) -> Program:
    text = parent.program.files["seed.py"].replace(
        "# EVOLVE-BLOCK-END", f"{line}\n# EVOLVE-BLOCK-END"
    )
    return Program({"seed.py": text})


def add_model_work(store: Store) -> CandidateRecord:
    """On top of whatever the run holds: two model children that become the best (the
    second a crossover with the seed), failures at three stages and of the evaluator,
    proposals dropped four ways, and counters of the seed and the best. The new best."""
    seed = store.seed_candidate(RUN)
    best = store.best(RUN)
    assert seed is not None and best is not None
    diff = _propose(
        store,
        "diff",
        "openai:gpt-test",
        [best],
        _edited(best, "D = 0  # unrolled"),
        summary="+1 lines in seed.py: `D = 0  # unrolled`",
    )
    assert diff is not None
    diff = _evaluate(store, diff, {"distance": 0.0, "knob_sum": 99.0})
    crossed = _propose(
        store,
        "crossover",
        "anthropic:claude-test",
        [diff, seed],
        _edited(diff, "E = 1"),
        summary="+1 lines in seed.py: `E = 1`",
    )
    assert crossed is not None
    crossed = _evaluate(store, crossed, {"distance": 0.0, "knob_sum": 98.0})
    perf = {"cycles": Counter(2.0e6, "perf"), "instructions": Counter(3.1e6, "perf")}
    crossed = _evaluate(
        store, crossed, {"distance": 0.0, "knob_sum": 98.0}, kind="remeasure", counters=perf
    )
    seed_metrics = store.evaluations(seed.id)[0].metrics
    slow = {
        "cycles": Counter(9.0e6, "perf"),
        "instructions": Counter(8.2e6, "perf"),
        "D1_misses": Counter(1.5e4, "cachegrind"),
    }
    _evaluate(store, seed, seed_metrics, kind="remeasure", counters=slow)
    failures = [
        EvalResult.from_stages(
            [StageResult("build", False, 0.2, "seed.py:4: error: expected ';' before '}' token")]
        ),
        EvalResult.from_stages(
            [StageResult("check", True, 0.1), StageResult("measure", False, 30.0, timed_out=True)]
        ),
        EvalResult(
            "error",
            feedback='evaluator crashed:\nTraceback (most recent call last):\n  File "x.py", '
            "line 3, in run\nRuntimeError: the harness lost its pipe",
        ),
    ]
    for number, failure in enumerate(failures):
        child = _propose(
            store,
            "diff",
            "openai:gpt-test",
            [crossed],
            _edited(crossed, f"F = {number}"),
            summary=f"+1 lines: F = {number}",
        )
        assert child is not None
        _evaluate(store, child, None, failure=failure)
    for outcome in ("duplicate", "too_similar", "failed", "retries_exhausted"):
        status = "rate_limited" if outcome == "retries_exhausted" else "ok"
        _propose(
            store, "diff", "openai:gpt-test", [crossed], None, outcome=outcome, call_status=status
        )
    return crossed


def plant(store: Store, task_yaml: str) -> CandidateRecord:
    """A run of its own: the seed, evaluated, and three autotuner children of it."""
    store.create_run(RUN, task_path="task.yaml", task_yaml=task_yaml, seed=3, settings={})
    seed = store.add_candidate(
        RUN,
        Program({"seed.py": SYNTHETIC_SEED}),
        parent_ids=[],
        island=0,
        generation=0,
        mutation={"operator": "seed"},
    )
    assert seed is not None
    _evaluate(store, seed, {"distance": 97.0, "knob_sum": 3.0})
    for n in range(3):
        child = store.add_candidate(
            RUN,
            Program({"seed.py": SYNTHETIC_SEED.replace("A = 1", f"A = {n + 10}")}),
            parent_ids=[seed.id],
            island=n % 2,
            generation=1,
            mutation={"operator": "tune", "mutator": "autotuner", "changes": {"A": [1, n + 10]}},
        )
        assert child is not None
        _evaluate(store, child, {"distance": 88.0 - n, "knob_sum": 12.0 + n})
    return seed


# -- reading the page back -----------------------------------------------------------------


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    inner: list[str]  # tags and text inside it, in order


class Outline(HTMLParser):
    """Every element with its attributes and the tags and text inside it."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs}, [])
        for outer in self._open:
            outer.inner.append(f"<{tag}>")
        self.elements.append(element)
        if tag not in ("meta", "br", "img", "input", "link"):
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index].tag == tag:
                del self._open[index:]
                return

    def handle_data(self, data: str) -> None:
        for outer in self._open:
            outer.inner.append(data)

    def find(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.elements
            if e.tag == tag
            and all(e.attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())
        ]

    def body(self) -> Element:
        return self.find("body")[0]


def chromium(page: Path, tmp: Path, *extra: str) -> str:
    """What headless Chromium makes of `page`: its DOM, once it has loaded."""
    browser = shutil.which("chromium")
    if browser is None:
        if os.environ.get("EVOLVE_REQUIRE_CHROMIUM") == "1":
            pytest.fail("EVOLVE_REQUIRE_CHROMIUM=1, but there is no chromium on PATH")
        pytest.skip("no chromium on PATH: apt-get install chromium")
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    done = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            *extra,
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# -- the runs ------------------------------------------------------------------------------


# The tests that take `real_run` are system tests, as the run starts its evaluation workers,
# and they share one xdist worker, which makes the run once for them all.
@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder of a real run's store (evolve.db) and results, its report written."""
    folder = tmp_path_factory.mktemp("report")
    (folder / "task").mkdir()
    (folder / "task" / "seed.py").write_text(SYNTHETIC_SEED)
    (folder / "task" / "task.yaml").write_text(TASK)
    task = load_task(folder / "task" / "task.yaml")
    store = Store(default_url(folder / "results"))
    run = store.create_run(RUN, task_path=str(task.path), task_yaml=task.text, seed=5, settings={})
    engine = Engine(
        task,
        store,
        run,
        make_evaluator(task),
        LocalExecutor(folder),
        workers=2,
        results_dir=folder / "results",
    )
    outcome = engine.run()
    assert outcome.reason.startswith("candidate budget reached"), outcome.reason
    add_model_work(store)
    write_report(store, RUN, folder / "report.html")
    store.close()
    yield folder


@pytest.mark.system
@pytest.mark.xdist_group("report-real-run")
def test_a_real_run_renders_in_chromium_with_every_plot_drawn(real_run: Path) -> None:
    page = real_run / "report.html"
    text = page.read_text()
    assert len(text) < 3_000_000
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), "nothing may be fetched"
    dom = Outline(chromium(page, real_run, "--dump-dom"))
    body = dom.body()
    assert body.attrs.get("data-rendered") == "yes"
    assert "data-js-errors" not in body.attrs, body.attrs.get("data-js-errors")
    assert [s.attrs["id"] for s in dom.find("section")] == list(SECTIONS)
    for name in PLOTS:
        (svg,) = dom.find("svg", data_plot=name)
        drawn = "".join(svg.inner)
        assert drawn.count("<path>") >= 3, name
        assert drawn.count("<text>") >= 3 and re.search(r"\d", drawn), name
    sections = {s.attrs["id"]: "".join(s.inner) for s in dom.find("section")}
    assert (
        "openai:gpt-test" in sections["operators"]
        and "anthropic:claude-test" in sections["operators"]
    )
    for why in ("expected ';' before '}' token", "RuntimeError: the harness lost its pipe"):
        assert why in sections["failures"]
    # The engine's own check failures, grouped, in the words of the first, numbers and all.
    assert re.search(r"knob sum \d+(\.\d+)? exceeds 8\.0", sections["failures"])
    assert "exceeds N" not in sections["failures"]
    for outcome in ("duplicate", "too_similar", "failed", "retries_exhausted"):
        assert outcome in sections["failures"]
    assert "D1_misses" in sections["counters"] and "cachegrind" in sections["counters"]
    assert "Test CPU 9000" in sections["setting"] and "report-host" in sections["setting"]
    # The panel beside the tree shows the best's change: its summary and its diff.
    (panel,) = dom.find("aside", id="edge-panel")
    shown = "".join(panel.inner)
    assert "+E = 1" in shown and "crossover" in shown and "@@" in shown
    assert len(dom.find("g", class_="edge partner")) >= 1  # the crossover's second parent


@pytest.mark.system
@pytest.mark.xdist_group("report-real-run")
def test_the_screenshot_of_the_report_is_not_blank(real_run: Path) -> None:
    shot = real_run / "report.png"
    chromium(real_run / "report.html", real_run, f"--screenshot={shot}", "--window-size=1400,3000")
    pixels = imread(shot)
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1000
    grey = pixels[..., :3].mean(axis=2)
    assert grey.std() > 0.05, "the page drew nearly nothing"
    assert (grey < 0.5).mean() > 0.005, "hardly any dark pixels: no text, no lines"


def test_a_hostile_program_and_its_feedback_stay_text(tmp_path: Path) -> None:
    store = Store(default_url(tmp_path))
    seed = plant(store, TASK)
    hostile = _propose(
        store,
        HOSTILE,
        f"openai:{HOSTILE}",
        [seed],
        Program({"seed.py": SYNTHETIC_SEED + f"# {HOSTILE}\n"}),
        summary=HOSTILE,
    )
    assert hostile is not None
    _evaluate(store, hostile, {"distance": 1.0, "knob_sum": 99.0})
    failing = _propose(
        store, "diff", "openai:gpt-test", [hostile], _edited(hostile, "G = 1"), summary="G"
    )
    assert failing is not None
    _evaluate(
        store,
        failing,
        None,
        failure=EvalResult.from_stages([StageResult("build", False, 0.1, HOSTILE)]),
    )
    page = write_report(store, RUN, tmp_path / "hostile.html")
    dom = Outline(chromium(page, tmp_path, "--dump-dom"))
    body = dom.body()
    assert body.attrs.get("data-rendered") == "yes"
    assert "data-js-errors" not in body.attrs, body.attrs.get("data-js-errors")
    assert "data-pwned" not in body.attrs
    assert dom.find("img") == []
    assert len(dom.find("script")) == 2  # the page's own, no more
    text = "".join(body.inner)
    assert "window.pwned=1" in text and "<img src=x onerror" in text  # shown, as text


def _sections_without_plots(page: Path) -> str:
    """The page's sections with the matplotlib figures cut out: the wall-time axis and
    the seconds of each point depend on when the rows were written."""
    text = page.read_text()
    text = text[text.index('<section id="progress">') :]
    return re.sub(r'<svg class="plot".*?</svg>', "<svg/>", text, flags=re.S)


@pytest.mark.postgres
def test_postgresql_writes_the_same_report_as_sqlite(tmp_path: Path) -> None:
    pages = []
    with postgres_schema() as url:
        for name, where in (("sqlite", default_url(tmp_path)), ("postgres", url)):
            store = Store(where)
            plant(store, TASK)
            add_model_work(store)
            pages.append(write_report(store, RUN, tmp_path / f"{name}.html"))
            store.close()
    sqlite, postgres = (_sections_without_plots(page) for page in pages)
    assert sqlite == postgres
    dom = Outline(pages[1].read_text())
    assert [s.attrs["id"] for s in dom.find("section")] == list(SECTIONS)
    assert {svg.attrs["data-plot"] for svg in dom.find("svg", class_="plot")} == set(PLOTS)


@pytest.mark.system
@pytest.mark.xdist_group("report-real-run")
def test_the_command_writes_beside_the_run_or_here_and_refuses_an_unknown_run(
    real_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    results = str(real_run / "results")
    done = runner.invoke(main, ["report", "--results", results])
    assert done.exit_code == 0, done.output
    written = real_run / "results" / RUN / "report.html"
    assert f"wrote {written}" in done.output.replace("\n", "")
    assert written.stat().st_size > 10_000

    chosen = tmp_path / "mine.html"
    done = runner.invoke(main, ["report", RUN, "-o", str(chosen), "--results", results])
    assert done.exit_code == 0, done.output
    assert chosen.read_text().startswith("<!DOCTYPE html>")

    elsewhere = tmp_path / "elsewhere"
    Store(default_url(elsewhere)).create_run(
        "lonely", task_path="t", task_yaml="", seed=0, settings={}
    )
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(main, ["report", "--results", str(elsewhere)])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "report-lonely.html").is_file()  # no folder of its own: here

    done = runner.invoke(main, ["report", "nope", "--results", results])
    assert done.exit_code == 2
    assert "no run 'nope'" in done.output

    climbing = tmp_path / "climbing"  # a stored name that is a path names no folder
    Store(default_url(climbing)).create_run(
        "../up", task_path="t", task_yaml="", seed=0, settings={}
    )
    (tmp_path / "up").mkdir()  # where run_dir(climbing, "../up") would lead
    done = runner.invoke(main, ["report", "../up", "--results", str(climbing)])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "report-.._up.html").is_file()
    assert not any((tmp_path / "up").iterdir()), "nothing written outside the results"
    unwritable = chosen / "report.html"  # under a file
    done = runner.invoke(main, ["report", RUN, "-o", str(unwritable), "--results", results])
    assert done.exit_code == 2 and "cannot write" in done.output


# -- the parts, on rows made up here --------------------------------------------------------


def _outline(cid: int, parents: tuple[int, ...], island: int = 0) -> CandidateOutline:
    return CandidateOutline(cid, parents, island, len(parents), {}, "ok", None, 1, 0.0)


def _measured(cid: int, kind: str, score: float | None, at: float) -> EvaluationOutline:
    status = "ok" if score is not None else "check_failed"
    return EvaluationOutline(cid * 10 + int(at), cid, kind, status, score, at, at, None)


def test_a_re_measurement_can_lower_the_best_and_a_failed_one_takes_it_away() -> None:
    candidates = {1: _outline(1, ()), 2: _outline(2, (1,)), 3: _outline(3, (1,), island=1)}
    evaluations = [
        _measured(1, "evaluate", -5.0, 1),
        _measured(2, "evaluate", -1.0, 2),
        _measured(3, "evaluate", -3.0, 3),
        _measured(2, "remeasure", -2.0, 4),  # lower: the run's best falls to -2
        _measured(2, "remeasure", None, 5),  # failed: #2 has no score, -3 of #3 leads
    ]
    replayed = replay(candidates, evaluations, 0.0)
    whole = replayed.curves[WHOLE_RUN]
    assert whole.best == [-5.0, -1.0, -2.0, -3.0, -3.0]
    assert whole.seconds == [1, 2, 4, 5, 5]
    assert replayed.curves[1].best == [-3.0, -3.0]  # island 1 never saw #2
    assert [(r.candidate_id, r.score) for r in replayed.remeasures] == [(2, -2.0), (2, None)]
    falls = [(f.candidate_id, f.before, f.after, f.failed) for f in whole.falls]
    assert falls == [(2, -1.0, -2.0, False), (2, -2.0, -3.0, True)], "each fall, and who made it"
    assert replayed.curves[1].falls == []


def test_an_islands_curve_breaks_where_its_only_score_is_taken_away() -> None:
    candidates = {1: _outline(1, ()), 2: _outline(2, (1,), island=2)}
    evaluations = [
        _measured(1, "evaluate", -5.0, 1),
        _measured(2, "evaluate", -4.0, 2),
        _measured(2, "remeasure", None, 3),  # island 2 holds no score now
    ]
    lonely = replay(candidates, evaluations, 0.0).curves[2]
    assert lonely.best[0] == -4.0 and len(lonely.best) == 2 and math.isnan(lonely.best[1])


def test_a_long_lineage_is_cut_to_its_newest_generations_with_the_partners_kept() -> None:
    candidates = {1: _outline(1, ())}
    for cid in range(2, 1001):
        parents = (cid - 1, 1) if cid % 100 == 0 else (cid - 1,)  # a crossover with the seed
        candidates[cid] = _outline(cid, parents)
    tree = trace(candidates, 1000, limit=250)
    assert tree.chain == tuple(range(751, 1001)) and tree.hidden == 750
    assert [e.parent for e in tree.edges if not e.primary] == [1, 1, 1]  # at 800, 900, 1000
    assert not any(e.child == 751 and e.primary for e in tree.edges)  # its parent is hidden
    assert 1 in tree.ids and 750 not in tree.ids


def test_failure_reasons_group_with_numbers_blanked_and_show_the_first_ones_words() -> None:
    def failing(cid: int, feedback: str, status: str = "check_failed") -> FailedEvaluation:
        stage = StageResult("check", False, 0.1, feedback)
        text = f"[check] {feedback}"
        return FailedEvaluation(cid, cid, "evaluate", status, (stage,), text, text)

    found = reasons(
        [
            failing(1, "knob sum 71 exceeds 64\nmore"),
            failing(2, "knob sum 90.5 exceeds 64"),
            failing(3, "wrong at 0x7ffd1234"),
            FailedEvaluation(
                4,
                4,
                "evaluate",
                "error",
                (),
                "Traceback (most recent call last):\n  File x\nValueError: bad",
                "Traceback (most recent call last):\n  File x\nValueError: bad",
            ),
        ],
        per_stage=5,
    )
    assert [(r.stage, r.text, r.count, r.example) for r in found] == [
        ("check", "knob sum 71 exceeds 64", 2, 1),
        ("check", "wrong at 0x7ffd1234", 1, 3),
        ("evaluator", "ValueError: bad", 1, 4),
    ]
    assert reason(failing(5, "knob sum 90.5 exceeds 64")) == "knob sum N exceeds N"


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_long_tracebacks_reason_is_its_exception_not_a_frame(
    backend: str, tmp_path: Path
) -> None:
    frames = "".join(f'  File "deep.py", line {n}, in f{n}\n    f{n + 1}()\n' for n in range(400))
    crash = f"evaluator crashed:\nTraceback (most recent call last):\n{frames}RecursionError: deep"
    with contextlib.ExitStack() as stack:
        url = default_url(tmp_path)
        if backend == "postgresql":
            url = stack.enter_context(postgres_schema())
        store = stack.enter_context(Store(url))
        seed = plant(store, TASK)
        _evaluate(store, seed, None, failure=EvalResult(ERROR, feedback=crash))
        (failure,) = [f for f in store.failed_evaluations(RUN, 4000) if f.candidate_id == seed.id]
    assert len(crash) > 8000 and failure.feedback_tail.endswith("RecursionError: deep")
    assert reason(failure) == "RecursionError: deep"


def _tuned(store: Store, seed: CandidateRecord, a: int) -> CandidateRecord:
    """A child of the seed with its knob A set to `a`, not evaluated yet."""
    child = store.add_candidate(
        RUN,
        Program({"seed.py": SYNTHETIC_SEED.replace("A = 1", f"A = {a}")}),
        parent_ids=[seed.id],
        island=0,
        generation=1,
        mutation={"operator": "tune"},
    )
    assert child is not None
    return child


def test_a_best_without_counters_says_why_in_its_evaluators_words(tmp_path: Path) -> None:
    store = Store(default_url(tmp_path))
    seed = plant(store, TASK)
    counted = {"instructions": Counter(1.2e8, "cachegrind")}
    _evaluate(store, seed, {"distance": 97.0, "knob_sum": 3.0}, counters=counted)
    best = _tuned(store, seed, 99)
    refused = "no counters: valgrind cannot decode some instructions"
    stages = [
        StageResult("check", True, 0.01, metrics={"distance": 0.0, "knob_sum": 100.0}),
        StageResult("counters", True, 0.01, feedback=f"{refused}\nmore detail"),
    ]
    for kind in ("evaluate", "remeasure"):  # measured twice: the run's champion
        result = EvalResult.from_stages(stages)
        store.record_evaluation(
            store_record(store, best.id), result, kind=kind,
            score=score(result.metrics, OBJECTIVES), input_seed=1, worker="w1", started_at=1.0,
            finished_at=2.0,
        )  # fmt: skip
    page = write_report(store, RUN, tmp_path / "report.html").read_text()
    counters = page[page.index('<section id="counters">') :]
    assert f"No counters for the best, #{best.id}. Its evaluator said: {refused}<" in counters
    assert "1.2e+08" in counters, "the seed's counters are still shown"


def test_the_report_names_the_runs_champion_not_an_unverified_top_score(tmp_path: Path) -> None:
    store = Store(default_url(tmp_path))
    seed = plant(store, TASK)
    _evaluate(store, seed, {"distance": 97.0, "knob_sum": 3.0}, kind="remeasure")
    lucky = _tuned(store, seed, 77)
    _evaluate(store, lucky, {"distance": 0.0, "knob_sum": 100.0})  # measured once
    page = write_report(store, RUN, tmp_path / "report.html").read_text()
    summary = page[page.index('class="muted"') :]
    assert f"best #{seed.id}," in summary and f"best #{lucky.id}," not in summary
    lineage = page[page.index('<section id="lineage">') :]
    assert f"The best, #{seed.id} " in lineage


def test_a_minimized_objectives_report_is_in_its_terms_and_marks_each_fall(tmp_path: Path) -> None:
    one = TASK.replace("  - {name: knob_sum, direction: minimize, weight: 0.01}\n", "")
    store = Store(default_url(tmp_path))
    store.create_run(RUN, task_path="task.yaml", task_yaml=one, seed=3, settings={})
    seed = store.plant_seed(RUN, Program({"seed.py": SYNTHETIC_SEED}))

    def measured(candidate: CandidateRecord, distance: float, kind: str) -> None:
        stage = StageResult("check", True, 0.01, metrics={"distance": distance})
        store.record_evaluation(
            store_record(store, candidate.id), EvalResult.from_stages([stage]), kind=kind,
            score=-distance, input_seed=1, worker="w1", started_at=1.0, finished_at=2.0,
        )  # fmt: skip

    for kind in ("evaluate", "remeasure"):
        measured(seed, 97.0, kind)
    leader = _tuned(store, seed, 88)
    measured(leader, 12.0, "evaluate")
    measured(leader, 30.0, "remeasure")  # the best gets worse: 12, then 30
    page = write_report(store, RUN, tmp_path / "report.html").read_text()

    progress = page[page.index('<section id="progress">') : page.index('<section id="operators">')]
    assert progress.count(">best distance, lower is better<") == 2, "each plot's y axis"
    assert progress.count("first measurement<") == 2, "every candidate's point, on both plots"
    assert "best re-measured worse<" in progress
    assert f"#{leader.id} measured worse in a re-measurement, 12 to 30" in progress
    assert "Ranked by distance, lower is better." in progress
    summary = page[page.index('class="muted"') :]
    assert f"best #{leader.id}, distance 30, seed 97: 3.23x lower" in summary
    assert "higher is better" not in page and "-97" not in page and "-30" not in page
