"""Build stage: compile the candidate, vet its symbols, link it with the driver and harness.

Compiling is untrusted work (the source is the candidate's), so every step runs in the
sandbox. The symbol check stops a candidate from defining anything but the entry point:
otherwise it could interpose `main`, `malloc` or `exit` on the driver. It could not reach
the clock by any symbol: that lives in the timer, another process (timer.py).
"""

from __future__ import annotations

from pathlib import Path

from evaluators.c_kernel.flags import disallowed, program_flags
from evaluators.c_kernel.params import CKernelParams
from evaluators.c_kernel.stages import Runner, StageFailed, require_ok
from evolve.program import Program

HARNESS_FLAGS = ("-O2", "-I.")
DRIVER_DIR = Path(__file__).with_name("driver")
DRIVER_FILES = {name: (DRIVER_DIR / name).read_bytes() for name in ("driver.c", "evolve_kernel.h")}


def global_symbols(nm_output: bytes) -> list[str]:
    """Symbol names from `nm --defined-only -g` lines (`ADDRESS TYPE NAME`)."""
    return [line.split()[-1] for line in nm_output.decode(errors="replace").splitlines() if line]


def build(
    run: Runner,
    program: Program,
    params: CKernelParams,
    harness: str,
    extra_flags: tuple[str, ...] = (),
) -> bytes:
    """The linked `kernel` binary, or StageFailed with the compiler's or the vetting's reason.

    `extra_flags` (the sanitizers') go on every compile and the link, after the candidate's.
    """
    flags = program_flags(program.files[program.main_file], params.default_flags)
    refused = disallowed(flags, params.allowed_flags)
    if refused:
        raise StageFailed(
            f"compiler flag(s) not allowed: {' '.join(refused)}. "
            f"Allowed on the cflags line: {' '.join(params.allowed_flags)}"
        )
    sources = {f"candidate/{path}": text.encode() for path, text in program.files.items()}
    main = f"candidate/{program.main_file}"
    argv = [params.compiler, *flags, *extra_flags, "-c", main, "-o", "candidate.o"]
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

    argv = [params.compiler, *HARNESS_FLAGS, *extra_flags, "driver.c", "harness.c", "candidate.o"]
    files = {**DRIVER_FILES, "harness.c": harness.encode(), "candidate.o": obj}
    linked = run([*argv, "-o", "kernel", "-lm"], files, collect=["kernel"])
    require_ok(linked, "linking with the driver and the task's harness", tail=False)
    binary = linked.files.get("kernel")
    if binary is None:
        raise StageFailed("the linker wrote no kernel binary")
    return binary
