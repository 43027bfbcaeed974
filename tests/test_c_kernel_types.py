"""c_kernel tasks beyond float32 matrices: declared dtypes, generated harnesses, compare
regions, integer exactness and the buffer layout, with real gcc and the real process
sandbox; and the mistakes in a task that must stop it while it loads, each with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from evolve.evaluators.c_kernel import metrics
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.plugin.taskpaths import TaskPathError
from evolve.sandboxes import ProcessSandbox
from evolve.task.loading import load_task
from evolve.task.problems import TaskFileError
from tests.conftest import c_kernel_task, draft_kernel

HISTOGRAM_REFERENCE = """
import numpy as np

def make_inputs(rng, sizes):
    return [(rng.integers(0, 40, sizes["n"]) ** 2 % 256).astype(np.uint8)]

def reference(inputs, sizes):
    return np.bincount(inputs[0], minlength=256).astype(np.uint32)

def work(sizes):
    return sizes["n"]
"""
HISTOGRAM_SIGNATURE = (
    "void histogram(int n, const uint8_t *restrict data, uint32_t *restrict counts)"
)
HISTOGRAM = {
    "reference": "reference.py",
    "entry": "histogram",
    "signature": HISTOGRAM_SIGNATURE,
    "inputs": [{"name": "data", "dtype": "uint8"}],
    "outputs": [{"name": "counts", "dtype": "uint32"}],
    "sizes": {"n": 1000},
    "work_unit": "bytes",
}


def histogram_kernel(after: str = "", signature: str = HISTOGRAM_SIGNATURE) -> str:
    return f"""{signature} {{
  for (int v = 0; v < 256; v++) counts[v] = 0;
  for (int i = 0; i < n; i++) counts[data[i]]++;
  {after}
}}"""


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def test_a_uint8_histogram_with_uint32_counts_passes(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    evaluator = c_kernel_task(tmp_path, HISTOGRAM_REFERENCE, HISTOGRAM)
    result = draft_kernel(evaluator, sandbox, histogram_kernel())
    assert result.status == "ok", result.feedback
    trial = evaluator.oracle.trial(1, HISTOGRAM["sizes"])
    assert len(trial.inputs) == 1000 and trial.io_args() == ["in=1000", "out=1024"]
    assert evaluator.metric_problem("bytes_per_s") is None


def test_wrong_counts_fail_naming_the_output_and_the_bin(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    evaluator = c_kernel_task(tmp_path, HISTOGRAM_REFERENCE, HISTOGRAM)
    result = draft_kernel(evaluator, sandbox, histogram_kernel("counts[7] += 1;"))
    assert result.status == "check_failed"
    assert "output `counts`" in result.feedback and "index 7" in result.feedback
    assert "integers must match exactly" in result.feedback
    assert "poison" not in result.feedback


def test_a_count_never_written_is_named_as_the_poison(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    """counts[255] starts as 0xffffffff: the kernel below counts into it without zeroing it."""
    evaluator = c_kernel_task(tmp_path, HISTOGRAM_REFERENCE, HISTOGRAM)
    body = f"""{HISTOGRAM_SIGNATURE} {{
  for (int v = 0; v < 255; v++) counts[v] = 0;
  for (int i = 0; i < n; i++) if (data[i] != 255) counts[data[i]]++;
}}"""
    result = draft_kernel(evaluator, sandbox, body)
    assert result.status == "check_failed"
    assert "index 255" in result.feedback and "got 4294967295" in result.feedback
    assert "(the poison value: was it written?)" in result.feedback


def test_an_integer_output_off_by_one_fails_even_with_loose_task_tolerances(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    loose = c_kernel_task(
        tmp_path / "loose", HISTOGRAM_REFERENCE, {**HISTOGRAM, "rtol": 0.5, "atol": 8}
    )
    result = draft_kernel(loose, sandbox, histogram_kernel("counts[0] += 1;"))
    assert result.status == "check_failed" and "index 0" in result.feedback
    own = [{"name": "counts", "dtype": "uint32", "atol": 1}]  # the output's own tolerance
    tolerant = c_kernel_task(tmp_path / "own", HISTOGRAM_REFERENCE, {**HISTOGRAM, "outputs": own})
    assert draft_kernel(tolerant, sandbox, histogram_kernel("counts[0] += 1;")).status == "ok"


def test_a_definition_that_conflicts_with_the_signature_does_not_build(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    evaluator = c_kernel_task(tmp_path, HISTOGRAM_REFERENCE, HISTOGRAM)
    floats = "void histogram(int n, const float *restrict data, uint32_t *restrict counts)"
    result = draft_kernel(evaluator, sandbox, histogram_kernel(signature=floats))
    assert result.status == "build_failed"
    assert "conflicting types for" in result.feedback and "histogram" in result.feedback


def test_a_missing_entry_is_named_before_any_advice_about_static(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    evaluator = c_kernel_task(tmp_path, HISTOGRAM_REFERENCE, HISTOGRAM)
    body = "int helper(void) { return 1; }\nfloat table[4];"
    result = draft_kernel(evaluator, sandbox, body)
    assert result.status == "build_failed"
    assert "does not define `histogram`" in result.feedback
    assert "helper, table" in result.feedback and "static" not in result.feedback


@pytest.mark.parametrize(
    ("signature", "message"),
    [
        (
            "void histogram(int n, const float *restrict data, uint32_t *restrict counts)",
            "signature: `data` is `const float *` but inputs[0] (data) is uint8: "
            "use `const uint8_t *`",
        ),
        (
            "void histogram(int n, const unsigned char *data, int *counts)",
            "`counts` is `int *` but outputs[0] (counts) is uint32: use `uint32_t *`",
        ),
        ("void histogram(int n, const uint8_t *data)", "no parameter for outputs[0] (counts)"),
        ("int histogram(int n, const uint8_t *data, uint32_t *counts)", "must return void"),
        ("void histogram(float n, const uint8_t *data, uint32_t *counts)", "must be an integer"),
        (
            "void histogram(int m, const uint8_t *data, uint32_t *counts)",
            "`m` is not a pointer, so it must name a size",
        ),
        ("void hist(int n, const uint8_t *data, uint32_t *counts)", "`entry` is `histogram`"),
        ("void histogram(int n, uint8_t *data, const uint32_t *counts)", "which the kernel writes"),
    ],
)
def test_a_signature_that_does_not_fit_the_task_fails_at_load_on_its_line(
    tmp_path: Path, signature: str, message: str
) -> None:
    text = task_file(tmp_path, {**HISTOGRAM, "signature": signature})
    with pytest.raises(TaskFileError) as caught:
        load_task(text)
    assert caught.value.field == "evaluator.params.signature"
    assert caught.value.line == line_of(text, "signature:")
    assert message in str(caught.value)


def task_file(folder: Path, params: dict[str, Any], objective: str = "speedup") -> Path:
    """A task.yaml for the histogram reference, one key a line, and a seed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(HISTOGRAM_REFERENCE)
    (folder / "seed.c").write_text(
        f"// EVOLVE-BLOCK-START\n{histogram_kernel()}\n// EVOLVE-BLOCK-END\n"
    )
    spec = {
        "name": "types",
        "seed": "seed.c",
        "evaluator": {"name": "c_kernel", "params": params},
        "objectives": [{"name": objective, "direction": "maximize"}],
        "budget": {"candidates": 2},
        "sandbox": {"backend": "process"},
    }
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, width=1000))
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_an_objective_on_gflops_without_flops_fails_at_load_on_its_line(tmp_path: Path) -> None:
    path = task_file(tmp_path, HISTOGRAM, objective="gflops")
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    assert caught.value.field == "objectives[0].name"
    assert caught.value.line == line_of(path, "gflops")
    assert "flops(sizes)" in caught.value.message
    assert load_task(task_file(tmp_path, HISTOGRAM, objective="bytes_per_s")).spec.objectives


