from pathlib import Path

import pytest

from evolve.mutators.edits import EditError, apply_diff, apply_rewrite, parse_diff
from evolve.plugin.knobs import find_knobs
from evolve.plugin.program import Program

SEED = Path(__file__).parent.parent / "tasks" / "matmul_c" / "seed.c"

KERNEL = """\
#include <stdio.h>
int fixed(void) { return 1; }
// EVOLVE-BLOCK-START
int tuned(int x) {
    int y = x + 1;
    return y * 2;
}
int other(int x) {
    int y = x + 1;
    return y * 3;
}
// EVOLVE-BLOCK-END
int also_fixed(void) { return 3; }
"""


def block(search: str, replace: str, path: str = "") -> str:
    head = f"{path}\n" if path else ""
    return f"{head}<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def apply(program: Program, reply: str) -> Program:
    return apply_diff(program, parse_diff(reply))


def test_one_block_applies_amid_prose_and_fences() -> None:
    reply = (
        "The multiply is cheaper as a shift.\n```c\n"
        + block("    return y * 2;\n", "    return y << 1;\n")
        + "```\nThat should help.\n"
    )
    child = apply(Program({"k.c": KERNEL}), reply)
    assert child.files["k.c"] == KERNEL.replace("y * 2", "y << 1")


def test_several_blocks_apply_in_order() -> None:
    reply = block("int tuned(int x) {\n", "int tuned(int x) {  // hot\n") + block(
        "    return y * 3;\n", "    return 3 * y;\n"
    )
    child = apply(Program({"k.c": KERNEL}), reply)
    assert "int tuned(int x) {  // hot\n" in child.files["k.c"]
    assert "return 3 * y;" in child.files["k.c"]


def test_a_block_that_matches_nowhere_names_itself_and_shows_the_nearest_lines() -> None:
    reply = block("    return y * 2;\n", "    return y;\n") + block(
        "int tuned(int z) {\n    int y = z + 1;\n", "int tuned(int z) {\n"
    )
    with pytest.raises(EditError) as caught:
        apply(Program({"k.c": KERNEL}), reply)
    message = str(caught.value)
    assert "1 of 2" in message
    assert "Block 2:" in message
    assert "int tuned(int z) {" in message
    assert "not found" in message
    assert "4 | int tuned(int x) {" in message
    assert "5 |     int y = x + 1;" in message


def test_an_ambiguous_block_is_refused_with_where_it_matched() -> None:
    with pytest.raises(EditError, match=r"ambiguous.*2 places.*lines 5, 9"):
        apply(Program({"k.c": KERNEL}), block("    int y = x + 1;\n", "    int y = x;\n"))


def test_indentation_and_trailing_spaces_are_tolerated_and_the_replacement_shifted() -> None:
    program = Program({"k.c": KERNEL})
    dedented = block("int y = x + 1;  \nreturn y * 3;\n", "int y = x - 1;\nreturn y * 3;\n")
    child = apply(program, dedented)
    assert "int other(int x) {\n    int y = x - 1;\n    return y * 3;\n}" in child.files["k.c"]
    indented = block("  }\n  int other(int x) {\n", "  }\n  int other(long x) {\n")
    assert "}\nint other(long x) {\n" in apply(program, indented).files["k.c"]
    uneven = block("int other(int x) {\nint y = x + 1;\n", "int other(int x) {\nint y = x;\n")
    assert "int other(int x) {\nint y = x;\n" in apply(program, uneven).files["k.c"]


def test_an_exact_match_wins_over_loose_ones() -> None:
    text = "// EVOLVE-BLOCK-START\nx = 1;\n  x = 1;\n// EVOLVE-BLOCK-END\n"
    child = apply(Program({"k.c": text}), block("  x = 1;\n", "  x = 2;\n"))
    assert child.files["k.c"] == text.replace("  x = 1;", "  x = 2;")


def test_edits_outside_the_block_are_refused() -> None:
    reply = block("int also_fixed(void) { return 3; }\n", "int also_fixed(void) { return 4; }\n")
    with pytest.raises(EditError, match="Only text inside the EVOLVE-BLOCK") as fixed:
        apply(Program({"k.c": KERNEL}), reply)
    with pytest.raises(EditError, match="Only text inside the EVOLVE-BLOCK") as marker:
        apply(Program({"k.c": KERNEL}), block("// EVOLVE-BLOCK-END\n", ""))
    assert fixed.value.outcome == marker.value.outcome == "outside_block"


