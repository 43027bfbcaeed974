"""The code_layout evaluator with real clang-19, ld.lld-19, valgrind and the process sandbox.

The parser is checked against callgrind's own output for a C program whose call counts are
known; the evaluator runs on the Lua task (Lua's source is fetched into the user cache on
first use, and the objects, profile and reference layouts are cached there after).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from evolve.evaluators.code_layout import CodeLayoutEvaluator, perfstat
from evolve.evaluators.code_layout.callgrind import parse
from evolve.evaluators.code_layout.candidate import ask_candidate, check_order
from evolve.evaluators.code_layout.jobs import plan_for, run_driver
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.plugin.stages import Runner, StageFailed
from evolve.sandboxes import ProcessSandbox

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "code_layout_lua"
TOOLS = ("clang-19", "ld.lld-19", "valgrind", "llvm-objdump-19")

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in TOOLS),
    reason="needs clang-19, lld-19, llvm-19 and valgrind (apt-get install clang-19 lld-19 ...)",
)

COUNTED = b"""
#include <stdio.h>
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int middle(int x) { return leaf(x) + leaf(x + 1); }
__attribute__((noinline)) int depth(int n) { return n ? depth(n - 1) + 1 : 0; }
int main(void) {
  int total = depth(5);
  for (int i = 0; i < 7; i++) total += middle(i);
  printf("%d\\n", total);
  return 0;
}
"""


def layout(body: str, prelude: str = "") -> Program:
    """A candidate whose order() runs `body` (indented into the function)."""
    text = (
        "# EVOLVE-BLOCK-START\n"
        + textwrap.dedent(prelude)
        + "def order(functions, calls):\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + "\n# EVOLVE-BLOCK-END\n"
    )
    return Program({"layout.py": text})


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture(scope="module")
def evaluator(sandbox: ProcessSandbox) -> CodeLayoutEvaluator:
    """The Lua task's evaluator, prepared: the seed scored once."""
    made = CodeLayoutEvaluator({"program": "lua"}, TASK_DIR)
    made.limits = Limits(timeout_s=300)
    made.prepare(Program.from_paths([TASK_DIR / "layout.py"], TASK_DIR), sandbox, TASK_DIR)
    return made


@pytest.fixture(scope="module")
def seed_result(evaluator: CodeLayoutEvaluator, sandbox: ProcessSandbox):
    seed = Program.from_paths([TASK_DIR / "layout.py"], TASK_DIR)
    return evaluator.evaluate(seed, sandbox, seed=1)


def test_the_parser_reads_callgrinds_counts_of_a_known_program(tmp_path: Path) -> None:
    source = tmp_path / "counted.c"
    source.write_bytes(COUNTED)
    binary = tmp_path / "counted"
    subprocess.run(["clang-19", "-O0", "-no-pie", "-o", str(binary), str(source)], check=True)
    out = tmp_path / "cg.out"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=yes",
         "--dump-line=no", "--compress-strings=no", "--compress-pos=no", "--separate-recs=1",
         str(binary)],
        check=True, capture_output=True,
    )  # fmt: skip
    with open(out) as text:
        profile = parse(text, "/counted")
    assert profile.calls[("main", "middle")] == 7
    assert profile.calls[("middle", "leaf")] == 14
    assert profile.calls[("main", "depth")] == 1 and profile.calls[("depth", "depth")] == 5
    assert not [name for name in profile.self_cost if "'" in name]  # no "depth'2" levels
    assert not any("printf" in callee for _, callee in profile.calls)  # libc's edges are not ours
    assert profile.self_cost["leaf"] > 0 and profile.self_cost["middle"] > 0
    assert profile.totals["Ir"] > sum(profile.self_cost.values())  # totals count libc too
    assert all(address < 0x1000000 for address in profile.addresses)  # the program's text only


