"""Where nvcc is, as the sandbox sees it, and what ptxas says about registers and spills.

nvcc is looked for on the sandbox's PATH first (a CUDA image or a system install), then in
the usual install prefix, then wherever the host has one, and last in the `nvidia-cuda-nvcc`
wheel from PyPI, so `pip install` is enough on a machine with no CUDA toolkit. Each
candidate path is tried inside the sandbox, since that is where compiling happens.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from importlib import metadata

from evolve.plugin.stages import Runner

PTXAS_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
PTXAS_SPILLS = re.compile(r"(?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads")
PTXAS_USED = re.compile(r"Used (?P<registers>\d+) registers")
PTXAS_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")


class ToolchainMissing(RuntimeError):
    """No nvcc works in the sandbox: nothing CUDA can be compiled."""


@dataclass(frozen=True)
class Toolchain:
    nvcc: str
    version: str


def _wheel_nvcc() -> str | None:
    try:
        files = metadata.files("nvidia-cuda-nvcc") or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "nvcc" and file.parent.name == "bin":
            return str(file.locate())
    return None


def nvcc_candidates() -> list[str]:
    found = ["nvcc", "/usr/local/cuda/bin/nvcc", shutil.which("nvcc")]
    if os.environ.get("CUDA_HOME"):
        found.append(os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"))
    found.append(_wheel_nvcc())
    return list(dict.fromkeys(path for path in found if path))


def find_toolchain(run: Runner) -> Toolchain:
    tried = nvcc_candidates()
    for nvcc in tried:
        try:
            result = run([nvcc, "--version"], {})
        except OSError:  # the process sandbox cannot even start a missing program
            continue
        if result.ok:
            lines = result.stdout.decode(errors="replace").strip().splitlines()
            release = [line for line in lines if "release" in line] or lines or ["nvcc"]
            return Toolchain(nvcc, release[-1].strip())
    raise ToolchainMissing(
        f"no working nvcc in the {run.sandbox.name} sandbox (tried {', '.join(tried)}): "
        "install the CUDA toolkit, or `pip install nvidia-cuda-nvcc` into this environment"
    )


@dataclass(frozen=True)
class KernelResources:
    name: str
    registers: int
    spill_bytes: int
    shared_bytes: int


def parse_resource_usage(text: str) -> list[KernelResources]:
    """One entry per kernel from `nvcc --resource-usage` (ptxas info) output."""
    kernels: list[KernelResources] = []
    name, spills = "", 0
    for line in text.splitlines():
        if entry := PTXAS_ENTRY.search(line):
            name, spills = entry["name"], 0
        elif spill := PTXAS_SPILLS.search(line):
            spills = int(spill["stores"]) + int(spill["loads"])
        elif (used := PTXAS_USED.search(line)) and name:
            smem = PTXAS_SMEM.search(line)
            shared = int(smem["smem"]) if smem else 0
            kernels.append(KernelResources(name, int(used["registers"]), spills, shared))
            name = ""
    return kernels


def describe_resources(kernels: list[KernelResources]) -> str:
    if not kernels:
        return "ptxas reported no kernels"
    return "; ".join(
        f"{k.name}: {k.registers} registers, {k.spill_bytes} bytes spilled, "
        f"{k.shared_bytes} bytes static shared memory"
        for k in kernels
    )
