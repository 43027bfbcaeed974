"""The process backend's pip requirements: installed by real pip into a Python environment
kept on this host, once per list, that the jobs' `python -I` runs from, read-only, still
seeing what it saw before; a requirement pip cannot install fails naming it. pip installs
from a wheel built here (PIP_NO_INDEX, PIP_FIND_LINKS), so no test needs the network."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.plugin.sandbox import Limits, SandboxUnavailable
from evolve.sandboxes import process
from evolve.sandboxes.isolation import detect
from evolve.sandboxes.python_env import MARKER, ROOT_ENV, pip_environment

PROBE = "evolve_probe_pkg"
REQUIREMENT = "evolve-probe-pkg==1.0"
EVOLVE = [sys.executable, "-m", "evolve"]


def wheel(folder: Path, value: str) -> None:
    """A pure-Python wheel of evolve-probe-pkg 1.0 whose module holds VALUE."""
    info = "evolve_probe_pkg-1.0.dist-info"
    files = {
        f"{PROBE}/__init__.py": f"VALUE = {value!r}\n".encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: evolve-probe-pkg\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    with zipfile.ZipFile(folder / "evolve_probe_pkg-1.0-py3-none-any.whl", "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """pip that finds only the probe's wheel, and an environments folder every user can
    enter (jobs run as `nobody` when the tests run as root); that folder, removed after."""
    if detect().tool is None:
        pytest.skip(detect().detail)
    root = Path(tempfile.mkdtemp(prefix="evolve-envs-", dir="/var/tmp"))  # a job's /tmp is emptied
    root.chmod(0o755)
    wheels = root / "wheels"
    wheels.mkdir()
    wheel(wheels, "from a wheel")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv(ROOT_ENV, str(root / "envs"))
    try:
        yield root / "envs"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def job(image: str | None, code: str) -> dict:
    """What `code` printed as JSON, run by the sandbox's Python with -I as a job."""
    box = process.open_sandbox(image=image)
    try:
        result = box.run([box.python, "-I", "-c", code], files={}, limits=Limits(timeout_s=30))
    finally:
        box.close()
    assert result.ok, result.stderr.decode()
    return json.loads(result.stdout)


@pytest.mark.system
def test_the_jobs_python_imports_the_requirements_and_what_it_had(offline: Path) -> None:
    said: list[str] = []
    folder = process.provision(image=None, packages=["jq"], pip=[REQUIREMENT], progress=said.append)
    assert folder is not None and Path(folder).parent == offline
    assert said[0].startswith(f"building {folder}: {detect().python} + pip: {REQUIREMENT}")
    assert "  pip: installing evolve-probe-pkg" in said
    before = job(None, "import json, site; print(json.dumps(site.getsitepackages()))")
    seen = job(
        folder,
        textwrap.dedent(f"""\
            import json, os, sys, {PROBE}
            try:
                open(os.path.join(os.path.dirname({PROBE}.__file__), "planted.py"), "w")
                wrote = True
            except OSError:
                wrote = False
            print(json.dumps({{"value": {PROBE}.VALUE, "file": {PROBE}.__file__,
                              "path": sys.path, "wrote": wrote}}))
        """),
    )
    assert seen["value"] == "from a wheel"
    assert seen["file"].startswith(f"{folder}/")
    assert not seen["wrote"]  # the environment is the jobs' to read, not to change
    assert all(site in seen["path"] for site in before if os.path.isdir(site))
    package_at = seen["path"].index(os.path.dirname(os.path.dirname(seen["file"])))
    assert all(package_at < seen["path"].index(site) for site in before if site in seen["path"])


def test_an_environment_is_built_once_per_list(offline: Path) -> None:
    first = process.provision(image=None, packages=[], pip=[REQUIREMENT], progress=print)
    assert first is not None
    built_at = (Path(first) / MARKER).stat().st_mtime_ns
    again: list[str] = []
    assert (
        process.provision(image=None, packages=[], pip=[REQUIREMENT], progress=again.append)
        == first
    )
    assert again == [f"{first} (pip: {REQUIREMENT}) is present; not reinstalling"]
    assert (Path(first) / MARKER).stat().st_mtime_ns == built_at
    assert process.provision(image=None, packages=["jq"], pip=[], progress=print) is None


def test_a_requirement_pip_cannot_install_fails_naming_it(offline: Path) -> None:
    with pytest.raises(RuntimeError) as caught:
        process.provision(
            image=None, packages=[], pip=[REQUIREMENT, "evolve-absent-pkg==2.0"], progress=print
        )
    first_line = str(caught.value).splitlines()[0]
    assert first_line.startswith("pip could not install evolve-absent-pkg==2.0 (exit 1): ERROR:")
    assert "evolve-absent-pkg==2.0" in first_line.partition("ERROR:")[2]
    assert not [path for path in offline.iterdir() if path.is_dir()]  # nothing half-built kept


def test_pip_runs_with_the_hosts_pip_settings_and_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-evolve-canary")
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example.org/simple")
    monkeypatch.setenv("https_proxy", "http://proxy.example.org:3128")
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    env = pip_environment()
    assert env["PIP_INDEX_URL"] == "https://mirror.example.org/simple"
    assert env["https_proxy"] == "http://proxy.example.org:3128"
    assert env["SSL_CERT_FILE"] == "/etc/ssl/certs/ca-certificates.crt"
    assert "sk-evolve-canary" not in env.values()


def test_an_environment_this_host_lacks_is_unavailable_and_an_image_name_is_dockers() -> None:
    with pytest.raises(SandboxUnavailable, match="lacks the Python environment /nonexistent/env"):
        process.open_sandbox(image="/nonexistent/env")
    assert process.open_sandbox(image="evolve-sandbox:0123").python == detect().python


@pytest.mark.system
def test_evolve_check_installs_the_requirements_and_the_evaluator_imports_them(
    offline: Path, tmp_path: Path
) -> None:
    (tmp_path / "initial_program.py").write_text(
        "# EVOLVE-BLOCK-START\nN = 1  # @knob int 1..5\n# EVOLVE-BLOCK-END\n"
    )
    (tmp_path / "evaluator.py").write_text(
        f"import {PROBE}\n\n\ndef evaluate(program_path):\n"
        f"    return {{'combined_score': 1.0, 'said': {PROBE}.VALUE}}\n"
    )
    (tmp_path / "task.yaml").write_text(
        textwrap.dedent(f"""\
            name: probe
            seed: initial_program.py
            evaluator: {{name: python}}
            objectives: [{{name: combined_score, direction: maximize}}]
            budget: {{candidates: 2}}
            sandbox: {{backend: process, pip: ["{REQUIREMENT}"]}}
        """)
    )
    done = subprocess.run(
        [*EVOLVE, "check", str(tmp_path / "task.yaml")],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"sandbox Python environment with pip: {REQUIREMENT}: {offline}/" in done.stdout
    assert "from a wheel" in done.stdout  # the evaluator's artifact, made by the probe
