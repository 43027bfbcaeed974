"""`evolve sandbox check`: can this host run the Docker sandbox, and what can a job see in it?
And would the process backend isolate its jobs here?

Also reaps sandbox containers left by dead processes (Ray actors die without ceremony).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass

import docker

from evolve.plugin.sandbox import Limits, RunResult, SandboxUnavailable
from evolve.sandboxes.docker import ENGINE_ERRORS, DockerSandbox, reap_stale
from evolve.sandboxes.images.build import image_status
from evolve.sandboxes.isolation import detect
from evolve.sandboxes.process import ProcessSandbox

PROBE_LIMITS = Limits(timeout_s=30)


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    detail: str
    required: bool = True  # a missing optional feature (perf, GPU) is reported, not a failure


def check() -> list[Finding]:
    """One finding per line of the report: Docker's, then the process backend's."""
    return _docker_findings() + _process_findings()


def _process_findings() -> list[Finding]:
    """Optional: the process backend is used only where a task or `--sandbox` asks for it."""
    isolation = detect()
    found = Finding("process isolation", isolation.tool is not None, isolation.detail, False)
    if isolation.tool is None:
        return [found]
    sandbox = ProcessSandbox(isolation)
    started = time.monotonic()
    probe = sandbox.run(["readlink", "/proc/self/ns/pid"], files={}, limits=PROBE_LIMITS)
    took = time.monotonic() - started
    own = probe.ok and probe.stdout.decode().strip() != os.readlink("/proc/self/ns/pid")
    detail = f"{probe.describe()} in {took:.3f}s" + ("" if own else ": NOT in a PID namespace")
    return [found, Finding("process job", own, detail, required=False)]


def _docker_findings() -> list[Finding]:
    """The first failure that blocks the rest ends the list."""
    try:
        client = docker.from_env(timeout=10)
        version = client.version()
    except ENGINE_ERRORS as exc:
        return [Finding("engine", False, f"unreachable ({exc}): start Docker or install it")]
    findings = [
        Finding("engine", True, f"docker {version['Version']}, API {version['ApiVersion']}"),
        Finding("stale containers", True, f"removed {reap_stale(client)}"),
    ]
    status = image_status(client)
    if not status.present:
        detail = f"{status.tag} is missing: run `evolve sandbox build`"
        return [*findings, Finding("image", False, detail)]
    size = (status.size_bytes or 0) / 1e9
    findings.append(Finding("image", True, f"{status.tag}, {size:.2f} GB"))
    sandbox = DockerSandbox(status.tag)
    try:
        return findings + _probe(sandbox)
    except SandboxUnavailable as exc:
        return [*findings, Finding("trivial job", False, str(exc))]
    finally:
        sandbox.close()


def _probe(sandbox: DockerSandbox) -> list[Finding]:
    started = time.monotonic()
    trivial = sandbox.run(["true"], files={}, limits=PROBE_LIMITS)
    cold = time.monotonic() - started
    started = time.monotonic()
    sandbox.run(["true"], files={}, limits=PROBE_LIMITS)
    warm = time.monotonic() - started
    perf = sandbox.run(
        ["perf", "stat", "-x,", "-e", "instructions", "true"], files={}, limits=PROBE_LIMITS
    )
    gpu = sandbox.run(["sh", "-c", "nvidia-smi -L"], files={}, limits=PROBE_LIMITS)
    return [
        Finding(
            "trivial job", trivial.ok, f"{trivial.describe()}: {cold:.2f}s cold, {warm:.3f}s warm"
        ),
        _perf_finding(perf),
        Finding(
            "gpu",
            gpu.ok,
            _first_line(gpu.stdout) if gpu.ok else "none visible in the sandbox",
            required=False,
        ),
        _host_gpu_finding(),
    ]


def _perf_finding(result: RunResult) -> Finding:
    """perf's CSV line starts with the count when the counter is readable."""
    said = " ".join(result.stderr.decode(errors="replace").split())[:200]
    if result.ok and said.split(",")[0].isdigit():
        return Finding("perf counters", True, f"readable: {said}", required=False)
    detail = f"unreadable ({said}); counters come from valgrind"
    return Finding("perf counters", False, detail, required=False)


def _host_gpu_finding() -> Finding:
    """The host's own view, so "none in the sandbox" can be told apart from "none at all"."""
    if shutil.which("nvidia-smi") is None:
        return Finding("gpu on host", False, "no nvidia-smi: no NVIDIA driver", required=False)
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30, check=False)
    detail = _first_line(listed.stdout) if listed.returncode == 0 else "nvidia-smi finds none"
    return Finding("gpu on host", listed.returncode == 0, detail, required=False)


def _first_line(data: bytes) -> str:
    return next((line for line in data.decode(errors="replace").splitlines() if line.strip()), "")
