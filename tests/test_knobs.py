import pytest

from evolve.knobs import find_knobs, set_knobs
from evolve.program import Program, ProgramError

SOURCE = """int head;
// EVOLVE-BLOCK-START
// cflags: -O2    @knob choice -O2 | -O3 | -O3 -march=native
#define TILE 512 // @knob int 1..512
#define ORDER IJK /* @knob choice IJK | IKJ */
#define ALPHA 0.5 // @knob float 0.1..2
int unannotated = 7;
// EVOLVE-BLOCK-END
"""


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
    ],
)
def test_malformed_knobs_name_the_line(line: str, message: str) -> None:
    program = Program({"k.c": f"// EVOLVE-BLOCK-START\n{line}\n// EVOLVE-BLOCK-END\n"})
    with pytest.raises(ProgramError, match=message) as info:
        find_knobs(program)
    assert "k.c:2" in str(info.value)


def test_a_knob_outside_a_block_is_an_error() -> None:
    program = Program(
        {"k.c": "#define T 3 // @knob int 1..5\n// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n"}
    )
    with pytest.raises(ProgramError, match="outside an EVOLVE-BLOCK"):
        find_knobs(program)
