import pytest

from evolve.program import Program, ProgramError

C_PROGRAM = """#include <stdio.h>
int fixed(void) { return 1; }
// EVOLVE-BLOCK-START
int tuned(void) { return 2; }
// EVOLVE-BLOCK-END
int also_fixed(void) { return 3; }
"""


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("// EVOLVE-BLOCK-START", "// EVOLVE-BLOCK-END"),
        ("# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"),
        ("/* EVOLVE-BLOCK-START */", "/* EVOLVE-BLOCK-END */"),
        ("-- EVOLVE-BLOCK-START", "-- EVOLVE-BLOCK-END"),
        ("; EVOLVE-BLOCK-START", "; EVOLVE-BLOCK-END"),
    ],
)
def test_blocks_in_every_comment_syntax_allow_only_inside_edits(start: str, end: str) -> None:
    program = Program({"f": f"head\n{start}\nbody\n{end}\ntail\n"})
    child = program.replace({"f": f"head\n{start}\nnew body\nmore\n{end}\ntail\n"})
    assert "new body" in child.files["f"]
    with pytest.raises(ProgramError, match="outside"):
        program.replace({"f": f"HEAD\n{start}\nbody\n{end}\ntail\n"})


def test_edits_may_not_touch_markers_add_files_or_blocks() -> None:
    program = Program({"k.c": C_PROGRAM})
    with pytest.raises(ProgramError):
        program.replace({"k.c": C_PROGRAM.replace("// EVOLVE-BLOCK-END\n", "")})
    with pytest.raises(ProgramError, match="add or remove"):
        program.replace({"k.c": C_PROGRAM, "x.c": ""})
    moved_outside = C_PROGRAM.replace("return 3", "return 4")
    with pytest.raises(ProgramError, match="outside"):
        program.replace({"k.c": moved_outside})


def test_a_program_without_a_block_is_refused() -> None:
    with pytest.raises(ProgramError, match="no EVOLVE-BLOCK"):
        Program({"k.c": "int main(void) { return 0; }\n"})
    with pytest.raises(ProgramError, match="never closed"):
        Program({"k.c": "// EVOLVE-BLOCK-START\nint x;\n"})
    with pytest.raises(ProgramError, match="without a START"):
        Program({"k.c": "// EVOLVE-BLOCK-END\n"})


def test_code_hash_ignores_whitespace_but_not_code() -> None:
    program = Program({"k.c": C_PROGRAM})
    spaced_text = C_PROGRAM.replace("return 2;", "return   2;  ").replace(
        "START\n", "START  \n\n\n"
    )
    spaced = Program({"k.c": spaced_text})
    changed = Program({"k.c": C_PROGRAM.replace("return 2;", "return 5;")})
    assert program.code_hash == spaced.code_hash
    assert program.code_hash != changed.code_hash