def test_without_an_entry_the_task_fails_at_load(tmp_path: Path) -> None:
    params = {key: value for key, value in HISTOGRAM.items() if key != "entry"}
    with pytest.raises(TaskFileError) as caught:
        load_task(task_file(tmp_path, params))
    assert caught.value.field == "evaluator.params.entry"
    assert caught.value.message == "required but missing"


UNDECLARED_INTEGERS = """
import numpy as np

def make_inputs(rng, sizes):
    return [rng.integers(0, 9, sizes["n"])]

def reference(inputs, sizes):
    return inputs[0] * 2
"""


def test_integer_inputs_of_an_undeclared_task_fail_at_load_saying_to_declare_them(
    tmp_path: Path,
) -> None:
    params = {"reference": "reference.py", "entry": "k", "harness": "harness.c", "sizes": {"n": 8}}
    with pytest.raises(TaskPathError) as caught:
        c_kernel_task(tmp_path, UNDECLARED_INTEGERS, params, **{"harness.c": ""})
    assert caught.value.param == "reference"
    assert "inputs[0] from make_inputs is int64" in caught.value.message
    assert "declares no `inputs`, so it is float32" in caught.value.message


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("def make_inputs(rng, sizes)\n    return []\n", "reference.py:1: SyntaxError"),
        ("import numpy\nLIMIT = 1 / 0\n", "reference.py:2 (in <module>): ZeroDivisionError"),
        ("def make_inputs(rng, sizes):\n    return []\n", "lacks reference"),
        (
            "import numpy as np\n"
            "def make_inputs(rng, sizes):\n"
            "    return [rng.random(sizes['m'])]\n"
            "def reference(inputs, sizes):\n"
            "    return inputs[0]\n",
            "reference.py:3 (in make_inputs): KeyError: 'm' (at sizes {'n': 8})",
        ),
        (
            "import numpy as np\n"
            "def make_inputs(rng, sizes):\n"
            "    return [rng.random(sizes['n'])]\n"
            "def reference(inputs, sizes):\n"
            "    return inputs[0].astype(np.int32)\n",
            "declares no `outputs`, so it is float32",
        ),
    ],
)
def test_a_broken_reference_is_one_clear_line_at_load(
    tmp_path: Path, reference: str, expected: str
) -> None:
    params = {"reference": "reference.py", "entry": "k", "harness": "harness.c", "sizes": {"n": 8}}
    with pytest.raises(TaskPathError) as caught:
        c_kernel_task(tmp_path, reference, params, **{"harness.c": ""})
    assert caught.value.param == "reference"
    assert expected in caught.value.message


