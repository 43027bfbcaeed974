"""Build stage: compile the candidate, vet its symbols, link it with the trusted harness.

Compiling is untrusted work (the source is the candidate's), so every step runs in the
sandbox. The symbol check stops a candidate from defining anything but the entry point:
otherwise it could interpose `clock_gettime`, `main`, `malloc` or `exit` on the harness.
"""

from __future__ import annotations

from evaluators.c_kernel.flags import disallowed, program_flags
from evaluators.c_kernel.params import CKernelParams
from evaluators.c_kernel.stages import Runner, StageFailed, require_ok
from evolve.program import Program

HARNESS_FLAGS = ("-O2",)


def global_symbols(nm_output: bytes) -> list[str]:
    """Symbol names from `nm --defined-only -g` lines (`ADDRESS TYPE NAME`)."""
    return [line.split()[-1] for line in nm_output.decode(errors="replace").splitlines() if line]


def build(run: Runner, program: Program, params: CKernelParams, harness: str) -> bytes:
    """The linked `kernel` binary, or StageFailed with the compiler's or the vetting's reason."""
    flags = program_flags(program.files[program.main_file], params.default_flags)
    refused = disallowed(flags, params.allowed_flags)
    if refused:
        raise StageFailed(
            f"compiler flag(s) not allowed: {' '.join(refused)}. "
            f"Allowed on the cflags line: {' '.join(params.allowed_flags)}"
        )
    sources = {f"candidate/{path}": text.encode() for path, text in program.files.items()}
    argv = [params.compiler, *flags, "-c", f"candidate/{program.main_file}", "-o", "candidate.o"]
    compiled = run(argv, sources, collect=["candidate.o"])
    require_ok(compiled, f"compiling with {' '.join(flags)}", tail=False)
    obj = compiled.files.get("candidate.o")
    if obj is None:
        raise StageFailed("the compiler wrote no candidate.o")

    listed = run(["nm", "--defined-only", "-g", "candidate.o"], {"candidate.o": obj})
    require_ok(listed, "nm on the candidate's object")
    symbols = global_symbols(listed.stdout)
    extra = sorted(set(symbols) - {params.entry})
    if extra:
        raise StageFailed(
            f"the candidate defines global symbol(s) {', '.join(extra)}; only `{params.entry}` "
            "may be global: make helpers and data `static`"
        )
    if params.entry not in symbols:
        raise StageFailed(f"the candidate does not define `{params.entry}`")

    argv = [params.compiler, *HARNESS_FLAGS, "harness.c", "candidate.o", "-o", "kernel", "-lm"]
    linked = run(argv, {"harness.c": harness.encode(), "candidate.o": obj}, collect=["kernel"])
    require_ok(linked, "linking with the harness", tail=False)
    binary = linked.files.get("kernel")
    if binary is None:
        raise StageFailed("the linker wrote no kernel binary")
    return binary