def test_every_other_edit_error_is_unparseable() -> None:
    program = Program({"k.c": KERNEL})
    failures = [
        lambda: parse_diff("prose only"),
        lambda: apply(program, block("    return y * 7;\n", "    return y;\n")),
        lambda: apply(program, block("    int y = x + 1;\n", "    int y = x;\n")),
        lambda: apply_rewrite(program, "no code"),
    ]
    for failure in failures:
        with pytest.raises(EditError) as caught:
            failure()
        assert caught.value.outcome == "unparseable_after_repair", str(caught.value)


def test_a_diff_that_changes_nothing_is_refused() -> None:
    with pytest.raises(EditError, match="no change"):
        apply(Program({"k.c": KERNEL}), block("    return y * 2;\n", "    return y * 2;\n"))


def test_a_reply_without_blocks_is_refused() -> None:
    with pytest.raises(EditError, match="no SEARCH/REPLACE block"):
        parse_diff("I would swap the loops so the inner one streams along rows.")
    with pytest.raises(EditError, match="not closed"):
        parse_diff("<<<<<<< SEARCH\nx\n=======\ny\n")


def test_path_lines_pick_the_file_in_a_multi_file_program() -> None:
    header = "// EVOLVE-BLOCK-START\n#define N 4\n// EVOLVE-BLOCK-END\n"
    program = Program({"src/k.c": KERNEL, "src/k.h": header})
    reply = (
        block("#define N 4\n", "#define N 8\n", path="path: src/k.h")
        + "\n### `k.c`\n```c\n"
        + block("    return y * 2;\n", "    return y * 4;\n")
        + "```\n"
        + block("    return y * 3;\n", "    return y * 9;\n")
    )
    edits = parse_diff(reply)
    assert [e.path for e in edits] == ["src/k.h", "k.c", None]
    child = apply_diff(program, edits)
    assert child.files["src/k.h"] == header.replace("N 4", "N 8")
    assert "y * 4" in child.files["src/k.c"]
    assert "y * 9" in child.files["src/k.c"]
    with pytest.raises(EditError, match=r"'other\.c' is not part of the program"):
        apply(program, block("#define N 4\n", "#define N 8\n", path="other.c"))


def test_rewrite_replaces_the_block_with_or_without_echoed_markers() -> None:
    program = Program({"k.c": KERNEL})
    body = "int tuned(int x) { return 2 * x + 2; }\nint other(int x) { return 3 * x + 3; }\n"
    plain = apply_rewrite(program, f"Simpler:\n```c\n{body}```\n")
    expected = KERNEL.split("// EVOLVE-BLOCK-START\n")[0] + (
        "// EVOLVE-BLOCK-START\n" + body + "// EVOLVE-BLOCK-END\n"
        "int also_fixed(void) { return 3; }\n"
    )
    assert plain.files["k.c"] == expected
    echoed = f"```c\n// EVOLVE-BLOCK-START\n{body}// EVOLVE-BLOCK-END\n```"
    assert apply_rewrite(program, echoed).files["k.c"] == expected
    assert apply_rewrite(program, f"```c\n{KERNEL.replace('int tuned', 'int t')}```").files[
        "k.c"
    ] == KERNEL.replace("int tuned", "int t")


def test_rewrite_errors_and_the_first_of_several_blocks() -> None:
    program = Program({"k.c": KERNEL})
    with pytest.raises(EditError, match="no fenced code block"):
        apply_rewrite(program, "Just swap the loops.")
    with pytest.raises(EditError, match="2 fenced code blocks"):
        apply_rewrite(program, "```c\nint a;\n```\nand\n```c\nint b;\n```\n")
    two = "// EVOLVE-BLOCK-START\na\n// EVOLVE-BLOCK-END\nmid\n// EVOLVE-BLOCK-START\nb\n"
    two += "// EVOLVE-BLOCK-END\n"
    child = apply_rewrite(Program({"k.c": two}), "```\nnew\n```")
    assert child.files["k.c"] == two.replace("\na\n", "\nnew\n")
    with pytest.raises(EditError, match="no change"):
        apply_rewrite(Program({"k.c": two}), "```\na\n```")


def test_the_real_matmul_seed_takes_a_loop_order_edit() -> None:
    seed = Program({"seed.c": SEED.read_text()})
    order = "#define LOOP_ORDER IJK  // @knob choice IJK | IKJ | JIK | JKI | KIJ | KJI\n"
    reply = "Stream B along rows:\n```c\n" + block(order, order.replace(" IJK ", " IKJ ")) + "```"
    child = apply(seed, reply)
    knob = next(k for k in find_knobs(child) if "IKJ" in k.options and k.kind == "choice")
    assert knob.value == "IKJ"
    assert child.code_hash != seed.code_hash
