import shutil
import subprocess
from pathlib import Path

import pytest

from evolve.plugin.program import Program, ProgramError, layout_free

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


def test_code_hash_ignores_trailing_blanks_and_blank_lines_in_c_but_not_code() -> None:
    program = Program({"k.c": C_PROGRAM})
    spaced = Program(
        {
            "k.c": C_PROGRAM.replace("return 2; }", "return 2; }  \t").replace(
                "START\n", "START\n\n\n"
            )
        }
    )
    changed = Program({"k.c": C_PROGRAM.replace("return 2;", "return 5;")})
    inner = Program({"k.c": C_PROGRAM.replace("return 2;", "return  2;")})
    assert program.code_hash == spaced.code_hash
    assert program.code_hash != changed.code_hash
    assert program.code_hash != inner.code_hash  # only safe inside no string: not assumed


def run_python(source: str) -> list[int]:
    namespace: dict[str, object] = {}
    exec(source, namespace)
    return [namespace["f"](x) for x in (0, 1)]  # type: ignore[operator]


def python_block(body: str) -> str:
    return f"# EVOLVE-BLOCK-START\n{body}# EVOLVE-BLOCK-END\n"


def test_python_programs_that_differ_only_in_indentation_hash_apart() -> None:
    nested = python_block(
        "def f(x):\n    if x:\n        return 1\n        return 2\n    return 3\n"
    )
    dedented = python_block("def f(x):\n    if x:\n        return 1\n    return 2\n    return 3\n")
    assert run_python(nested) != run_python(dedented)  # they really behave differently
    assert Program({"p.py": nested}).code_hash != Program({"p.py": dedented}).code_hash


def test_python_trailing_blanks_and_blank_lines_count() -> None:
    """They may sit inside a triple-quoted string, where they are data."""
    quoted = python_block('def f(x):\n    return len("""a\n\n""") + x\n')
    trailing = quoted.replace('"""a\n', '"""a  \n')
    blank = quoted.replace('"""a\n', '"""a\n\n')
    assert len({run_python(t)[0] for t in (quoted, trailing, blank)}) == 3
    hashes = {Program({"p.py": t}).code_hash for t in (quoted, trailing, blank)}
    assert len(hashes) == 3


@pytest.mark.parametrize(
    ("name", "text", "variant"),
    [
        # A blank line ends a macro continued onto it; without it the macro goes on.
        ("k.c", "#define TWO 1 + \\\n\n1\n", "#define TWO 1 + \\\n1\n"),
        # Trailing blanks and blank lines inside a raw string literal are its text.
        ("k.cpp", 'auto s = R"(a  \n)";\n', 'auto s = R"(a\n)";\n'),
        ("k.cu", 'auto s = u8R"(a\n\n)";\n', 'auto s = u8R"(a\n)";\n'),
        # A program that reads its own line numbers sees blank lines.
        ("k.h", "\nint line = __LINE__;\n", "int line = __LINE__;\n"),
        # A file type we do not know keeps every byte.
        ("k.txt", "a  \n\nb\n", "a\nb\n"),
        ("Makefile", "all:\n\tcc k.c\n", "all:\n\tcc k.c  \n"),
    ],
)
def test_layout_that_can_matter_is_kept(name: str, text: str, variant: str) -> None:
    assert layout_free(name, text) != layout_free(name, variant)


def test_c_headers_and_cuda_sources_drop_layout_like_c() -> None:
    for name in ("k.h", "k.hpp", "k.cc", "k.cu", "k.cuh", "K.C"):
        assert layout_free(name, "int a;  \n\n\tint b;\t\n") == "int a;\n\tint b;"


def test_moving_text_between_files_changes_the_hash() -> None:
    block = python_block("x = 1\n")
    one = Program({"a.py": block, "b.py": "y = 2\n"})
    other = Program({"a.py": block + "y = 2\n", "b.py": ""})
    assert one.code_hash != other.code_hash


