"""Counter collection with the real process sandbox, real perf and real valgrind.

What the machine supports decides the source: perf where the CPU's counters are readable,
else cachegrind. Tests that need cachegrind itself skip where valgrind is not installed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from evolve.evaluators.c_kernel import CKernelEvaluator, counter_sizes
from evolve.evaluators.c_kernel.counter_budget import CounterBudget
from evolve.evaluators.c_kernel.counters import describe
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.plugin.counters import (
    CACHEGRIND,
    NONE,
    PERF,
    CounterSpec,
    detect_source,
    measure_counters,
    parse_cachegrind,
    parse_perf_csv,
    perf_saw_a_signal,
)
from evolve.plugin.program import Program
from evolve.plugin.results import Counter, EvalResult, StageResult
from evolve.plugin.sandbox import Limits, RunResult
from evolve.plugin.stages import Runner
from evolve.sandboxes.process import ProcessSandbox
from evolve.task.loading import TaskFileError, load_task
from evolve.task.schema import TaskSpec

TASK_DIR = Path(__file__).resolve().parent.parent / "tasks" / "matmul_c"
LIMITS = Limits(timeout_s=60)
needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="no valgrind")

PERF_COUNTED = """\
# started on Mon Nov 23 10:00:00 2026

123456789,,instructions:u,1000512,100.00,1.52,insn per cycle
81234567,,cycles:u,1000512,100.00,,
<not supported>,,cache-misses:u,0,100.00,,
<not counted>,,branch-misses:u,0,0.00,,
"""

PERF_HYBRID = """\
1000,,cpu_core/instructions/u,5000,100.00,,
200,,cpu_atom/instructions/u,900,100.00,,
<not counted>,,cpu_atom/cycles/u,0,0.00,,
"""

PERF_UNSUPPORTED = """\
# started on Sun Nov 22 00:49:40 2026

<not supported>,,instructions,0,100.00,,
<not supported>,,cycles,0,100.00,,
"""

CACHEGRIND_OUT = """\
desc: I1 cache:         32768 B, 64 B, 8-way associative
desc: D1 cache:         49152 B, 64 B, 12-way associative
desc: LL cache:         2097152 B, 64 B, 16-way associative
cmd: ./kernel check n=32
events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
fl=kernel.c
fn=matmul
3 1000 5 4 300 20 3 100 7 2
summary: 5000 50 40 1200 30 20 600 10 5
"""

# Reads and writes a 4 MiB buffer a few times, so every counter has something to count.
BUSY_C = b"""#include <stdlib.h>
int main(int argc, char **argv) {
  size_t n = 1 << 20;
  int *a = calloc(n, sizeof *a);
  long sum = 0;
  for (int r = 0; r < 3; r++)
    for (size_t i = 0; i < n; i++) { a[i] += (int)i; sum += a[(i * 4099) % n]; }
  if (argc > 1) abort();
  return sum == 42;
}
"""


def test_perf_csv_keeps_counted_events_and_skips_the_rest() -> None:
    assert parse_perf_csv(PERF_COUNTED) == {"instructions": 123456789.0, "cycles": 81234567.0}


def test_perf_csv_sums_a_hybrid_cpus_cores() -> None:
    assert parse_perf_csv(PERF_HYBRID) == {"instructions": 1200.0}


def test_perf_csv_with_nothing_supported_is_empty_not_zero() -> None:
    assert parse_perf_csv(PERF_UNSUPPORTED) == {}


def test_a_signal_perf_only_mentions_on_stderr_is_noticed() -> None:
    assert perf_saw_a_signal(b"noise\n./kernel: Segmentation fault\n", "./kernel")
    assert not perf_saw_a_signal(b"./kernel: all good\n", "./kernel")


def test_cachegrind_summary_maps_to_named_counters() -> None:
    assert parse_cachegrind(CACHEGRIND_OUT) == {
        "instructions": 5000.0,
        "I1_misses": 50.0,
        "data_reads": 1200.0,
        "D1_read_misses": 30.0,
        "data_writes": 600.0,
        "D1_write_misses": 10.0,
        "LL_misses": 40.0 + 20.0 + 5.0,
    }


def test_cachegrind_without_cache_simulation_gives_what_it_has() -> None:
    assert parse_cachegrind("events: Ir\nsummary: 77\n") == {"instructions": 77.0}


@pytest.mark.parametrize(
    ("text", "reason"),
    [("events: Ir Dr\n", "no summary"), ("events: Ir Dr\nsummary: 1\n", "2 events but 1")],
)
def test_a_malformed_cachegrind_file_says_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_cachegrind(text)


def test_an_event_list_perf_would_misread_is_refused() -> None:
    with pytest.raises(ValueError, match="without commas"):
        CounterSpec(("cpu/event=0x3c,umask=0/",))


def perf_counts_here() -> bool:
    """Asked of perf directly, not through the code under test."""
    if shutil.which("perf") is None:
        return False
    done = subprocess.run(
        ["perf", "stat", "-x,", "-e", "instructions", "--", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if "instructions" in line]
    return bool(lines) and lines[0].split(",")[0].isdigit()


class CountingSandbox(ProcessSandbox):
    """The process sandbox, counting its runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        self.runs += 1
        return super().run(argv, files=files, limits=limits, collect=collect)


