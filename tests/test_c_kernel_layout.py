"""Where the arrays lie in the driver's buffers and which of their elements are compared:
odd sizes through a hand-written harness, float64 and int16 round trips through a generated
one, and borders left out of the comparison by a `compare` slice or a masked reference.
Real gcc and the real process sandbox."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from evolve.evaluators.c_kernel import CKernelEvaluator, layout, region
from evolve.plugin.taskpaths import TaskPathError
from evolve.sandboxes import ProcessSandbox
from tests.conftest import c_kernel_task, draft_kernel


@pytest.fixture(scope="module")
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


def test_the_layout_rule_pads_every_array_to_64_bytes() -> None:
    assert layout.offsets([52, 52, 52]) == [0, 64, 128] and layout.total([52, 52, 52]) == 180
    assert layout.offsets([64, 1, 0, 3]) == [0, 64, 128, 128]
    packed = layout.pack([np.full(13, 1, np.float32), np.full(3, 2, np.int8)])
    assert len(packed) == 67 and packed[52:64] == bytes(12) and packed[64:] == b"\x02" * 3


# Three inputs of 13 floats and two outputs of odd sizes: every array but the first starts
# where no unpadded packing would put it.
ODD_REFERENCE = """
import numpy as np

def make_inputs(rng, sizes):
    return [rng.uniform(-1, 1, sizes["n"]).astype(np.float32) for _ in range(3)]

def reference(inputs, sizes):
    a, b, c = (x.astype(np.float64) for x in inputs)
    return [a + 2 * b + 3 * c, np.array([7, -8, 9], dtype=np.int32)]
"""
ODD_HARNESS = """
#include "evolve_kernel.h"
void combine(int n, const float *a, const float *b, const float *c, float *sum, int *tag);
static int n;
void evolve_setup(int argc, char **argv) { n = (int)evolve_size(argc, argv, "n"); }
void evolve_call(const void *inputs, void *output) {
  combine(n, evolve_input(inputs, 0), evolve_input(inputs, 1), evolve_input(inputs, 2),
          evolve_output(output, 0), evolve_output(output, 1));
}
"""
ODD_PARAMS = {
    "entry": "combine",
    "harness": "harness.c",
    "sizes": {"n": 13},
    "outputs": [{"name": "sum", "dtype": "float32"}, {"name": "tag", "dtype": "int32"}],
}
COMBINE = """void combine(int n, const float *a, const float *b, const float *c,
             float *sum, int *tag) {
  for (int i = 0; i < n; i++) sum[i] = a[i] + 2 * b[i] + 3 * c[i];
  tag[0] = 7; tag[1] = -8; tag[2] = 9;
}"""


@pytest.mark.parametrize("n", [13, 5])  # 52 and 20 bytes: 16- or 32-byte steps put 20 elsewhere
def test_odd_sizes_reach_a_hand_written_harness_at_the_stated_offsets(
    tmp_path: Path, sandbox: ProcessSandbox, n: int
) -> None:
    params = {**ODD_PARAMS, "sizes": {"n": n}}
    evaluator = c_kernel_task(tmp_path, ODD_REFERENCE, params, **{"harness.c": ODD_HARNESS})
    counts = ",".join([str(4 * n)] * 3)
    assert evaluator.oracle.trial(1, {"n": n}).io_args() == [f"in={counts}", f"out={4 * n},12"]
    result = draft_kernel(evaluator, sandbox, COMBINE)
    assert result.status == "ok", result.feedback
    wrong = draft_kernel(evaluator, sandbox, COMBINE.replace("tag[2] = 9", "tag[2] = 10"))
    assert wrong.status == "check_failed"
    assert "output `tag`" in wrong.feedback and "index 2: expected 9, got 10" in wrong.feedback


def test_an_index_past_the_arrays_stops_the_driver(tmp_path: Path, sandbox: ProcessSandbox) -> None:
    harness = ODD_HARNESS.replace("evolve_input(inputs, 2)", "evolve_input(inputs, 3)")
    evaluator = c_kernel_task(tmp_path, ODD_REFERENCE, ODD_PARAMS, **{"harness.c": harness})
    result = draft_kernel(evaluator, sandbox, COMBINE)
    assert result.status == "check_failed"
    assert "evolve_input(3): the task has 3 such array(s)" in result.feedback


ROUND_TRIP_REFERENCE = """
import numpy as np

def make_inputs(rng, sizes):
    n = sizes["n"]
    return [rng.uniform(-1e300, 1e300, n), rng.integers(-30000, 30000, n)]