def test_the_seed_scores_with_both_splits_and_the_references(seed_result) -> None:
    assert seed_result.ok, seed_result.feedback
    metrics = seed_result.metrics
    for name in ("i1_ratio", "heldout_i1_ratio", "lines_ratio", "heldout_pages_ratio"):
        assert 0 < metrics[name] < 2, name
    assert metrics["train_i1"] > 0 and metrics["heldout_pages"] > 0
    assert "lld cdsort: train i1_ratio" in seed_result.feedback
    assert seed_result.counters["train.I1_misses"].source.startswith("callgrind")
    assert seed_result.counters["train.I1_misses"].value == metrics["train_i1"]


def test_hidden_and_recursive_functions_are_in_the_hot_set(evaluator: CodeLayoutEvaluator) -> None:
    """Lua's interpreter loop is hidden (objdump writes ".hidden luaV_execute") and recursive:
    it must be hot, and so must the recursive descent of Lua's parser."""
    hot = set(evaluator.ready.training.hot)
    assert {"luaV_execute", "luaD_precall", "luaH_get", "subexpr"} <= hot
    assert not [name for name in hot if name.startswith(".") or "'" in name]


def test_the_link_with_the_seeds_order_is_byte_identical_across_runs(
    evaluator: CodeLayoutEvaluator, sandbox: ProcessSandbox
) -> None:
    run = Runner(sandbox, evaluator.limits)
    training = evaluator.ready.training
    seed = Program.from_paths([TASK_DIR / "layout.py"], TASK_DIR)
    names = ask_candidate(run, evaluator.params, seed, training.functions, training.calls)
    evaluator.measured.clear()
    first = evaluator.measure(run, evaluator.ready, names)
    evaluator.measured.clear()
    second = evaluator.measure(run, evaluator.ready, names)
    assert second.binary_sha256 == first.binary_sha256 != evaluator.ready.baseline.binary_sha256
    timings = ("wall_s", "callgrind_s")
    for name, record in first.workloads.items():  # every simulated count repeats exactly
        again = second.workloads[name]
        assert {k: v for k, v in record.items() if k not in timings} == {
            k: v for k, v in again.items() if k not in timings
        }


@pytest.mark.parametrize(
    ("body", "prelude", "expected"),
    [
        ("while True:\n    pass", "", "order\\(\\) took longer than 10 s"),
        ('raise RuntimeError("boom")', "", "(?s)order\\(\\) raised.*RuntimeError: boom"),
        ("return [10**100]", "", "returned a value of type int at position 0"),
        ("return {'a': 1}", "", "returned a value of type dict; it must return a list"),
        ("return None", "", "returned a value of type NoneType"),
        ("return [f['name'] for f in functions][1:]", "", "leaves out 1 hot function: "),
        ("return [f['name'] for f in functions] + ['evil; rm -rf /']", "",
         "names what is not a hot function \\(1\\): 'evil; rm -rf /'"),
        ("names = [f['name'] for f in functions]\nreturn names + names[:2]", "", "repeats 2 names"),
        ("return []", "raise SystemExit(3)\n", "importing candidate/layout.py raised"),
        ("return []", "import time\ntime.sleep(60)\n", "importing .* took longer than 5 s"),
        ("import os\nos._exit(0)", "", "without an order"),
        ("import os\nfor fd in range(256):\n    try: os.close(fd)\n    except OSError: pass\n"
         "return []", "", "leaves out"),
        ("import os, time\nif os.fork() == 0:\n    time.sleep(60)\nreturn []", "",
         "left processes behind"),
        ("import os\nopen('order.json', 'w').write('[' * 100000 + ']' * 100000)\nos._exit(0)", "",
         "order.json is not JSON that this evaluator reads"),
        ("raise RuntimeError('bad \\ud800 name')", "", r"RuntimeError: bad \\ud800 name"),
    ],
    ids=["infinite-loop", "exception", "huge-int", "not-a-list", "none", "leaves-out", "invents",
         "repeats", "exit-on-import", "slow-import", "kills-runner", "closes-fds", "forks",
         "deep-json", "lone-surrogate"],
)  # fmt: skip
def test_a_hostile_order_fails_with_feedback_and_is_never_measured(
    evaluator: CodeLayoutEvaluator, sandbox: ProcessSandbox, body: str, prelude: str, expected: str
) -> None:
    measured_before = len(evaluator.measured)
    result = evaluator.evaluate(layout(body, prelude), sandbox, seed=1)
    assert result.status == "order_failed", result.feedback
    assert re.search(expected, result.feedback), result.feedback
    assert "i1_ratio" not in result.metrics
    assert len(evaluator.measured) == measured_before
    result.feedback.encode("utf-8")  # storable: no lone surrogate from the candidate