@pytest.mark.system
def test_detect_source_finds_what_this_machine_supports_once_per_sandbox() -> None:
    sandbox = CountingSandbox()
    expected = PERF if perf_counts_here() else CACHEGRIND if shutil.which("valgrind") else NONE
    assert detect_source(sandbox, LIMITS) == expected
    probes = sandbox.runs
    assert detect_source(sandbox, LIMITS) == expected
    assert sandbox.runs == probes


@pytest.fixture(scope="module")
def busy() -> bytes:
    built = ProcessSandbox().run(
        ["gcc", "-O1", "busy.c", "-o", "busy"],
        files={"busy.c": BUSY_C},
        limits=LIMITS,
        collect=["busy"],
    )
    assert built.ok, built.stderr
    return built.files["busy"]


@needs_valgrind
@pytest.mark.system
def test_cachegrind_counts_are_identical_run_to_run(busy: bytes) -> None:
    sandbox = ProcessSandbox()
    first, second = (
        measure_counters(
            sandbox, ["./busy"], files={"busy": busy}, limits=LIMITS, source=CACHEGRIND
        )
        for _ in range(2)
    )
    assert first.problem is None, first.problem
    assert first.counters["instructions"].value > 3 * (1 << 20)
    assert first.counters == second.counters
    assert {counter.source for counter in first.counters.values()} == {CACHEGRIND}
    assert first.result.files == {}  # the tool's file is consumed, not handed on


@needs_valgrind
@pytest.mark.system
def test_a_run_that_crashes_gives_no_counters_however_much_it_counted(busy: bytes) -> None:
    crashed = measure_counters(
        ProcessSandbox(),
        ["./busy", "crash"],
        files={"busy": busy},
        limits=LIMITS,
        source=CACHEGRIND,
    )
    assert crashed.counters == {}
    assert crashed.problem is not None and "signal 6" in crashed.problem


@pytest.mark.system
def test_an_unknown_source_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="unknown counter source"):
        measure_counters(ProcessSandbox(), ["true"], files={}, limits=LIMITS, source="ncu")


# c_kernel: the counters stage after measure.

SIGNATURE = (
    "void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C)"
)


def evaluator(**overrides: object) -> CKernelEvaluator:
    spec = TaskSpec.model_validate(yaml.safe_load((TASK_DIR / "task.yaml").read_text()))
    params = {**spec.evaluator.params, "sizes": {"n": 64}, "counter_sizes": {"n": 32}}
    made = CKernelEvaluator({**params, **overrides}, TASK_DIR)
    made.limits = spec.sandbox.limits()
    return made


def seed_program() -> Program:
    return Program.from_paths([TASK_DIR / "seed.c"], TASK_DIR)


@pytest.fixture(scope="module")
def prepared() -> CKernelEvaluator:
    made = evaluator()
    made.prepare(seed_program(), ProcessSandbox(), TASK_DIR)
    if made.counter_source == NONE:
        pytest.skip("neither perf nor valgrind can count here")
    return made


@pytest.mark.system
def test_the_seed_is_counted_with_its_source_and_compared_with_itself(
    prepared: CKernelEvaluator,
) -> None:
    sandbox = ProcessSandbox()
    source = detect_source(sandbox, LIMITS)
    assert prepared.counter_source == source
    result = prepared.evaluate(seed_program(), sandbox, seed=7)
    assert result.status == "ok", result.feedback
    assert [s.name for s in result.stages][-2:] == ["measure", "counters"]
    assert result.counters["instructions"].value > 32**3
    assert {counter.source for counter in result.counters.values()} == {source}
    assert f"[counters] counters ({source}" in result.feedback and "n=32" in result.feedback
    assert "vs seed: instructions" in result.feedback
    if source == CACHEGRIND:
        assert "simulated" in result.feedback
        assert result.counters["instructions"] == prepared.seed_counters["instructions"]