def reference(inputs, sizes):
    x, k = inputs
    return (x, (k // 2).astype(np.int16))
"""
ROUND_TRIP = {
    "entry": "halve",
    "signature": "void halve(long n, const double *x, const int16_t *k, double *y, short *h)",
    "inputs": [{"name": "x", "dtype": "float64"}, {"name": "k", "dtype": "int16"}],
    "outputs": [{"name": "y", "dtype": "float64"}, {"name": "h", "dtype": "int16"}],
    "sizes": {"n": 1001},
    "rtol": 0.0,
    "atol": 0.0,
}
HALVE = """void halve(long n, const double *x, const int16_t *k, double *y, short *h) {
  for (long i = 0; i < n; i++) { y[i] = x[i]; h[i] = (short)(k[i] >> 1); }
}"""


def test_float64_and_int16_arrays_make_the_round_trip_exactly(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    """Values near 1e300 survive only as float64, and int64 draws become int16 exactly."""
    evaluator = c_kernel_task(tmp_path, ROUND_TRIP_REFERENCE, ROUND_TRIP)
    assert draft_kernel(evaluator, sandbox, HALVE).status == "ok"
    as_float = HALVE.replace("y[i] = x[i];", "y[i] = (float)x[i];")
    result = draft_kernel(evaluator, sandbox, as_float)
    assert result.status == "check_failed" and "output `y`" in result.feedback


def test_values_the_declared_dtype_cannot_hold_fail_at_load_naming_the_input(
    tmp_path: Path,
) -> None:
    wide = ROUND_TRIP_REFERENCE.replace("-30000, 30000", "-40000, 40000")
    with pytest.raises(TaskPathError) as caught:
        c_kernel_task(tmp_path, wide, ROUND_TRIP)
    assert caught.value.param == "inputs"
    assert "inputs[1] (k) from make_inputs is int64" in caught.value.message
    assert "int16 (declared in `inputs`) cannot represent exactly" in caught.value.message


GRID_REFERENCE = """
import numpy as np

def make_inputs(rng, sizes):
    return [rng.uniform(-1, 1, (sizes["n"], sizes["n"])).astype(np.float32)]

def reference(inputs, sizes):
    g = inputs[0].astype(np.float64)
    out = np.zeros_like(g)
    out[1:-1, 1:-1] = 0.25 * (g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:])
    return MASKED(out)
"""
GRID = {
    "entry": "average",
    "signature": "void average(int n, const float *restrict grid, float *restrict out)",
    "inputs": [{"name": "grid", "dtype": "float32"}],
    "sizes": {"n": 17},
}
INTERIOR = """void average(int n, const float *restrict grid, float *restrict out) {
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++)
      out[i * n + j] = 0.25f * (grid[(i - 1) * n + j] + grid[(i + 1) * n + j] +
                                grid[i * n + j - 1] + grid[i * n + j + 1]);
  BUG
}"""
BORDER_MASK = """
def MASKED(out):
    mask = np.ones(out.shape, dtype=bool)
    mask[1:-1, 1:-1] = False
    return np.ma.masked_array(out, mask)
"""


@pytest.mark.parametrize("how", ["slice", "masked"])
def test_a_border_left_out_of_the_comparison_may_stay_unwritten_but_the_interior_may_not(
    tmp_path: Path, sandbox: ProcessSandbox, how: str
) -> None:
    if how == "slice":
        reference = GRID_REFERENCE.replace("MASKED(out)", "out")
        outputs = [{"name": "out", "dtype": "float32", "compare": "1:-1, 1:-1"}]
    else:
        reference = GRID_REFERENCE + BORDER_MASK
        outputs = [{"name": "out", "dtype": "float32"}]
    evaluator = c_kernel_task(tmp_path, reference, {**GRID, "outputs": outputs})
    interior_only = draft_kernel(evaluator, sandbox, INTERIOR.replace("BUG", ""))
    assert interior_only.status == "ok", interior_only.feedback
    wrong = draft_kernel(evaluator, sandbox, INTERIOR.replace("BUG", "out[5 * n + 9] += 0.5f;"))
    assert wrong.status == "check_failed"
    assert "row 5, col 9" in wrong.feedback and "of the 225 compared values" in wrong.feedback
    unwritten = draft_kernel(
        evaluator, sandbox, INTERIOR.replace("BUG", "out[n + 1] = 0.0f / 0.0f;")
    )
    assert unwritten.status == "check_failed" and "row 1, col 1" in unwritten.feedback


def test_without_a_region_the_unwritten_border_fails(
    tmp_path: Path, sandbox: ProcessSandbox
) -> None:
    reference = GRID_REFERENCE.replace("MASKED(out)", "out")
    evaluator = c_kernel_task(
        tmp_path, reference, {**GRID, "outputs": [{"name": "out", "dtype": "float32"}]}
    )
    result = draft_kernel(evaluator, sandbox, INTERIOR.replace("BUG", ""))
    assert result.status == "check_failed"
    assert "NaN" in result.feedback and "row 0, col 0" in result.feedback


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("1:-1, 1:-1", (slice(1, -1), slice(1, -1))),
        (" ::2 ,3", (slice(None, None, 2), 3)),
        ("-1", (-1,)),
        (":", (slice(None),)),
    ],
)
def test_compare_slices_parse_as_numpy_reads_them(text: str, index: tuple) -> None:
    assert region.parse(text) == index


@pytest.mark.parametrize("text", ["", "1:-1; 2", "1::0", "a:b", "__import__('os')", "1:2:3:4"])
def test_a_compare_slice_that_is_not_one_fails_at_load_on_its_key(text: str) -> None:
    outputs = [{"name": "out", "dtype": "float32", "compare": text}]
    params = {"reference": "r.py", **GRID, "outputs": outputs}
    with pytest.raises(ValidationError) as caught:
        CKernelEvaluator(params, Path("."))
    assert caught.value.errors()[0]["loc"] == ("outputs", 0, "compare")


@pytest.mark.parametrize(
    ("compare", "message"),
    [
        ("1:-1", "has 1 dimension(s), but the reference's output has 2"),
        ("20, 1:-1", "does not fit shape (17, 17)"),
        ("5:5, :", "selects no element of shape (17, 17)"),
    ],
)
def test_a_compare_slice_that_does_not_fit_the_output_fails_at_load(
    tmp_path: Path, compare: str, message: str
) -> None:
    reference = GRID_REFERENCE.replace("MASKED(out)", "out")
    outputs = [{"name": "out", "dtype": "float32", "compare": compare}]
    with pytest.raises(TaskPathError) as caught:
        c_kernel_task(tmp_path, reference, {**GRID, "outputs": outputs})
    assert caught.value.param == "outputs"
    assert caught.value.message.startswith("outputs[0] (out): compare: ")
    assert message in caught.value.message