def test_an_order_that_swallows_the_alarm_is_stopped_by_the_sandbox(
    evaluator: CodeLayoutEvaluator, sandbox: ProcessSandbox
) -> None:
    stubborn = layout(
        """\
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
        """
    )
    patient = evaluator.limits
    evaluator.limits = replace(patient, timeout_s=3)
    try:
        result = evaluator.evaluate(stubborn, sandbox, seed=1)
    finally:
        evaluator.limits = patient
    assert result.status == "timeout"
    assert "the candidate's run ran past its time limit of 3 s (sandbox.timeout_s)" in (
        result.feedback
    )


def test_files_an_order_writes_never_reach_the_measurement(
    evaluator: CodeLayoutEvaluator, sandbox: ProcessSandbox
) -> None:
    """The candidate plants a program, a report, objects and workloads where the trusted run
    would look for them, then returns the hot functions in input order: the counts that come
    back are those of the same order returned by an honest candidate."""
    planted = layout(
        """\
        import os
        for path in ("prog", "report.json", "order.txt", "objects/lvm.o",
                     "workloads/train-closures_oop.lua", "/tmp/report.json"):
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as out:
                out.write('{"failure": null, "workloads": []}')
        return [f["name"] for f in functions]
        """
    )
    evaluator.measured.clear()
    result = evaluator.evaluate(planted, sandbox, seed=1)
    assert result.ok, result.feedback
    evaluator.measured.clear()
    honest = evaluator.evaluate(layout('return [f["name"] for f in functions]'), sandbox, seed=1)
    assert honest.ok, honest.feedback
    simulated = ("i1_ratio", "heldout_i1_ratio", "train_i1", "train_lines", "heldout_pages")
    assert {m: result.metrics[m] for m in simulated} == {m: honest.metrics[m] for m in simulated}


def test_a_changed_output_fails_the_guard(evaluator: CodeLayoutEvaluator, sandbox) -> None:
    name = next(iter(evaluator.workloads["heldout"]))
    kept = evaluator.ready.references[name]
    evaluator.ready.references[name] = {**kept, "sha256": "0" * 64}
    linkers = layout('return [f["name"] for f in functions]')
    try:
        result = evaluator.evaluate(linkers, sandbox, seed=1)
    finally:
        evaluator.ready.references[name] = kept
    assert result.status == "measure_failed"
    assert f"workload {name}: the output differs from the default build's" in result.feedback


def test_check_order_names_every_kind_of_mistake() -> None:
    with pytest.raises(StageFailed) as failure:
        check_order(["a", "a", "x" * 500], ["a", "b"])
    message = str(failure.value)
    assert "leaves out 1 hot function: 'b'" in message
    assert "names what is not a hot function (1)" in message and "x" * 61 not in message
    assert "repeats 1 name: 'a'" in message
    check_order(["b", "a"], ["a", "b"])


def test_a_failing_link_is_reported_by_the_trusted_driver(
    evaluator: CodeLayoutEvaluator, sandbox: ProcessSandbox
) -> None:
    plan = plan_for(
        evaluator.params, "measure", ordering={}, **{**evaluator.ready.common, "libs": []}
    )
    with pytest.raises(StageFailed, match="linking failed"):
        run_driver(Runner(sandbox, evaluator.limits), plan, evaluator.ready.shipped)


