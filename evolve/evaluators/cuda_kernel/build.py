"""Static and build stages: vet the source, compile it with nvcc, vet the object, link.

Compiling is untrusted work (the source is the candidate's), so every step runs in the
sandbox. The trusted runner and reference kernel are compiled once per architecture and
linked with each candidate's object.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolve.evaluators.cuda_kernel.rules import check_source, check_symbols, foreign_definitions
from evolve.evaluators.cuda_kernel.toolchain import (
    KernelResources,
    Toolchain,
    describe_resources,
    parse_resource_usage,
)
from evolve.plugin.program import Program
from evolve.plugin.stages import Runner, StageFailed, excerpt, require_ok

HARNESS_DIR = Path(__file__).with_name("harness")


@dataclass(frozen=True)
class TaskSources:
    """The trusted CUDA text a task contributes: the adapter header and the reference kernel."""

    launch: str
    reference_kernel: str


@dataclass(frozen=True)
class Built:
    runner: bytes
    kernels: list[KernelResources]

    def metrics(self) -> dict[str, float]:
        return {
            "registers": float(max((k.registers for k in self.kernels), default=0)),
            "spill_bytes": float(sum(k.spill_bytes for k in self.kernels)),
        }


def static_check(program: Program, *, fp32: bool) -> str:
    """Feedback for a clean source; StageFailed listing every broken rule otherwise."""
    problems = [
        f"{path}: {violation.describe()}"
        for path, text in program.files.items()
        for violation in check_source(text, fp32=fp32)
    ]
    if problems:
        raise StageFailed("static check rejected the kernel:\n- " + "\n- ".join(problems))
    return ""


def _symbols(nm_output: bytes) -> tuple[list[str], list[str]]:
    """(defined, undefined) global names from `nm -g` lines: `[ADDRESS] TYPE NAME`."""
    defined, undefined = [], []
    for line in nm_output.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            (undefined if parts[-2] == "U" else defined).append(parts[-1])
    return defined, undefined


def compile_candidate(
    run: Runner, program: Program, toolchain: Toolchain, arch: str, flags: list[str]
) -> tuple[bytes, list[KernelResources]]:
    """The candidate's object file and ptxas's resource report, or StageFailed."""
    sources = {f"candidate/{path}": text.encode() for path, text in program.files.items()}
    argv = [toolchain.nvcc, f"-arch={arch}", *flags, "-std=c++17", "--resource-usage"]
    argv += ["-c", f"candidate/{program.main_file}", "-o", "candidate.o"]
    compiled = run(argv, sources, collect=["candidate.o"])
    require_ok(compiled, f"nvcc -arch={arch} {' '.join(flags)}", tail=False)
    obj = compiled.files.get("candidate.o")
    if obj is None:
        raise StageFailed("nvcc wrote no candidate.o")
    report = compiled.stdout.decode(errors="replace") + compiled.stderr.decode(errors="replace")
    return obj, parse_resource_usage(report)


def vet_object(run: Runner, obj: bytes, entry: str, *, fp32: bool) -> None:
    """What the object defines and calls, checked where macros can no longer hide it."""
    listed = run(["nm", "-g", "candidate.o"], {"candidate.o": obj})
    require_ok(listed, "nm on the candidate's object")
    defined, undefined = _symbols(listed.stdout)
    foreign = foreign_definitions(defined, entry)
    if foreign:
        raise StageFailed(
            f"[symbols] the candidate defines global symbol(s) {', '.join(foreign)}; only "
            f'extern "C" `{entry}` and the candidate\'s own C++ functions may be global: make '
            "helpers `static` or put them in an anonymous namespace"
        )
    if entry not in defined:
        raise StageFailed(f'the candidate does not define extern "C" `{entry}`')
    broken = check_symbols(undefined, fp32=fp32)
    if broken:
        lines = "\n- ".join(violation.describe() for violation in broken)
        raise StageFailed(f"the compiled kernel breaks the rules:\n- {lines}")


def compile_harness(
    run: Runner, sources: TaskSources, toolchain: Toolchain, arch: str, flags: list[str]
) -> dict[str, bytes]:
    """runner.o and reference.o for `arch`: trusted, so a failure is the task's bug."""
    files = {
        "launch.h": sources.launch.encode(),
        "runner.cu": (HARNESS_DIR / "runner.cu").read_bytes(),
        "reference.cu": sources.reference_kernel.encode(),
    }
    objects: dict[str, bytes] = {}
    for name in ("runner", "reference"):
        argv = [toolchain.nvcc, f"-arch={arch}", *flags, "-std=c++17", "-I.", "-c"]
        result = run([*argv, f"{name}.cu", "-o", f"{name}.o"], files, collect=[f"{name}.o"])
        if not result.ok or f"{name}.o" not in result.files:
            stderr = excerpt(result.stderr)
            raise RuntimeError(f"the trusted {name}.cu does not compile for {arch}:\n{stderr}")
        objects[f"{name}.o"] = result.files[f"{name}.o"]
    return objects


def link(
    run: Runner, harness: dict[str, bytes], obj: bytes, toolchain: Toolchain, arch: str
) -> bytes:
    files = {**harness, "candidate.o": obj}
    argv = [toolchain.nvcc, f"-arch={arch}", "runner.o", "reference.o", "candidate.o"]
    linked = run([*argv, "-o", "runner"], files, collect=["runner"])
    require_ok(linked, "linking the candidate with the runner", tail=False)
    binary = linked.files.get("runner")
    if binary is None:
        raise StageFailed("the linker wrote no runner binary")
    return binary


def build(
    run: Runner,
    program: Program,
    toolchain: Toolchain,
    arch: str,
    flags: list[str],
    harness: dict[str, bytes],
    entry: str,
    *,
    fp32: bool,
) -> tuple[Built, str]:
    """The linked runner and the feedback line on registers and spills."""
    obj, kernels = compile_candidate(run, program, toolchain, arch, flags)
    vet_object(run, obj, entry, fp32=fp32)
    binary = link(run, harness, obj, toolchain, arch)
    return Built(binary, kernels), f"nvcc -arch={arch}: {describe_resources(kernels)}"
