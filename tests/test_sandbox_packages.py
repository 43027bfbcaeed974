"""A task's `sandbox.packages`: names checked on their line, an image built from the local
base with apt-get, once per recipe, and used by the run; the process sandbox warns."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import docker
import pytest
from pydantic import ValidationError

from evolve.plugin.sandbox import Limits
from evolve.sandboxes.docker import DockerSandbox, docker_available
from evolve.sandboxes.images.build import image_tag
from evolve.sandboxes.images.derived import SETTINGS, build_derived, derived_tag, host_settings
from evolve.task.loading import TaskFileError, load_task
from evolve.task.schema import SandboxSpec

EVOLVE = [sys.executable, "-m", "evolve"]
AVAILABLE, WHY = docker_available()
needs_docker = pytest.mark.skipif(not AVAILABLE, reason=f"no Docker sandbox here: {WHY}")


def program(report: str) -> str:
    """A shell candidate with one knob, X, that `report` prints as the metric x."""
    return f"# EVOLVE-BLOCK-START\nX=3  # @knob int 1..5\n# EVOLVE-BLOCK-END\n{report}\n"


# Reporting through jq, so that a score at all says that jq was where the candidate ran.
BY_JQ = program("""jq -cn --argjson x "$X" '{x: $x}'""")
BY_PRINTF = program("""printf '{"x": %s}\\n' $X""")


def write_task(folder: Path, sandbox: str, candidate: str = BY_JQ) -> Path:
    """A task whose `sandbox:` section is `sandbox` (YAML, unindented)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prog.sh").write_text(candidate)
    task = folder / "task.yaml"
    task.write_text(
        textwrap.dedent("""\
            name: packages
            seed: prog.sh
            evaluator: {name: command, params: {run: sh prog.sh}}
            objectives: [{name: x, direction: maximize}]
            mutators: [{name: autotuner}]
            budget: {candidates: 3}
            sandbox:
        """)
        + textwrap.indent(sandbox, "  ")
    )
    return task


def evolve(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EVOLVE, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("name", ["python3-six", "g++", "libstdc++6", "jq", "x11-utils", "ca"])
def test_debian_names_are_accepted(name: str) -> None:
    assert SandboxSpec(packages=[name]).packages == [name]


@pytest.mark.parametrize("name", ["Python3-Six", "a", "-rf", "jq;rm", "six=1.16", "a b", ""])
def test_what_is_not_a_debian_name_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="is not a Debian package name"):
        SandboxSpec(packages=[name])


@pytest.mark.system
def test_a_bad_name_fails_the_task_file_on_its_own_line(tmp_path: Path) -> None:
    task = write_task(tmp_path, "packages:\n  - jq\n  - python3_six\n")
    line = task.read_text().splitlines().index("    - python3_six") + 1
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert caught.value.line == line and caught.value.field == "sandbox.packages[1]"
    assert "'python3_six' is not a Debian package name" in caught.value.message
    refused = evolve("sandbox", "build", "--task", task, cwd=tmp_path)
    assert refused.returncode == 2
    assert f"task.yaml:{line}: sandbox.packages[1]: 'python3_six'" in refused.stderr


def test_the_tag_is_the_recipe_in_any_order() -> None:
    tag = derived_tag("evolve-sandbox:abc", ["jq", "python3-six"])
    assert tag.startswith("evolve-sandbox-packages:")
    assert derived_tag("evolve-sandbox:abc", ["python3-six", "jq", "jq"]) == tag
    assert derived_tag("evolve-sandbox:abd", ["jq", "python3-six"]) != tag
    assert derived_tag("evolve-sandbox:abc", ["jq"]) != tag


def test_the_build_takes_the_hosts_pip_settings_and_ca_and_no_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("PIP_CERT", str(bundle))
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example.org/simple")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.org:3128")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-evolve-canary")
    with tarfile.open(fileobj=io.BytesIO(host_settings())) as tar:
        held = {member.name: tar.extractfile(member).read() for member in tar.getmembers()}
    assert held["evolve-build/ca.pem"] == bundle.read_bytes()
    env = held["evolve-build/env"].decode()
    assert "export PIP_INDEX_URL=https://mirror.example.org/simple\n" in env
    assert "export HTTPS_PROXY=http://proxy.example.org:3128\n" in env
    assert f"export PIP_CERT={SETTINGS}/ca.pem\n" in env
    assert "sk-evolve-canary" not in env and "OPENAI" not in env


def test_a_docker_sandbox_with_packages_opens_only_once_they_are_built() -> None:
    spec = SandboxSpec(packages=["jq"])
    with pytest.raises(RuntimeError, match="are not installed yet"):
        spec.open()
    built = spec.built("evolve-sandbox-packages:0123456789ab")
    assert (built.image, built.packages) == ("evolve-sandbox-packages:0123456789ab", [])