def test_bad_params_fail_at_load_time(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="program"):
        CodeLayoutEvaluator({"program": "emacs"}, TASK_DIR)
    with pytest.raises(ValidationError, match="i1"):
        CodeLayoutEvaluator({"program": "lua", "i1": "16k"}, TASK_DIR)
    with pytest.raises(ValidationError, match="extra"):
        CodeLayoutEvaluator({"program": "lua", "order_timeout": 3}, TASK_DIR)
    (tmp_path / "workloads" / "train").mkdir(parents=True)
    with pytest.raises(ValueError, match="no train workloads"):
        CodeLayoutEvaluator({"program": "lua"}, tmp_path)


@pytest.mark.parametrize(
    ("heldout", "params", "expected"),
    [
        ("print(2)\nos.exit(3)\n", {}, "workload heldout-w exits with code 3 in the default"),
        (
            "while true do end\n",
            {"workload_timeout_s": 1},
            "workload heldout-w took longer than 1 s",
        ),
    ],
    ids=["fails", "hangs"],
)
def test_a_workload_that_fails_or_hangs_in_the_default_build_is_refused_at_prepare(
    tmp_path: Path, sandbox: ProcessSandbox, heldout: str, params: dict, expected: str
) -> None:
    for split, text in (("train", "print(1)\n"), ("heldout", heldout)):
        (tmp_path / "workloads" / split).mkdir(parents=True)
        (tmp_path / "workloads" / split / "w.lua").write_text(text)
    made = CodeLayoutEvaluator({"program": "lua", **params}, tmp_path)
    made.limits = Limits(timeout_s=300)
    seed = Program.from_paths([TASK_DIR / "layout.py"], TASK_DIR)
    with pytest.raises(StageFailed, match=expected):
        made.prepare(seed, sandbox, tmp_path)


def test_a_workload_that_does_not_repeat_is_refused_at_prepare(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    """Its output is the same every run, but the work it does follows the clock."""
    for split, text in (
        ("train", "local s = 0\nfor i = 1, 20000 do s = s + i % 7 end\nprint(s)\n"),
        ("heldout", "for i = 1, math.floor(os.clock() * 1e7) % 5000 + 1 do end\nprint('ok')\n"),
    ):
        (tmp_path / "workloads" / split).mkdir(parents=True)
        (tmp_path / "workloads" / split / "w.lua").write_text(text)
    made = CodeLayoutEvaluator({"program": "lua"}, tmp_path)
    made.limits = Limits(timeout_s=300)
    seed = Program.from_paths([TASK_DIR / "layout.py"], TASK_DIR)
    with pytest.raises(RuntimeError, match=r"do not repeat exactly.*heldout-w \(instructions"):
        made.prepare(seed, sandbox, tmp_path)


def test_perf_counts_are_read_with_modifiers_and_hybrid_cores_and_refused_when_missing() -> None:
    events = ["iTLB-load-misses", "L1-icache-load-misses"]
    plain = "1200,,iTLB-load-misses:u,1000,100.00,,\n3400,,L1-icache-load-misses:u,1000,100.00,,"
    assert perfstat.counts(plain, events) == (
        {"iTLB-load-misses": 1200.0, "L1-icache-load-misses": 3400.0},
        "perf",
    )
    hybrid = (
        "1000,,cpu_core/iTLB-load-misses/,1,100.00,,\n200,,cpu_atom/iTLB-load-misses/,1,100.00,,\n"
        "5,,cpu_core/L1-icache-load-misses/,1,100.00,,"
    )
    assert perfstat.counts(hybrid, events)[0] == {
        "iTLB-load-misses": 1200.0,
        "L1-icache-load-misses": 5.0,
    }
    unsupported = "<not supported>,,iTLB-load-misses:u,0,100.00,,"
    assert perfstat.counts(unsupported, events) == (
        {},
        "unavailable: perf reports iTLB-load-misses as <not supported>",
    )
    counts, why = perfstat.counts("Error:\nNo permission to enable iTLB-load-misses event.", events)
    assert counts == {} and why.startswith("unavailable: perf stat failed: Error:")