def c_output(files: dict[str, str], folder: Path) -> str:
    """What the program's first file prints when GCC builds and runs it (warnings are off:
    these programs are odd on purpose)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_bytes(text.encode())
    binary = folder / "a.out"
    subprocess.run(["gcc", "-w", "-o", binary, folder / next(iter(files))], check=True)
    return subprocess.run([binary], capture_output=True, text=True, check=True).stdout


PASTED_LINE = """#include <stdio.h>
#define CAT(a, b) a##b
// EVOLVE-BLOCK-START
int line(void) { return CAT(__LI, NE__); }
// EVOLVE-BLOCK-END
int main(void) { printf("%d\\n", line()); return 0; }
"""


def swallowing_comment(space: str) -> str:
    """A comment whose backslash, `space` and newline splice the next line into it."""
    return f"""#include <stdio.h>
int main(void) {{
    int x = 1;
    // EVOLVE-BLOCK-START
    // note \\{space}

    x = 2;
    // EVOLVE-BLOCK-END
    printf("%d\\n", x);
    return 0;
}}
"""


COLLIDED = {
    # Pasting builds __LINE__ though the text never spells it: blank lines move its value.
    "token pasting": (PASTED_LINE, PASTED_LINE.replace("<stdio.h>\n", "<stdio.h>\n\n")),
    # GCC splices across the whitespace, so the comment swallows the blank line in one
    # program and `x = 2;` in the other.
    **{
        f"backslash, {name}, newline": (
            swallowing_comment(space),
            swallowing_comment(space).replace("\n\n", "\n"),
        )
        for name, space in [("form feed", "\f"), ("vertical tab", "\v"), ("CR", "\r")]
    },
}


@pytest.mark.parametrize("case", COLLIDED)
def test_c_programs_that_behave_differently_hash_apart(case: str, tmp_path: Path) -> None:
    """Each pair once shared a hash, so the store would have evaluated only one of them."""
    text, variant = COLLIDED[case]
    outputs = {c_output({"k.c": t}, tmp_path / str(i)) for i, t in enumerate((text, variant))}
    assert len(outputs) == 2  # they really behave differently
    assert Program({"k.c": text}).code_hash != Program({"k.c": variant}).code_hash


def test_a_header_that_pastes_line_numbers_keeps_its_users_exact(tmp_path: Path) -> None:
    """The macro is defined in one file and shows the line numbers of the file using it."""
    header = "#define CAT(a, b) a##b\n"
    main = PASTED_LINE.replace("#define CAT(a, b) a##b\n", '#include "cat.h"\n')
    moved = main.replace("<stdio.h>\n", "<stdio.h>\n\n")
    assert "##" not in main  # nothing in the file itself shows its layout
    outputs = {
        c_output({"k.c": text, "cat.h": header}, tmp_path / str(i))
        for i, text in enumerate((main, moved))
    }
    assert len(outputs) == 2
    assert (
        Program({"k.c": main, "cat.h": header}).code_hash
        != Program({"k.c": moved, "cat.h": header}).code_hash
    )


@pytest.mark.parametrize(
    "text",
    [
        "#define CAT(a, b) a %:%: b\nint x;\n",  # the digraph of ##
        "#line 10\nint x;\n",
        "#/* a comment */line 10\nint x;\n",
        "int l = __LI\\\nNE__;\n",  # a splice inside the name
        "int l = __LI??/\nNE__;\n",
        "int l = __builtin_LINE();\n",
        "auto l = std::source_location::current().line();\n",
        "const char s[] = {\n#embed __FILE__\n};\n",
        "int h = __has_embed(__FILE__);\n",
        'asm(".incbin \\"k.c\\"");\n',
        "const char *self = __FILE__;\n",
    ],
)
def test_a_file_that_can_see_its_layout_is_hashed_exactly(text: str) -> None:
    """Blank lines and trailing blanks count wherever line numbers or source bytes do."""
    text += "int y;\n"
    variant = "\n" + text.replace("int y;", "int y;  ") + "\n"
    assert layout_free("k.c", text) != layout_free("k.c", variant)


@pytest.mark.parametrize("space", ["\f", "\v", "\r"])
def test_a_file_with_odd_whitespace_is_hashed_exactly(space: str) -> None:
    text = f"int a;{space}\nint b;\n"
    assert layout_free("k.c", text) == text
    assert layout_free("k.c", text + "\n") != layout_free("k.c", text)


def test_a_backslash_before_any_whitespace_splices() -> None:
    """str.rstrip's idea of whitespace, wider than any compiler's, keeps the next line."""
    text = "// note \\\u00a0\n\nint x;\n"
    assert layout_free("k.c", text) == text.rstrip("\n")
