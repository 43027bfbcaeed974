"""Check stage: run the kernel once on fresh inputs and compare with the trusted reference."""

from __future__ import annotations

from collections.abc import Mapping

from evolve.evaluators.c_kernel.compare import compare
from evolve.evaluators.c_kernel.oracle import Trial
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.plugin.stages import Runner, StageFailed, require_ok


def check_argv(trial: Trial, params: CKernelParams, sizes: Mapping[str, int]) -> list[str]:
    """The driver's one-call mode for the binary `kernel`: inputs.bin in, output.bin out."""
    return ["./kernel", "check", *trial.io_args(), *params.size_args(sizes)]


def check(run: Runner, binary: bytes, trial: Trial, params: CKernelParams) -> None:
    files = {"kernel": binary, "inputs.bin": trial.inputs}
    argv = check_argv(trial, params, params.sizes)
    result = run(argv, files, collect=["output.bin"])
    require_ok(result, "the kernel")
    problem = compare(result.files.get("output.bin"), trial.expected)
    if problem:
        raise StageFailed(problem)
