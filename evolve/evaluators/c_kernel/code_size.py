"""The `code_bytes` metric: how much machine code the candidate's object holds.

Read here, in the trusted process, from the ELF section headers of the candidate.o the
sandboxed compiler wrote; nothing of the candidate runs. Every section with the
executable flag counts, whatever its name: summing sections named `.text*` would let a
kernel that wants a small number put its code in `__attribute__((section("hot")))`. Parsing
the headers ourselves, not a tool's listing, also keeps a section name with spaces or
newlines in it from garbling the count.
"""

from __future__ import annotations

import struct

from evolve.plugin.stages import StageFailed

SHF_EXECINSTR = 0x4
# Per ELF class: where e_shoff, e_shentsize, e_shnum sit in the file header, and the
# layout of one section header (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, ...).
LAYOUTS = {
    1: ("I", 0x20, 0x2E, "10I"),  # ELF32
    2: ("Q", 0x28, 0x3A, "2I4Q2I2Q"),  # ELF64
}


def code_bytes(obj: bytes) -> int:
    """The summed sizes of the object's executable sections; StageFailed if the object is not
    an ELF file whose section headers lie inside it."""
    if obj[:4] != b"\x7fELF" or len(obj) < 0x40:
        raise StageFailed("the compiler's object is not an ELF file, so its code was not sized")
    layout, order = LAYOUTS.get(obj[4]), {1: "<", 2: ">"}.get(obj[5])
    if layout is None or order is None:
        raise StageFailed("the compiler's object has an unknown ELF class or byte order")
    offset_type, offset_at, sizes_at, header_format = layout
    (shoff,) = struct.unpack_from(order + offset_type, obj, offset_at)
    entsize, count = struct.unpack_from(order + "2H", obj, sizes_at)
    header = struct.Struct(order + header_format)
    if shoff == 0:
        raise StageFailed("the compiler's object has no section headers, so no code to size")
    if entsize != header.size:
        raise StageFailed(f"the object's section headers are {entsize} bytes, not {header.size}")

    def section(index: int) -> tuple[int, ...]:
        start = shoff + index * entsize
        if start + entsize > len(obj):
            raise StageFailed("the object's section headers run past its end")
        return header.unpack_from(obj, start)

    if count == 0:  # 0xff00 sections or more: the count is in section 0's sh_size
        count = section(0)[5]
    total = 0
    for index in range(count):
        fields = section(index)
        if fields[2] & SHF_EXECINSTR:
            total += fields[5]
    return total
