"""Build stage: compile the candidate, vet its symbols, link it with the driver and harness.

Compiling is untrusted work (the source is the candidate's), so every step runs in the
sandbox. The driver, the harness and a variant's own sources are the evaluator's, the same
for every candidate: they are compiled once per sandbox and build variant, and each
candidate's job only links its object with theirs. The symbol check stops a candidate from
defining anything but the entry point: otherwise it could interpose `main`, `malloc` or
`exit` on the driver. It could not reach the clock by any symbol: that lives in the timer,
another process (timer.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from weakref import WeakKeyDictionary

from evolve.evaluators.c_kernel.flags import disallowed, program_flags
from evolve.evaluators.c_kernel.harness_gen import Harness
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.plugin.program import Program
from evolve.plugin.sandbox import RunResult, Sandbox
from evolve.plugin.stages import Runner, StageFailed, require_ok

HARNESS_FLAGS = ("-O2", "-I.")
DRIVER_DIR = Path(__file__).with_name("driver")
DRIVER_FILES = {name: (DRIVER_DIR / name).read_bytes() for name in ("driver.c", "evolve_kernel.h")}


@dataclass(frozen=True)
class Variant:
    """A build other than the plain one (the sanitizers', say), vetted the same way."""

    compiler: str | None = None  # None: the task's
    flags: tuple[str, ...] = ()  # on the candidate's compile and on the link, after its own
    admitted: frozenset[str] = frozenset()  # globals the instrumentation itself defines
    sources: Mapping[str, bytes] = field(default_factory=dict)  # more trusted C to link in


PLAIN = Variant()

# Compiled trusted objects by sandbox, then by what they were compiled from (trusted_key).
_trusted: WeakKeyDictionary[Sandbox, dict[str, dict[str, bytes]]] = WeakKeyDictionary()


class CompileFailed(StageFailed):
    """The compiler or the linker refused the program, as against the vetting refusing it:
    a compiler other than the task's refusing it is no verdict on the candidate."""


def global_symbols(nm_output: bytes) -> list[str]:
    """Symbol names from `nm --defined-only -g` lines (`ADDRESS TYPE NAME`)."""
    return [line.split()[-1] for line in nm_output.decode(errors="replace").splitlines() if line]


def build(
    run: Runner, program: Program, params: CKernelParams, harness: Harness, variant: Variant = PLAIN
) -> bytes:
    """The linked `kernel` binary, or StageFailed with the compiler's or the vetting's reason
    (CompileFailed when it is the compiler's or the linker's)."""
    obj = compile_object(run, program, params, harness, variant)
    return link(run, obj, params, harness, variant)


def compile_object(
    run: Runner, program: Program, params: CKernelParams, harness: Harness, variant: Variant = PLAIN
) -> bytes:
    """The candidate's vetted candidate.o, kept apart from the link so that its code can be
    sized. The harness's own flags (the prototype's header, forced in) come after the
    vetted ones: they are the evaluator's."""
    compiler = variant.compiler or params.compiler
    flags = program_flags(program.files[program.main_file], params.default_flags)
    refused = disallowed(flags, params.allowed_flags)
    if refused:
        raise StageFailed(
            f"compiler flag(s) not allowed: {' '.join(refused)}. "
            f"Allowed on the cflags line: {' '.join(params.allowed_flags)}"
        )
    sources = {f"candidate/{path}": text.encode() for path, text in program.files.items()}
    sources.update(harness.candidate_files())
    main = f"candidate/{program.main_file}"
    trusted = harness.candidate_flags()
    argv = [compiler, *flags, *variant.flags, *trusted, "-c", main, "-o", "candidate.o"]
    compiled = run(argv, sources, collect=["candidate.o"])
    _require_built(compiled, f"compiling with {' '.join([*flags, *variant.flags])}")
    obj = compiled.files.get("candidate.o")
    if obj is None:
        raise StageFailed("the compiler wrote no candidate.o")

    listed = run(["nm", "--defined-only", "-g", "candidate.o"], {"candidate.o": obj})
    require_ok(listed, "nm on the candidate's object")
    symbols = global_symbols(listed.stdout)
    extra = sorted(set(symbols) - {params.entry} - variant.admitted)
    if params.entry not in symbols:
        defined = f"; the globals it defines are {', '.join(extra)}" if extra else ""
        raise StageFailed(
            f"the candidate does not define `{params.entry}`, the task's entry point{defined}"
        )
    if extra:
        built = f" (built with {' '.join(variant.flags)})" if variant.flags else ""
        raise StageFailed(
            f"the candidate{built} defines global symbol(s) {', '.join(extra)}; only "
            f"`{params.entry}` may be global: make helpers and data `static`"
        )
    return obj


def link(
    run: Runner, obj: bytes, params: CKernelParams, harness: Harness, variant: Variant = PLAIN
) -> bytes:
    """The `kernel` binary: the driver, the harness and `variant`'s sources around `obj`."""
    compiler = variant.compiler or params.compiler
    files = {**trusted_objects(run, params, harness, variant), "candidate.o": obj}
    argv = [compiler, *HARNESS_FLAGS, *variant.flags, *files, "-o", "kernel", "-lm"]
    linked = run(argv, files, collect=["kernel"])
    _require_built(linked, "linking with the driver and the harness")
    binary = linked.files.get("kernel")
    if binary is None:
        raise StageFailed("the linker wrote no kernel binary")
    return binary


def trusted_objects(
    run: Runner, params: CKernelParams, harness: Harness, variant: Variant
) -> dict[str, bytes]:
    """The driver's, the harness's and `variant`'s own objects, by file name (`driver.o`,
    ...), compiled in `run`'s sandbox on first use and kept for that sandbox: no candidate
    code goes into them, so every candidate built the same way links the same objects."""
    compiler = variant.compiler or params.compiler
    sources = {**DRIVER_FILES, **variant.sources, **harness.files()}
    key = trusted_key(compiler, variant.flags, sources)
    kept = _trusted.setdefault(run.sandbox, {})
    if key not in kept:
        compiled = ["driver.c", "harness.c", *variant.sources]
        objects = [f"{Path(name).stem}.o" for name in compiled]
        argv = [compiler, *HARNESS_FLAGS, *variant.flags, "-c", *compiled]
        result = run(argv, sources, collect=objects)
        _require_built(result, "compiling the driver and the harness")
        missing = [name for name in objects if name not in result.files]
        if missing:
            raise StageFailed(f"the compiler wrote no {', '.join(missing)}")
        kept[key] = {name: result.files[name] for name in objects}
    return kept[key]


def trusted_key(compiler: str, flags: tuple[str, ...], sources: Mapping[str, bytes]) -> str:
    """What trusted objects are compiled from: the compiler, the flags and every source."""
    digest = hashlib.sha256(repr((compiler, HARNESS_FLAGS, flags)).encode())
    for name in sorted(sources):
        digest.update(f"\0{name}\0{len(sources[name])}\0".encode())
        digest.update(sources[name])
    return digest.hexdigest()


def _require_built(result: RunResult, what: str) -> None:
    try:
        require_ok(result, what, tail=False)
    except StageFailed as failure:
        raise CompileFailed(failure.feedback, timed_out=failure.timed_out) from None
