"""Where each array lies in the inputs buffer and in the output buffer.

One rule, which driver.c applies to the byte counts it is given (`in=B1,B2,... out=...`)
and evolve_kernel.h states for hand-written harnesses: the arrays lie in order, each
starting at the first offset at or after the end of the one before that is a multiple of
64 bytes, with zero bytes between them. 64 bytes is a cache line and an AVX-512 vector, so
every array is as aligned as its buffer (a page), whatever the sizes of those before it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ALIGN = 64


def offsets(byte_counts: Sequence[int]) -> list[int]:
    starts, end = [], 0
    for count in byte_counts:
        start = -(-end // ALIGN) * ALIGN
        starts.append(start)
        end = start + count
    return starts


def total(byte_counts: Sequence[int]) -> int:
    """The buffer's size: up to the end of the last array."""
    if not byte_counts:
        return 0
    return offsets(byte_counts)[-1] + byte_counts[-1]


def pack(arrays: Sequence[np.ndarray]) -> bytes:
    counts = [array.nbytes for array in arrays]
    buffer = bytearray(total(counts))
    for start, array in zip(offsets(counts), arrays, strict=True):
        buffer[start : start + array.nbytes] = array.tobytes()
    return bytes(buffer)


def unpack(data: bytes, byte_counts: Sequence[int]) -> list[bytes]:
    """Each array's bytes from a buffer laid out by the rule; `data` must be `total` long."""
    return [
        data[start : start + n] for start, n in zip(offsets(byte_counts), byte_counts, strict=True)
    ]


def argument(key: str, byte_counts: Sequence[int]) -> str:
    """The driver's argument for one buffer: `in=4096,4096`."""
    return f"{key}={','.join(str(count) for count in byte_counts)}"
