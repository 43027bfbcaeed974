"""Run candidate code as a plain child process with rlimits: the fallback where Docker is absent.

It bounds time, memory, processes, file size and output, and hides the host's environment,
but it does not isolate the network or the filesystem: the candidate runs as this user.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from evolve.sandbox import Limits, RunResult
from sandboxes.supervise import checked_path, read_back, supervise, write_files


class ProcessSandbox:
    name = "process"

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        with tempfile.TemporaryDirectory(prefix="evolve-run-", ignore_cleanup_errors=True) as tmp:
            workdir = Path(tmp)
            write_files(workdir, files)
            for name in collect:
                checked_path(name)
            outcome = supervise(argv, workdir, limits)
            collected = read_back(workdir, collect, limits.max_file_bytes)
        return RunResult(**outcome._asdict(), files=collected)

    def close(self) -> None:
        """Nothing persists between runs, so there is nothing to release."""
