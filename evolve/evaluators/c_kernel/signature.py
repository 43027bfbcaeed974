"""A task's `signature:`, the entry's C prototype, parsed and held against the declared arrays.

From it the evaluator writes the harness (harness_gen.py), so a mistake here would compile
into a kernel that reads the wrong bytes. Hence the checks at load: every pointer names a
declared input or output whose dtype its C type matches, every scalar names a size and is an
integer, nothing is left out. The parser knows the small part of C a prototype needs:
qualifiers, one level of pointer, and the spellings of the integer and float types.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*)|(\*)|(\S))")
QUALIFIERS = frozenset({"const", "restrict", "__restrict", "__restrict__", "volatile"})
KEYWORDS = frozenset(
    re.findall(
        r"\w+",
        "auto break case char const continue default do double else enum extern float for goto "
        "if inline int long register restrict return short signed sizeof static struct switch "
        "typedef union unsigned void volatile while _Bool _Complex _Float16",
    )
)
LONG_IS_64 = ctypes.sizeof(ctypes.c_long) == 8

# The C spellings of each dtype's element type.
SPELLINGS: dict[str, tuple[str, ...]] = {
    "int8": ("int8_t", "signed char"),
    "uint8": ("uint8_t", "unsigned char"),
    "int16": ("int16_t", "short", "short int", "signed short", "signed short int"),
    "uint16": ("uint16_t", "unsigned short", "unsigned short int"),
    "int32": ("int32_t", "int", "signed", "signed int"),
    "uint32": ("uint32_t", "unsigned", "unsigned int"),
    "int64": (
        "int64_t",
        "long long",
        "long long int",
        "signed long long",
        "signed long long int",
        *(("long", "long int", "signed long", "signed long int") if LONG_IS_64 else ()),
    ),
    "uint64": (
        "uint64_t",
        "unsigned long long",
        "unsigned long long int",
        *(("unsigned long", "unsigned long int") if LONG_IS_64 else ()),
    ),
    "float16": ("_Float16",),
    "float32": ("float",),
    "float64": ("double",),
}
C_TYPE = {name: spellings[0] for name, spellings in SPELLINGS.items()}


def _words(base: str) -> str:
    """A base type's words in one order, so that `int unsigned` reads as `unsigned int`."""
    return " ".join(sorted(base.split()))


DTYPE_OF = {
    _words(spelling): name for name, spellings in SPELLINGS.items() for spelling in spellings
}
SIZE_TYPES = frozenset(
    {words for words, name in DTYPE_OF.items() if not name.startswith("float")}
    | {"size_t", "ptrdiff_t", "long", "int long", "long unsigned", "int long unsigned"}
)


@dataclass(frozen=True)
class Parameter:
    name: str
    base: str  # the type's words, qualifiers left out: `uint8_t`, `unsigned char`
    pointer: bool
    const: bool  # of the pointee, for a pointer
    declared: str  # the type as written, name left out: `const uint8_t *restrict`


@dataclass(frozen=True)
class Signature:
    function: str
    parameters: tuple[Parameter, ...]
    text: str  # the prototype as the task wrote it, without a trailing `;`


def parse(text: str) -> Signature:
    """ValueError saying what is not a prototype this evaluator can call."""
    text = text.strip().removesuffix(";").strip()
    match = re.fullmatch(r"(.*?)\b([A-Za-z_]\w*)\s*\((.*)\)", text, re.DOTALL)
    if match is None:
        raise ValueError(f"{text!r} is not a C prototype such as `void f(int n, float *out)`")
    returns, function, inside = match.groups()
    if returns.split() != ["void"]:
        raise ValueError(f"`{function}` must return void, not `{returns.strip() or '?'}`")
    if not inside.strip() or inside.strip() == "void":
        raise ValueError(f"`{function}` takes no parameters: it needs at least an output")
    parameters = tuple(_parameter(part.strip(), function) for part in inside.split(","))
    names = [p.name for p in parameters]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"`{function}` names {', '.join(twice)} more than once")
    return Signature(function, parameters, text)


