"""What a seed's output says the sandbox lacks, and the task key that adds it, for `evolve
check`: a seed that fails or scores 0 because `cargo` or `Rscript` is not in the image, or a
Python module is not installed, would otherwise pass without a word or fail with a
traceback that does not say what to change.

Only a shell's own words count for a command ("sh: 1: cargo: not found", "bash: line 1:
Rscript: command not found", "zsh: command not found: go") and Python's for a program it
could not start ("[Errno 2] No such file or directory: 'cargo'", a name without a dot or
one of the known commands, since a data file is missing the same way); a module is what
"No module named 'pywt'" names, unless the task folder holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

COMMAND_SAID = (
    re.compile(
        r"\b(?:sh|bash|dash|env)(?:: line \d+|: \d+)?: '?([\w.+-]+)'?: (?:command )?not found"
    ),
    re.compile(r"\bcommand not found: ([\w.+-]+)"),
    re.compile(r"\benv: '([\w.+-]+)': No such file or directory"),
    re.compile(r"\[Errno 2\] No such file or directory: '([\w.+-]+)'"),
)
MODULE_SAID = re.compile(r"No module named '([\w.]+)'")
# The Debian package that provides a command, for the commands tasks run most.
DEBIAN = {
    "cargo": "cargo",
    "rustc": "rustc",
    "Rscript": "r-base-core",
    "R": "r-base-core",
    "node": "nodejs",
    "npm": "npm",
    "java": "default-jdk-headless",
    "javac": "default-jdk-headless",
    "go": "golang-go",
    "g++": "g++",
    "c++": "g++",
    "gfortran": "gfortran",
    "make": "make",
    "cmake": "cmake",
    "ghc": "ghc",
    "ruby": "ruby",
    "lua5.4": "lua5.4",
    "lua": "lua5.4",
    "ocaml": "ocaml",
    "nim": "nim",
    "swipl": "swi-prolog",
    "bc": "bc",
    "jq": "jq",
    "git": "git",
    "curl": "curl",
}
# PyPI's name for a module whose project is named otherwise.
PYPI = {
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "pyyaml",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "bs4": "beautifulsoup4",
    "pywt": "PyWavelets",
    "dateutil": "python-dateutil",
    "pysat": "python-sat",
    "ot": "POT",
    "Bio": "biopython",
    "attr": "attrs",
    "google.protobuf": "protobuf",
}


@dataclass(frozen=True)
class Missing:
    kind: str  # "command" or "module"
    name: str

    def provider(self) -> str | None:
        """The Debian package (a command) or PyPI project (a module) that adds it, if known."""
        if self.kind == "command":
            return DEBIAN.get(self.name)
        return PYPI.get(self.name, self.name)


def missing(texts: Iterable[str], task_folder: Path) -> list[Missing]:
    """What `texts` (a result's feedback and artifacts) say is missing, each once, in the
    order first said; a module the task folder holds itself is not."""
    found: dict[Missing, None] = {}
    for text in texts:
        for pattern in COMMAND_SAID:
            for name in pattern.findall(text):
                if "." not in name or name in DEBIAN:
                    found.setdefault(Missing("command", name))
        for dotted in MODULE_SAID.findall(text):
            name = dotted if dotted in PYPI else dotted.split(".")[0]
            top = name.split(".")[0]
            if not (task_folder / f"{top}.py").exists() and not (task_folder / top).is_dir():
                found.setdefault(Missing("module", name))
    return list(found)


def advice(what: Missing, backend: str, config: str | None) -> str:
    """One line: what the seed's output says is missing, and what to add where. `config`
    is the OpenEvolve config's name where the task is one, which cannot take new keys."""
    provider = what.provider()
    if what.kind == "module":
        said = f"Python module `{what.name}` is not installed in the sandbox"
        if config is not None:
            return f"{said}: add {provider} to requirements.txt beside {config}"
        return f"{said}: add {provider} to `sandbox.pip` in the task file"
    said = f"command `{what.name}` is not in the sandbox"
    package = provider or "PACKAGE"
    which = provider or f"the Debian package that provides `{what.name}`"
    if backend == "process":
        return f"{said}: the process sandbox runs this host's software, so install {which} here"
    if config is not None:
        return (
            f"{said}: add {which} to the image with a task.yaml beside {config} holding "
            f"`openevolve: {config}` and `sandbox: {{packages: [{package}]}}`"
        )
    return f"{said}: add {which} to `sandbox.packages` in the task file"
