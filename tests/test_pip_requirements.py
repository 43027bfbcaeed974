"""PyPI requirements: strings checked as pip reads them (versions, extras, markers), a
requirements.txt read as pip reads it (comments, continuations, `-r`, options passed over),
`sandbox.pip` checked on its line, and the image's tag a hash of the list."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from evolve.plugin.pip_requirements import (
    RequirementsError,
    project,
    read_requirements,
    requirement,
)
from evolve.sandboxes.images.derived import derived_tag
from evolve.task.loading import TaskFileError, load_task
from evolve.task.schema import SandboxSpec


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("pywavelets", "pywavelets"),
        ("scipy >= 1.11 , <2", "scipy<2,>=1.11"),
        ("PyKalman==0.9.7", "PyKalman==0.9.7"),
        ("requests[socks]>=2", "requests[socks]>=2"),
        ("tomli; python_version < '3.11'", 'tomli; python_version < "3.11"'),
        ("ortools@https://example.org/ortools.whl", "ortools @ https://example.org/ortools.whl"),
    ],
)
def test_a_requirement_is_kept_as_pip_reads_it(written: str, kept: str) -> None:
    assert requirement(written) == kept
    assert requirement(kept) == kept  # the canonical form reads back the same


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("-r other.txt", "is an option, not a requirement"),
        ("--index-url=https://example.org", "is an option, not a requirement"),
        ("./local/package", "is not a requirement evolve can install"),
        ("scipy>=>1", "is not a requirement evolve can install"),
        ("https://example.org/x.whl", "is not a requirement evolve can install"),
        ("", "is not a requirement evolve can install"),
    ],
)
def test_what_pip_would_not_read_as_a_requirement_is_refused(written: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        requirement(written)


def test_the_project_name_is_normalised() -> None:
    assert project("PyWavelets>=1.4") == "pywavelets"
    assert project("scikit_learn[all]; os_name == 'posix'") == "scikit-learn"


def test_a_requirements_file_is_read_as_pip_reads_it(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        textwrap.dedent("""\
            # signal processing
            numpy>=1.21.0
            scipy>=1.7.0  # filters
            pykalman \\
                ==0.9.7
            -r extra/more.txt
            --extra-index-url https://example.org/simple
            PyWavelets==1.6.0 --hash=sha256:0123
            numpy>=1.21.0
        """)
    )
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "more.txt").write_text("matplotlib\n-r ../pinned.txt\n")
    (tmp_path / "pinned.txt").write_text('tomli; python_version < "3.11"\n')
    found = read_requirements(tmp_path, "requirements.txt")
    assert found.listed == [
        "numpy>=1.21.0",
        "scipy>=1.7.0",
        "pykalman==0.9.7",
        "matplotlib",
        'tomli; python_version < "3.11"',
        "PyWavelets==1.6.0",
    ]
    assert found.passed_over == [
        "--extra-index-url https://example.org/simple",
        "--hash=sha256:0123",
    ]


@pytest.mark.parametrize(
    ("files", "where", "said"),
    [
        ({"requirements.txt": "numpy\n./vendored\n"}, "requirements.txt:2", "'./vendored'"),
        ({"requirements.txt": "numpy\n-r\n"}, "requirements.txt:2", "-r needs the file"),
        (
            {"requirements.txt": "-r a.txt\n", "a.txt": "scipy\n-r requirements.txt\n"},
            "a.txt:2",
            "includes itself (through requirements.txt -> a.txt)",
        ),
        ({"requirements.txt": "numpy\n-r ../../etc/hosts\n"}, "requirements.txt:2", "outside"),
        ({"requirements.txt": "\n\n-r missing.txt\n"}, "requirements.txt:3", "cannot read"),
    ],
)
def test_a_line_that_cannot_be_used_is_named_with_its_file_and_line(
    tmp_path: Path, files: dict[str, str], where: str, said: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(RequirementsError) as caught:
        read_requirements(tmp_path, "requirements.txt")
    assert str(caught.value).startswith(f"{where}: ")
    assert said in str(caught.value)


def test_a_binary_requirements_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_bytes(b"numpy\x00\n")
    with pytest.raises(RequirementsError, match=r"requirements\.txt: cannot use"):
        read_requirements(tmp_path, "requirements.txt")


def test_sandbox_pip_keeps_requirements_as_pip_reads_them() -> None:
    spec = SandboxSpec(pip=["PyWavelets >= 1.4", "pykalman"])
    assert spec.pip == ["PyWavelets>=1.4", "pykalman"]
    with pytest.raises(ValidationError, match="is an option, not a requirement"):
        SandboxSpec(pip=["--pre"])


def test_pip_requirements_must_be_installed_before_a_sandbox_opens() -> None:
    for backend in ("docker", "process"):
        spec = SandboxSpec(backend=backend, pip=["pykalman"])
        with pytest.raises(RuntimeError, match=r"sandbox\.pip are not installed yet"):
            spec.open()
        built = spec.built("/var/cache/evolve/python/0123456789abcdef")
        assert (built.image, built.pip, built.packages) == (
            "/var/cache/evolve/python/0123456789abcdef",
            [],
            [],
        )


def test_a_bad_requirement_fails_the_task_file_on_its_own_line(tmp_path: Path) -> None:
    (tmp_path / "prog.sh").write_text(
        "# EVOLVE-BLOCK-START\nX=3  # @knob int 1..5\n# EVOLVE-BLOCK-END\n"
    )
    task = tmp_path / "task.yaml"
    task.write_text(
        textwrap.dedent("""\
            name: pip
            seed: prog.sh
            evaluator: {name: command, params: {run: sh prog.sh}}
            objectives: [{name: x, direction: maximize}]
            budget: {candidates: 3}
            sandbox:
              pip:
                - scipy>=1.11
                - -r requirements.txt
        """)
    )
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert (caught.value.line, caught.value.field) == (9, "sandbox.pip[1]")
    assert "'-r requirements.txt' is an option, not a requirement" in caught.value.message


def test_the_tag_is_the_recipe_with_its_requirements_in_any_order() -> None:
    base = "evolve-sandbox:abc"
    tag = derived_tag(base, ["jq"], ["scipy>=1.7", "pykalman"])
    assert derived_tag(base, ["jq"], ["pykalman", "scipy>=1.7", "pykalman"]) == tag
    assert derived_tag(base, ["jq"], ["pykalman", "scipy>=1.8"]) != tag
    assert derived_tag(base, [], ["pykalman", "scipy>=1.7"]) != tag
    assert derived_tag(base, ["jq"], []) == derived_tag(base, ["jq"])  # as before pip
    assert derived_tag(base, ["jq"], []) != tag
