"""Knobs: the values inside an EVOLVE-BLOCK that the autotuner may vary.

A knob is declared by an `@knob` annotation at the end of its line, inside a comment:

    #define TILE 64          // @knob pow2 1..4096
    #define UNROLL 4         // @knob int 1..64
    #define CHUNK 2048       // @knob int 1..65536 log
    #define ALPHA 0.5        // @knob float 0.01..10
    #define ORDER IJK        // @knob choice IJK | IKJ | KIJ
    // cflags: -O2           @knob choice -O2 | -O3 | -O3 -march=native

For `int`, `pow2` and `float` the value is the last numeric literal before the annotation;
for `choice` it is the longest listed option found there. A `pow2` knob's value and bounds
are powers of two, so that it moves by octaves, as tile sizes want; `log` on an int knob
makes its long jumps spread evenly over orders of magnitude rather than over the range (see
evolve.mutators.autotuner for every move). Knobs outside a block are errors, so a
declaration can never widen what may change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from evolve.plugin.program import Program, ProgramError, split_segments

ANNOTATION = re.compile(r"@knob\s+(?P<kind>\w+)\s*(?P<spec>.*?)\s*(?:\*/)?\s*$")
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")
RANGE = re.compile(r"^(?P<low>\S+?)\s*\.\.\s*(?P<high>\S+?)(?:\s+(?P<scale>\S+))?$")
KINDS = ("int", "pow2", "float", "choice")
KNOBS_KEPT = 256  # programs whose knobs are kept (see _knobs_in)

Value = int | float | str


@dataclass(frozen=True)
class Knob:
    file: str
    line: int  # 0-based index into the file's lines
    kind: str  # one of KINDS
    value: Value
    start: int  # the value's span within the line
    end: int
    low: float = 0.0
    high: float = 0.0
    options: tuple[str, ...] = ()
    log: bool = False  # an int knob whose jumps are log-uniform

    @property
    def label(self) -> str:
        return f"{self.file}:{self.line + 1}"

    @property
    def signature(self) -> tuple[str, int, str, float, float, tuple[str, ...]]:
        """What must match for two programs' knobs to be exchanged in a crossover. The scale
        is left out: it changes how a value moves, not which values are valid."""
        return (self.file, self.line, self.kind, self.low, self.high, self.options)


def _is_pow2(number: float) -> bool:
    return isinstance(number, int) and number > 0 and number & (number - 1) == 0


def _parse_line(path: str, index: int, line: str) -> Knob | None:
    at = line.find("@knob")
    if at < 0:
        return None
    where = f"{path}:{index + 1}"
    match = ANNOTATION.match(line, at)
    if not match:
        raise ProgramError(f"{where}: malformed @knob annotation")
    kind, spec, region = match["kind"], match["spec"], line[:at]
    if kind == "choice":
        return _choice(path, index, where, spec, region)
    if kind in KINDS:
        return _numeric(path, index, where, kind, spec, region)
    raise ProgramError(f"{where}: unknown knob kind {kind!r} (use {', '.join(KINDS)})")


def _numeric(path: str, index: int, where: str, kind: str, spec: str, region: str) -> Knob:
    bounds = RANGE.match(spec)
    if not bounds:
        raise ProgramError(f"{where}: @knob {kind} needs a range LOW..HIGH, got {spec!r}")
    scale = bounds["scale"]
    if scale is not None and (kind, scale) != ("int", "log"):
        raise ProgramError(
            f"{where}: no scale {scale!r} for @knob {kind}: only int takes one, `log` "
            "(pow2 moves by octaves and float log-normally already)"
        )
    cast = float if kind == "float" else int
    try:
        low, high = cast(bounds["low"]), cast(bounds["high"])
    except ValueError as exc:
        raise ProgramError(f"{where}: bad @knob range {spec!r}: {exc}") from None
    literals = list(NUMBER.finditer(region))
    if not literals:
        raise ProgramError(f"{where}: @knob {kind} but no numeric literal before it")
    literal = literals[-1]
    try:
        value: int | float = cast(literal.group())
    except ValueError:
        raise ProgramError(f"{where}: {literal.group()!r} is not an integer") from None
    if kind == "pow2" and not all(_is_pow2(n) for n in (value, low, high)):
        raise ProgramError(
            f"{where}: @knob pow2 needs a power of two for the value and both bounds, "
            f"got {value} in {spec}"
        )
    if not low <= value <= high:
        raise ProgramError(f"{where}: value {value} is outside its range {spec}")
    return Knob(
        path, index, kind, value, literal.start(), literal.end(), low, high, log=scale == "log"
    )


def _choice(path: str, index: int, where: str, spec: str, region: str) -> Knob:
    options = tuple(o.strip() for o in spec.split("|") if o.strip())
    if len(options) < 2:
        raise ProgramError(f"{where}: @knob choice needs at least two options separated by |")
    for option in sorted(options, key=len, reverse=True):
        pattern = rf"(?<![\w\-=]){re.escape(option)}(?![\w\-=])"
        found = list(re.finditer(pattern, region))
        if found:
            hit = found[-1]
            return Knob(path, index, "choice", option, hit.start(), hit.end(), options=options)
    raise ProgramError(f"{where}: none of the options {options} appears before @knob")


def find_knobs(program: Program) -> list[Knob]:
    """Every knob in the program, in file and line order."""
    return list(_knobs_in(tuple(program.files.items())))


@lru_cache(maxsize=KNOBS_KEPT)
def _knobs_in(files: tuple[tuple[str, str], ...]) -> tuple[Knob, ...]:
    """Kept for the latest programs: the autotuner reads a parent's knobs for each of the
    many children it proposes from it."""
    knobs: list[Knob] = []
    for path, text in files:
        index = 0
        for segment in split_segments(path, text):
            for line in segment.lines:
                knob = _parse_line(path, index, line)
                if knob and not segment.mutable:
                    raise ProgramError(f"{knob.label}: @knob outside an EVOLVE-BLOCK")
                if knob:
                    knobs.append(knob)
                index += 1
    return tuple(knobs)


def format_value(knob: Knob, value: Value) -> str:
    if knob.kind == "float":
        return repr(float(value))
    return str(value)


def set_knobs(program: Program, knobs: list[Knob], values: Mapping[int, Value]) -> Program:
    """A copy of `program` with knob i (an index into `knobs`) set to values[i]."""
    files = {path: text.splitlines(keepends=True) for path, text in program.files.items()}
    for i, value in values.items():
        knob = knobs[i]
        line = files[knob.file][knob.line]
        files[knob.file][knob.line] = (
            line[: knob.start] + format_value(knob, value) + line[knob.end :]
        )
    return program.replace({path: "".join(lines) for path, lines in files.items()})
