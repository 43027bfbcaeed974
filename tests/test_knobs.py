import pytest

from evolve.plugin.knobs import find_knobs, set_knobs
from evolve.plugin.program import Program, ProgramError

SOURCE = """int head;
// EVOLVE-BLOCK-START
// cflags: -O2    @knob choice -O2 | -O3 | -O3 -march=native
#define TILE 512 // @knob int 1..512
#define ORDER IJK /* @knob choice IJK | IKJ */
#define ALPHA 0.5 // @knob float 0.1..2
int unannotated = 7;
// EVOLVE-BLOCK-END
"""


def block(line: str) -> str:
    return f"// EVOLVE-BLOCK-START\n{line}\n// EVOLVE-BLOCK-END\n"


def test_knobs_are_found_with_kind_range_and_value() -> None:
    knobs = find_knobs(Program({"k.c": SOURCE}))
    assert [(k.kind, k.value) for k in knobs] == [
        ("choice", "-O2"),
        ("int", 512),
        ("choice", "IJK"),
        ("float", 0.5),
    ]
    assert (knobs[1].low, knobs[1].high) == (1, 512)
    assert knobs[0].options == ("-O2", "-O3", "-O3 -march=native")
    assert knobs[1].label == "k.c:4"


def test_set_knobs_rewrites_only_the_values() -> None:
    program = Program({"k.c": SOURCE})
    knobs = find_knobs(program)
    child = set_knobs(program, knobs, {0: "-O3 -march=native", 1: 64, 2: "IKJ", 3: 1.25})
    assert "// cflags: -O3 -march=native    @knob" in child.files["k.c"]
    assert "#define TILE 64 // @knob int 1..512" in child.files["k.c"]
    assert [k.value for k in find_knobs(child)] == ["-O3 -march=native", 64, "IKJ", 1.25]
    # the longest option wins, so re-parsing a multi-word choice is stable
    again = set_knobs(child, find_knobs(child), {0: "-O3"})
    assert find_knobs(again)[0].value == "-O3"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("#define T 900 // @knob int 1..512", "outside its range"),
        ("#define T 9 // @knob int 1-512", "needs a range"),
        ("#define T X // @knob int 1..512", "no numeric literal"),
        ("#define T A // @knob choice B | C", "none of the options"),
        ("#define T A // @knob choice A", "at least two"),
        ("#define T 3 // @knob big 1..5", "unknown knob kind"),
        ("#define T 48 // @knob pow2 1..4096", "power of two"),
        ("#define T 64 // @knob pow2 3..4096", "power of two"),
        ("#define T 64 // @knob pow2 0..4096", "power of two"),
        ("#define T 64 // @knob pow2 1..1000", "power of two"),
        ("#define T 64.0 // @knob pow2 1..4096", "not an integer"),
        ("#define T 1024 // @knob pow2 1..512", "outside its range"),
        ("#define T 9 // @knob int 1..512 lin", "no scale 'lin'"),
        ("#define T 0.5 // @knob float 0.01..10 log", "only int takes one"),
        ("#define T 64 // @knob pow2 1..4096 log", "only int takes one"),
    ],
)
def test_malformed_knobs_name_the_line(line: str, message: str) -> None:
    program = Program({"k.c": block(line)})
    with pytest.raises(ProgramError, match=message) as info:
        find_knobs(program)
    assert "k.c:2" in str(info.value)


def test_a_knob_outside_a_block_is_an_error() -> None:
    program = Program(
        {"k.c": "#define T 3 // @knob int 1..5\n// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n"}
    )
    with pytest.raises(ProgramError, match="outside an EVOLVE-BLOCK"):
        find_knobs(program)


def test_pow2_and_log_knobs_parse_with_their_range() -> None:
    text = (
        "// EVOLVE-BLOCK-START\n"
        "#define TILE 64 // @knob pow2 1..4096\n"
        "#define CHUNK 2048 /* @knob int 1..65536 log */\n"
        "#define N 7 // @knob int 1..64\n"
        "// EVOLVE-BLOCK-END\n"
    )
    tile, chunk, plain = find_knobs(Program({"k.c": text}))
    assert (tile.kind, tile.value, tile.low, tile.high, tile.log) == ("pow2", 64, 1, 4096, False)
    assert (chunk.kind, chunk.value, chunk.high, chunk.log) == ("int", 2048, 65536, True)
    assert not plain.log
    child = set_knobs(Program({"k.c": text}), [tile, chunk], {0: 8, 1: 16})
    assert "#define TILE 8 // @knob pow2 1..4096" in child.files["k.c"]
    assert [k.value for k in find_knobs(child)] == [8, 16, 7]


@pytest.mark.parametrize(
    ("annotation", "bounds"),
    [
        ("int 1..512", (1, 512)),
        ("int -256..512", (-256, 512)),
        ("int 1 .. 5", (1, 5)),
        ("float 0.01..10", (0.01, 10.0)),
        ("float -0.5..-0.01", (-0.5, -0.01)),
        ("float 1e-3..1e3", (0.001, 1000.0)),
        ("float 0.0..1.0 */", (0.0, 1.0)),
    ],
)
def test_ranges_written_before_scales_existed_still_parse(
    annotation: str, bounds: tuple[float, float]
) -> None:
    """The range pattern grew an optional scale word; every range it read before, it reads
    the same way, and none of them comes out log."""
    value = "-0.1" if "-0.5" in annotation else "1"
    knob = find_knobs(Program({"k.c": block(f"x = {value}; // @knob {annotation}")}))[0]
    assert (knob.low, knob.high) == bounds and not knob.log


def test_the_scale_does_not_keep_knobs_from_pairing_in_a_crossover() -> None:
    """Values are exchanged when they are valid for both knobs; `log` changes only how a
    value moves, while a different kind or range does change what is valid."""

    def signature(annotation: str) -> tuple[object, ...]:
        line = f"#define T 64 // @knob {annotation}"
        return find_knobs(Program({"k.c": block(line)}))[0].signature

    assert signature("int 1..4096") == signature("int 1..4096 log")
    assert signature("int 1..4096") != signature("pow2 1..4096")
    assert signature("pow2 1..4096") != signature("pow2 1..2048")