@pytest.mark.system
def test_a_kernel_wrong_only_when_counted_keeps_its_status_but_loses_its_counters(
    prepared: CKernelEvaluator,
) -> None:
    """n=32 is only ever the counted call: checked and timed calls run at n=64."""
    body = f"""{SIGNATURE} {{
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {{
      float sum = 0.0f;
      for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
      C[i * n + j] = n == 32 ? 0.5f : sum;
    }}
}}"""
    program = Program({"kernel.c": f"// EVOLVE-BLOCK-START\n{body}\n// EVOLVE-BLOCK-END\n"})
    result = prepared.evaluate(program, ProcessSandbox(), seed=7)
    assert result.status == "ok", result.feedback
    assert result.counters == {}
    assert "counters discarded" in result.feedback and "row 0, col 0" in result.feedback


@pytest.mark.system
def test_counters_off_means_no_stage() -> None:
    made = evaluator(counters=False)
    made.prepare(seed_program(), ProcessSandbox(), TASK_DIR)
    result = made.evaluate(seed_program(), ProcessSandbox(), seed=1)
    assert [s.name for s in result.stages][-1] == "measure"
    assert result.counters == {}


def test_counter_sizes_must_name_the_same_sizes() -> None:
    with pytest.raises(ValidationError, match="counter_sizes"):
        evaluator(counter_sizes={"m": 32})


def test_perf_readings_read_as_measured_with_ipc() -> None:
    counters = {
        "instructions": Counter(2.0e9, PERF),
        "cycles": Counter(1.0e9, PERF),
        "cache-misses": Counter(3.0e5, PERF),
    }
    seed = {"instructions": Counter(5.0e9, PERF)}
    assert describe(counters, PERF, {"n": 512}, seed) == (
        "counters (perf, n=512, one call): instructions 2e9, cycles 1e9 (IPC 2.00), "
        "cache-misses 3e5; vs seed: instructions -60.0%"
    )


@pytest.mark.system
def test_the_estimated_cycles_are_identical_for_one_binary_on_fresh_inputs() -> None:
    """The deterministic score: a loaded machine changes times, never these counts."""
    made = evaluator(counters="always", counter_tool="cachegrind")
    made.prepare(seed_program(), ProcessSandbox(), TASK_DIR)
    if made.counter_source != CACHEGRIND:
        pytest.skip("valgrind is not installed here")
    first, second = (made.evaluate(seed_program(), ProcessSandbox(), seed=s) for s in (3, 4))
    assert first.ok and second.ok, first.feedback + second.feedback
    assert first.metrics["est_cycles"] == second.metrics["est_cycles"] > 32**3
    assert first.metrics["est_speedup"] == 1.0
    counts = {name: c.value for name, c in first.counters.items()}
    assert (
        first.metrics["est_cycles"]
        == counts["instructions"]
        + 10 * (counts["I1_misses"] + counts["D1_read_misses"] + counts["D1_write_misses"])
        + 100 * counts["LL_misses"]
    )


def test_promising_counts_candidates_within_reach_and_every_nth() -> None:
    budget = CounterBudget(
        CKernelParams.model_validate(
            {
                "harness": "h.c",
                "reference": "r.py",
                "entry": "k",
                "counter_reach": 0.5,
                "counter_every": 4,
            }
        )
    )
    assert budget.skip_reason({"speedup": 3.0}) is None  # beats the best so far (the seed, 1x)
    skipped = budget.skip_reason({"speedup": 1.0})
    assert skipped is not None and "below 50%" in skipped and "3x" in skipped
    assert budget.skip_reason({"speedup": 2.0}) is None  # within reach of 3x
    assert budget.skip_reason({"speedup": 0.1}) is None  # the 4th passing one


@pytest.mark.parametrize(
    ("objective", "params", "says"),
    [
        ("est_cycles", "", "counters: always"),
        ("est_speedup", "counters: always", "counter_tool: cachegrind"),
        ("gflop", "", "not 'gflop'"),
    ],
)
def test_an_objective_the_evaluator_cannot_score_fails_the_task_on_its_line(
    tmp_path: Path, objective: str, params: str, says: str
) -> None:
    task = tmp_path / "task"
    shutil.copytree(TASK_DIR, task)
    text = (task / "task.yaml").read_text()
    text = text.replace(
        "{name: speedup, direction: maximize}", f"{{name: {objective}, direction: minimize}}"
    )
    text = text.replace(
        "    reps: 7\n", f"    reps: 7\n    {params}\n" if params else "    reps: 7\n"
    )
    (task / "task.yaml").write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if f"name: {objective}" in row)
    with pytest.raises(TaskFileError) as error:
        load_task(task / "task.yaml")
    assert f"task.yaml:{line}: objectives[0].name" in str(error.value) and says in str(error.value)