def _parameter(text: str, function: str) -> Parameter:
    tokens = [m.group(1) or m.group(2) or m.group(3) for m in TOKEN.finditer(text)]
    odd = [t for t in tokens if not (t == "*" or IDENTIFIER.fullmatch(t))]
    if odd or not tokens:
        shown = f" ({''.join(odd)})" if odd else ""
        raise ValueError(
            f"`{function}`: parameter {text!r}{shown} is not `TYPE NAME` or `TYPE *NAME`; "
            "arrays, function pointers and `...` are not supported"
        )
    name = tokens[-1]
    if name == "*" or name in QUALIFIERS:
        raise ValueError(f"`{function}`: parameter {text!r} has no name")
    stars = tokens.count("*")
    if stars > 1:
        raise ValueError(f"`{function}`: parameter `{name}` is a pointer to a pointer")
    before = tokens[: tokens.index("*")] if stars else tokens[:-1]
    words = [t for t in before if t not in QUALIFIERS]
    if not words:
        raise ValueError(f"`{function}`: parameter `{name}` has no type")
    declared = " ".join(tokens[:-1]).replace("* ", "*")
    return Parameter(name, " ".join(words), bool(stars), "const" in before, declared)


def check(
    signature: Signature,
    entry: str,
    arrays: Mapping[str, tuple[str, str]],
    sizes: Sequence[str],
) -> None:
    """Hold the prototype against the task: `arrays` maps each declared name to its place
    (`inputs[0]`) and dtype. ValueError naming the parameter and the fix."""
    if signature.function != entry:
        raise ValueError(f"declares `{signature.function}`, but `entry` is `{entry}`")
    for parameter in signature.parameters:
        if parameter.pointer:
            _check_pointer(parameter, arrays, sizes)
        else:
            _check_scalar(parameter, arrays, sizes)
    named = {parameter.name for parameter in signature.parameters}
    missing = [f"{place} ({name})" for name, (place, _) in arrays.items() if name not in named]
    if missing:
        raise ValueError(f"`{entry}` takes no parameter for {', '.join(missing)}")


def _check_pointer(
    parameter: Parameter, arrays: Mapping[str, tuple[str, str]], sizes: Sequence[str]
) -> None:
    name = parameter.name
    if name not in arrays:
        what = f"a size, so pass it as `long {name}`" if name in sizes else "no input or output"
        raise ValueError(f"`{name}` is a pointer but names {what}")
    place, dtype = arrays[name]
    wanted = ("const " if place.startswith("inputs") else "") + f"{C_TYPE[dtype]} *"
    written = f"{'const ' if parameter.const else ''}{parameter.base} *"
    if DTYPE_OF.get(_words(parameter.base)) != dtype:
        raise ValueError(f"`{name}` is `{written}` but {place} ({name}) is {dtype}: use `{wanted}`")
    if parameter.const and place.startswith("outputs"):
        raise ValueError(f"`{name}` is {place}, which the kernel writes: use `{wanted}`")


def _check_scalar(
    parameter: Parameter, arrays: Mapping[str, tuple[str, str]], sizes: Sequence[str]
) -> None:
    name = parameter.name
    if name in arrays:
        place, dtype = arrays[name]
        wanted = ("const " if place.startswith("inputs") else "") + f"{C_TYPE[dtype]} *"
        raise ValueError(f"`{name}` is {place}, an array: use `{wanted}{name}`")
    if name not in sizes:
        known = ", ".join(sizes) or "none"
        raise ValueError(f"`{name}` is not a pointer, so it must name a size (sizes: {known})")
    if _words(parameter.base) not in SIZE_TYPES:
        raise ValueError(
            f"`{name}` is a size, so its type must be an integer, not `{parameter.base}`"
        )