def test_declared_counts_and_dtypes_must_fit_what_the_reference_returns(tmp_path: Path) -> None:
    outputs = [*HISTOGRAM["outputs"], {"name": "total", "dtype": "int64"}]
    signature = HISTOGRAM_SIGNATURE.replace(")", ", int64_t *total)")
    two = {**HISTOGRAM, "outputs": outputs, "signature": signature}
    with pytest.raises(TaskPathError, match=r"returned 1 array\(s\), but `outputs` declares 2"):
        c_kernel_task(tmp_path / "count", HISTOGRAM_REFERENCE, two)
    narrow = {**HISTOGRAM, "outputs": [{"name": "counts", "dtype": "int8"}], "sizes": {"n": 10**5}}
    signature = "void histogram(int n, const uint8_t *data, int8_t *counts)"
    with pytest.raises(TaskPathError, match=r"int8 .* cannot represent exactly"):
        c_kernel_task(tmp_path / "narrow", HISTOGRAM_REFERENCE, {**narrow, "signature": signature})


def test_the_evaluator_page_tables_name_every_param_and_every_metric() -> None:
    """A new user writes a task from the evaluator's page alone: nothing may be missing there."""
    page = Path(__file__).resolve().parents[1] / "docs" / "evaluators" / "c_kernel.md"
    text = page.read_text()
    section = text[text.index("## Writing a `c_kernel` task") :]
    params = section[section.index("**Every param**") : section.index("**Every metric**")]
    table = [line for line in params.splitlines() if line.startswith("| `")]
    documented = {name for line in table for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert documented == set(CKernelParams.model_fields)
    stages = section.index("## The `c_kernel` stages")
    metrics_table = section[section.index("**Every metric**") : stages]
    rows = [line.split("|")[1].strip() for line in metrics_table.splitlines() if "| `" in line]
    assert rows == [
        f"`{name}`"
        for name in (*metrics.ALWAYS[:7], "gflops", "<work_unit>_per_s", *metrics.ALWAYS[7:])
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"harness": "harness.c"}, "not both"),
        ({"signature": None}, "give `signature`"),
        ({"inputs": None}, "declare `inputs` and `outputs`"),
        ({"sizes": {"in": 4}}, "other than `in`, `out` and keywords"),
        ({"outputs": [{"name": "data", "dtype": "uint32"}]}, "a name of its own: ['data']"),
        ({"inputs": [{"name": "data", "dtype": "uint9"}]}, "inputs.0.dtype"),
        ({"outputs": [{"name": "counts", "dtype": "uint32", "cmp": "1:"}]}, "outputs.0.cmp"),
    ],
)
def test_params_that_contradict_each_other_fail_validation(
    change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        CKernelParams.model_validate({**HISTOGRAM, **change})
    assert message in str(caught.value)