# c_kernel: the counter sizes fitted where a task names none (counter_sizes.py).


def unsized(task_dir: Path = TASK_DIR) -> CKernelEvaluator:
    """The matmul evaluator at n=64 with no counter_sizes, its seed built and a tool found."""
    made = evaluator(counter_sizes=None, counters="always")
    if task_dir != TASK_DIR:
        made = CKernelEvaluator(made.params.model_dump(exclude_none=True), task_dir)
        made.limits = evaluator().limits
    made.prepare(Program.from_paths([task_dir / "seed.c"], task_dir), ProcessSandbox(), task_dir)
    if made.counter_source == NONE:
        pytest.skip("neither perf nor valgrind can count here")
    return made


def fitted(made: CKernelEvaluator, budget_s: float) -> tuple[dict[str, int], dict[str, Counter]]:
    run = Runner(ProcessSandbox(), made.limits)
    return counter_sizes.fit(made.oracle, lambda sizes: made._count_seed(run, sizes), budget_s)


@pytest.mark.system
def test_counting_that_takes_too_long_halves_every_size_down_to_the_limit() -> None:
    made = unsized()
    sizes, counters = fitted(made, budget_s=0.0)
    assert sizes == {"n": 64 // 2**counter_sizes.HALVINGS}
    assert 0 < counters["instructions"].value < made.seed_counters["instructions"].value


@pytest.mark.system
def test_counting_within_the_budget_keeps_the_full_sizes() -> None:
    made = unsized()
    assert made.counted_sizes == {"n": 64}  # n=64 counts in well under 2 s
    sizes, counters = fitted(made, budget_s=float("inf"))
    assert sizes == {"n": 64} and counters["instructions"].value > 64**3


@pytest.mark.system
def test_a_tasks_own_counter_sizes_are_used_as_given(prepared: CKernelEvaluator) -> None:
    sizes, counters = fitted(prepared, budget_s=0.0)
    assert sizes == {"n": 32} and counters


@pytest.mark.system
def test_halving_stops_at_sizes_the_reference_refuses(tmp_path: Path) -> None:
    shutil.copytree(TASK_DIR, tmp_path, dirs_exist_ok=True)
    reference = tmp_path / "reference.py"
    line = '    n = sizes["n"]\n'
    refusal = '    if n < 16:\n        raise ValueError("n must be 16 or more")\n'
    assert line in reference.read_text()
    reference.write_text(reference.read_text().replace(line, line + refusal))
    sizes, counters = fitted(unsized(tmp_path), budget_s=0.0)
    assert sizes == {"n": 16} and counters


@pytest.mark.system
def test_halving_stops_where_the_seeds_counted_call_fails(tmp_path: Path) -> None:
    shutil.copytree(TASK_DIR, tmp_path, dirs_exist_ok=True)
    seed = tmp_path / "seed.c"
    line = "C[i * n + j] += A[i * n + k] * B[k * n + j];"
    wrong = "C[i * n + j] += n < 16 ? 0.5f : A[i * n + k] * B[k * n + j];"
    assert line in seed.read_text()
    seed.write_text(seed.read_text().replace(line, wrong))
    sizes, counters = fitted(unsized(tmp_path), budget_s=0.0)
    assert sizes == {"n": 16} and counters


def stages_taking(measure_s: float, counters_s: float) -> EvalResult:
    return EvalResult.from_stages(
        [StageResult("measure", True, measure_s), StageResult("counters", True, counters_s)]
    )


def test_check_warns_where_counting_takes_longer_than_the_timing() -> None:
    made = evaluator()
    (line,) = made.advice(stages_taking(measure_s=1.5, counters_s=6.25))
    assert "counters stage took 6.2s, longer than the timing (1.5s)" in line
    assert "at n=32" in line and "evaluator.params.counter_sizes" in line
    assert made.advice(stages_taking(measure_s=1.5, counters_s=0.5)) == []
    assert made.advice(EvalResult.from_stages([StageResult("measure", True, 1.0)])) == []