@pytest.mark.docker
@needs_docker
def test_the_image_is_built_once_has_the_package_and_the_base_does_not() -> None:
    said: list[str] = []
    tag = build_derived(None, ["jq"], force=True, progress=said.append)
    assert tag == derived_tag(image_tag(), ["jq"])
    assert said[0].startswith(f"building {tag}: {image_tag()} + jq")
    assert "  apt-get: configuring packages" in said and said[-1].startswith(f"built {tag}")
    built_id = docker.from_env().images.get(tag).id

    again: list[str] = []
    assert build_derived(None, ["jq", "jq"], progress=again.append) == tag
    assert again == [f"{tag} ({image_tag()} + jq) is present; not rebuilding"]
    assert docker.from_env().images.get(tag).id == built_id

    probe = ["sh", "-c", "command -v jq && jq -n 1+1"]
    for image, has_jq in ((tag, True), (None, False)):
        box = DockerSandbox(image)
        try:
            result = box.run(probe, files={}, limits=Limits(timeout_s=20))
        finally:
            box.close()
        assert result.ok is has_jq, result.stderr
        if has_jq:
            assert result.stdout == b"/usr/bin/jq\n2\n"


@pytest.mark.docker
@needs_docker
def test_an_unknown_package_fails_the_build_with_apt_gets_words() -> None:
    with pytest.raises(RuntimeError, match="apt-get failed") as caught:
        build_derived(None, ["no-such-package-evolve"], progress=lambda line: None)
    assert "Unable to locate package no-such-package-evolve" in str(caught.value)
    assert not docker.from_env().images.list(
        name=derived_tag(image_tag(), ["no-such-package-evolve"])
    )


@pytest.mark.docker
@needs_docker
def test_a_missing_base_is_named_with_its_fix() -> None:
    with pytest.raises(RuntimeError, match="the base image evolve-sandbox:nope is missing"):
        build_derived("evolve-sandbox:nope", ["jq"], progress=lambda line: None)


@pytest.mark.docker
@needs_docker
def test_sandbox_build_task_then_run_uses_the_packages(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", "backend: docker\npackages: [jq]\n")
    tag = derived_tag(image_tag(), ["jq"])
    built = evolve("sandbox", "build", "--task", task, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"sandbox image ready: {tag}" in built.stdout and "not rebuilding" in built.stdout

    done = evolve("run", task, "--plain", "--name", "jq", "--workers", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"sandbox image with jq: {tag}" in done.stdout
    assert ", seed 3: " in done.stdout  # the seed's x, as jq printed it


@pytest.mark.docker
@needs_docker
def test_a_failed_build_stops_the_run_naming_the_command(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", "packages: [no-such-package-evolve]\n")
    done = evolve("run", task, cwd=tmp_path)
    assert done.returncode == 2
    assert "Unable to locate package no-such-package-evolve" in done.stderr
    assert f"evolve sandbox build --task {task}" in done.stderr
    assert not (tmp_path / "results" / "evolve.db").exists()


@pytest.mark.system
def test_the_process_sandbox_warns_that_it_installs_no_debian_package(tmp_path: Path) -> None:
    sandbox = "backend: process\npackages: [python3, no-such-pkg]\n"
    task = write_task(tmp_path / "task", sandbox, BY_PRINTF)
    done = evolve("run", task, "--plain", "--workers", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sandbox.packages: the process sandbox installs no Debian package" in done.stderr
    if shutil.which("dpkg-query"):
        assert "dpkg finds these missing: no-such-pkg" in done.stderr
    else:
        assert "no dpkg here to check them" in done.stderr


# A tiny pure-Python package from PyPI, pinned, that neither the image nor Debian's archive
# holds: importing it in a job proves pip put it where the image's `python3 -I` looks.
TINY = "tomli-w==1.0.0"


@pytest.mark.docker
@needs_docker
def test_pip_requirements_are_built_into_the_image_beside_debian_packages() -> None:
    said: list[str] = []
    tag = build_derived(None, ["jq"], pip=[TINY], force=True, progress=said.append)
    assert tag == derived_tag(image_tag(), ["jq"], [TINY]) != derived_tag(image_tag(), ["jq"])
    assert said[0].startswith(f"building {tag}: {image_tag()} + jq + pip: {TINY}, with apt-get")
    assert f"  pip: collecting {TINY}" in said and "  pip: installing tomli-w" in said
    probe = ["sh", "-c", "jq -n 1+1 && python3 -I -c 'import tomli_w; print(tomli_w.__file__)'"]
    box = DockerSandbox(tag)
    try:
        result = box.run(probe, files={}, limits=Limits(timeout_s=20))
    finally:
        box.close()
    assert result.ok, result.stderr
    assert result.stdout == b"2\n/usr/local/lib/python3.11/dist-packages/tomli_w/__init__.py\n"
    labels = docker.from_env().images.get(tag).labels
    assert labels["evolve.pip"] == f'["{TINY}"]' and labels["evolve.packages"] == "jq"


@pytest.mark.docker
@needs_docker
def test_a_requirement_pip_cannot_install_fails_the_build_naming_it() -> None:
    wanted = [TINY, "evolve-no-such-package==0.1"]
    with pytest.raises(RuntimeError) as caught:
        build_derived(None, [], pip=wanted, progress=lambda line: None)
    first = str(caught.value).splitlines()[0]
    assert first.startswith("pip could not install evolve-no-such-package==0.1 (exit 1): ERROR:")
    assert "satisfies the requirement evolve-no-such-package==0.1" in first
    assert not docker.from_env().images.list(name=derived_tag(image_tag(), [], wanted))
