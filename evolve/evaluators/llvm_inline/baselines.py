"""Stock clang's sizes and guard outputs, computed once and cached on disk.

Every worker needs them, and they depend only on the compiler, the flags and the sources:
the cache key hashes all three (the compiler by its `--version` text from the sandbox),
so a new image or corpus misses the cache instead of reusing stale numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from evolve.evaluators.llvm_inline.jobs import DRIVER, Compiled, manifest, run_driver
from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.evaluators.llvm_inline.units import Unit
from evolve.plugin.stages import Runner, StageFailed, require_ok


@dataclass(frozen=True)
class Baseline:
    """Per unit: .text bytes at the reference level and at the policy's level, the latter's
    object hash (the replay self-test compares it) and guard output (exit code, text)."""

    reference: dict[str, int]
    stock: dict[str, int]
    stock_sha256: dict[str, str]
    guards: dict[str, tuple[int | None, str]]


def compiler_version(run: Runner, clang: str) -> str:
    result = run([clang, "--version"], {})
    require_ok(result, f"{clang} --version")
    return result.stdout.decode(errors="replace")


def _key(
    params: LLVMInlineParams, version: str, units: Sequence[Unit], files: Mapping[str, bytes]
) -> str:
    digest = hashlib.sha256()
    digest.update(version.encode() + DRIVER)
    digest.update(json.dumps([params.opt_level, params.reference_level, params.flags]).encode())
    for unit in units:
        digest.update(repr(unit).encode())
    for path in sorted(files):
        digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return digest.hexdigest()[:24]


def _compile(
    run: Runner,
    params: LLVMInlineParams,
    units: Sequence[Unit],
    files: Mapping[str, bytes],
    level: str,
) -> list[Compiled]:
    plan = manifest(params, "stock", units, level=level, timeout_s=run.limits.timeout_s)
    try:
        return run_driver(run, plan, files)
    except StageFailed as failure:
        raise RuntimeError(
            f"stock {params.clang} {level} fails on the corpus: {failure.feedback}"
        ) from None


def load_or_compute(
    run: Runner,
    params: LLVMInlineParams,
    units: Sequence[Unit],
    files: Mapping[str, bytes],
    cache: Path,
) -> Baseline:
    """The baseline for `units`, from `cache` when the compiler, flags and sources match."""
    key = _key(params, compiler_version(run, params.clang), units, files)
    path = cache / f"baseline-{key}.json"
    if path.is_file():
        data = json.loads(path.read_text())
        data["guards"] = {name: tuple(value) for name, value in data["guards"].items()}
        return Baseline(**data)
    reference = _compile(run, params, units, files, params.reference_level)
    stock = _compile(run, params, units, files, params.opt_level)
    for compiled in stock:
        if compiled.guard is not None and compiled.guard[0] != 0:
            raise RuntimeError(
                f"the stock build of {compiled.name} fails its guard: {compiled.guard[1]}"
            )
    baseline = Baseline(
        reference={c.name: c.text_bytes for c in reference},
        stock={c.name: c.text_bytes for c in stock},
        stock_sha256={c.name: c.sha256 for c in stock},
        guards={c.name: c.guard for c in stock if c.guard is not None},
    )
    empty = [name for name, size in baseline.reference.items() if size <= 0]
    if empty:
        raise RuntimeError(f"units with no .text at {params.reference_level}: {empty}")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cache, delete=False, suffix=".tmp") as handle:
        json.dump(asdict(baseline), handle)
    os.replace(handle.name, path)  # atomic: a racing worker reads a whole file or none
    return baseline
