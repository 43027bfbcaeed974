"""Is a CUDA GPU usable where candidates run? Asked by running a trusted probe in the sandbox,
because that is where the kernels will run: a GPU on the host that the sandbox cannot see
(a container started without --gpus, say) is no GPU at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolve.evaluators.cuda_kernel.toolchain import Toolchain
from evolve.plugin.stages import Runner

PROBE = Path(__file__).with_name("harness") / "probe.cu"


@dataclass(frozen=True)
class Gpu:
    present: bool
    detail: str  # the device's name, or why there is none
    capability: str | None = None  # "8.9"

    @property
    def arch(self) -> str | None:
        return f"sm_{self.capability.replace('.', '')}" if self.capability else None


def probe(run: Runner, toolchain: Toolchain) -> Gpu:
    built = run(
        [toolchain.nvcc, "probe.cu", "-o", "probe"],
        {"probe.cu": PROBE.read_bytes()},
        collect=["probe"],
    )
    binary = built.files.get("probe")
    if not built.ok or binary is None:
        return Gpu(False, f"the GPU probe did not compile: {built.describe()}")
    result = run(["./probe"], {"probe": binary})
    said = result.stdout.decode(errors="replace").strip()
    devices = [line.split(maxsplit=2) for line in said.splitlines() if line.startswith("device ")]
    if not result.ok or not devices:
        reason = said.removeprefix("error ").strip() or result.describe()
        return Gpu(False, f"the CUDA runtime says: {reason}")
    _, capability, name = devices[0]
    return Gpu(True, f"{name} (compute capability {capability})", capability)
