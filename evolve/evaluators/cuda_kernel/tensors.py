"""The files the runner reads: a manifest of sizes and one raw input file per round."""

from __future__ import annotations

from collections.abc import Sequence

from evolve.evaluators.cuda_kernel.problem import Round


def encode(rounds: Sequence[Round], dim_names: Sequence[str]) -> dict[str, bytes]:
    """manifest.txt (`ROUNDS NDIMS NIN NOUT`, then per round its dims, input element counts
    and output element counts) and in_<k>.bin (round k's inputs, concatenated, raw)."""
    first = rounds[0]
    lines = [f"{len(rounds)} {len(dim_names)} {len(first.inputs)} {len(first.expected)}"]
    files: dict[str, bytes] = {}
    for k, round_ in enumerate(rounds):
        sizes = [round_.dims[name] for name in dim_names]
        sizes += [x.size for x in round_.inputs] + [y.size for y in round_.expected]
        lines.append(" ".join(str(size) for size in sizes))
        files[f"in_{k}.bin"] = b"".join(x.tobytes() for x in round_.inputs)
    files["manifest.txt"] = ("\n".join(lines) + "\n").encode()
    return files


def outputs(count: int) -> list[str]:
    """The names the runner writes back for `count` rounds."""
    return [name for k in range(count) for name in (f"out_{k}.bin", f"back_{k}.bin")]
