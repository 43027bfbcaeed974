"""OpenEvolve task folders, run unchanged.

An OpenEvolve folder holds `initial_program.*` (with EVOLVE-BLOCK markers), `evaluator.py`
(whose `evaluate(program_path)` scores a program) and a `config.yaml`. Its config is read
as written, never rewritten: this module turns what has a meaning here into the content
of a task.yaml, remembers which config key each task field came from (so an error points
at the user's line), and names every other key in one warning.

The evaluator becomes the `python` evaluator (evaluators/python/), which runs it beside
the candidate inside the sandbox; OpenEvolve's score, `combined_score`, is the objective.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Loc = tuple[str | int, ...]

CONFIG_NAMES = ("config.yaml", "config.yml")
EVALUATOR_FILE = "evaluator.py"
DEFAULT_ITERATIONS = 1000  # OpenEvolve's own default for max_iterations
OPENAI_BASE = "https://api.openai.com/v1"
ENV_REFERENCE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
REQUIREMENTS = "requirements.txt"
REQUIREMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
# Already in the sandbox image, or provided by the python evaluator's runner.
PROVIDED = {"numpy", "openevolve"}
# PyPI names whose Debian package is not python3-<name>.
DEBIAN_NAMES = {
    "scikit-learn": "python3-sklearn",
    "pyyaml": "python3-yaml",
    "pillow": "python3-pil",
    "opencv-python": "python3-opencv",
    "beautifulsoup4": "python3-bs4",
    "torch": "python3-torch",
}
# Keys with a meaning here. Anything else in the config is named in the warning line.
MAPPED = {
    "max_iterations",
    "diff_based_evolution",
    "file_suffix",
    "llm.models",
    "llm.api_base",
    "llm.api_key",
    "llm.temperature",
    "llm.max_tokens",
    "llm.timeout",
    "llm.retries",
    "database.num_islands",
    "database.migration_interval",
    "evaluator.timeout",
    "evaluator.cascade_evaluation",
    "evaluator.cascade_thresholds",
    "prompt.system_message",
}
SECTIONS = ("llm", "database", "evaluator", "prompt")


class OpenEvolveError(ValueError):
    """A config that cannot become a task, with the config key it is about."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(message)
        self.loc = loc


@dataclass
class Translation:
    task: dict[str, Any]  # what a task.yaml would hold
    origins: dict[Loc, Loc] = field(default_factory=dict)  # task field -> config key
    unmapped: list[str] = field(default_factory=list)  # dotted config keys ignored here
    notes: list[str] = field(default_factory=list)  # other things the user should know

    def warnings(self) -> list[str]:
        said = list(self.notes)
        if self.unmapped:
            ignored = ", ".join(self.unmapped)
            said.insert(0, f"OpenEvolve keys with no meaning in evolve, ignored: {ignored}")
        return said

    def place(self, loc: Sequence[str | int]) -> Loc:
        """Where a task field came from in the config: the key it was made from (the
        longest known prefix), followed by the rest of the field's path."""
        loc = tuple(loc)
        for cut in range(len(loc), -1, -1):
            if loc[:cut] in self.origins:
                origin = self.origins[loc[:cut]]
                return (*origin, *loc[cut:]) if origin else ()
        return ()

    def put(self, task_loc: Loc, value: Any, origin: Loc) -> None:
        node = self.task
        for part in task_loc[:-1]:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[task_loc[-1]] = value  # type: ignore[index]
        self.origins[task_loc] = origin


def find_config(folder: Path) -> Path | None:
    """The config of an OpenEvolve folder, if `folder` is one."""
    if not (folder / EVALUATOR_FILE).is_file():
        return None
    return next((folder / n for n in CONFIG_NAMES if (folder / n).is_file()), None)


def looks_like_openevolve(data: Any, folder: Path) -> bool:
    """A config, not a task.yaml: it lacks a task's required keys, and its folder holds an
    OpenEvolve evaluator."""
    if not isinstance(data, Mapping) or "seed" in data or "objectives" in data:
        return False
    return (folder / EVALUATOR_FILE).is_file()


def translate(config: Mapping[str, Any], folder: Path) -> Translation:
    """The task this config asks for. Raises OpenEvolveError on what cannot be mapped."""
    out = Translation({})
    out.unmapped = sorted(key for key in _dotted_keys(config) if key not in MAPPED)
    out.put(("name",), _task_name(folder), ())
    suffix = config.get("file_suffix") or ".py"
    out.put(("seed",), [_initial_program(folder, suffix)], ("file_suffix",))
    if (message := _section(config, "prompt").get("system_message")) is not None:
        out.put(("description",), message, ("prompt", "system_message"))
    _evaluator(config, out)
    out.put(("objectives",), [{"name": "combined_score", "direction": "maximize"}], ())
    iterations = config.get("max_iterations", DEFAULT_ITERATIONS)
    if isinstance(iterations, int) and not isinstance(iterations, bool):
        iterations += 1  # OpenEvolve's iterations are children; the seed counts here too
    out.put(("budget", "candidates"), iterations, ("max_iterations",))
    database = _section(config, "database")
    for key, task_key in (("num_islands", "islands"), ("migration_interval",) * 2):
        if key in database:
            out.put(("search", task_key), database[key], ("database", key))
    _llm(config, out)
    _requirements(folder, out)
    return out


def _requirements(folder: Path, out: Translation) -> None:
    """An evaluator's PyPI requirements, as the Debian packages the Docker sandbox adds
    (`sandbox.packages`): python3-NAME, or the known exceptions. Said in a warning, since
    a name Debian lacks fails the image's build, naming it."""
    path = folder / REQUIREMENTS
    if not path.is_file():
        return
    packages = []
    for line in path.read_text(errors="replace").splitlines():
        found = REQUIREMENT_NAME.match(line.split("#", 1)[0].strip())
        if found is None:
            continue  # a blank line, a comment or an option such as -r
        name = re.sub(r"[._]+", "-", found.group(0)).lower()
        if name not in PROVIDED:
            packages.append(DEBIAN_NAMES.get(name, f"python3-{name}"))
    if packages:
        packages = sorted(set(packages))
        out.put(("sandbox", "packages"), packages, ())
        out.notes.append(
            f"{REQUIREMENTS}: the sandbox gets Debian's {', '.join(packages)} "
            "(numpy is there already)"
        )


def _evaluator(config: Mapping[str, Any], out: Translation) -> None:
    section = _section(config, "evaluator")
    params: dict[str, Any] = {"evaluator": EVALUATOR_FILE}
    out.put(("evaluator",), {"name": "python", "params": params}, ())
    if section.get("cascade_evaluation") is False:
        out.put(("evaluator", "params", "cascade"), False, ("evaluator", "cascade_evaluation"))
    if "cascade_thresholds" in section:
        origin = ("evaluator", "cascade_thresholds")
        out.put(("evaluator", "params", "cascade_thresholds"), section[origin[1]], origin)
    if "timeout" in section:
        out.put(("sandbox", "timeout_s"), section["timeout"], ("evaluator", "timeout"))


def _llm(config: Mapping[str, Any], out: Translation) -> None:
    """Models become OpenAI-compatible endpoints, as OpenEvolve's client treats them all.
    Without models the autotuner runs alone, offline."""
    llm = _section(config, "llm")
    models = llm.get("models") or []
    if not isinstance(models, list):
        raise OpenEvolveError(("llm", "models"), "must be a list of {name, weight}")
    if not models:
        out.put(("mutators",), [{"name": "autotuner"}], ())
        return
    base = llm.get("api_base") or OPENAI_BASE
    key_env = _key_env(llm.get("api_key"))
    specs = []
    for index, model in enumerate(models):
        if not isinstance(model, Mapping) or not model.get("name"):
            raise OpenEvolveError(("llm", "models", index), "each model needs a name")
        spec: dict[str, Any] = {"model": model["name"], "base_url": base}
        if "weight" in model:
            spec["weight"] = model["weight"]
        if key_env:
            spec["api_key_env"] = key_env
        specs.append(spec)
        out.origins[("llm", "models", index)] = ("llm", "models", index)
    out.put(("llm", "models"), specs, ("llm", "models"))
    for key, task_key in (
        ("temperature", "temperature"),
        ("max_tokens", "max_tokens"),
        ("timeout", "timeout_s"),
    ):
        if llm.get(key) is not None:
            out.put(("llm", task_key), llm[key], ("llm", key))
    if isinstance(llm.get("retries"), int):
        out.put(("llm", "max_attempts"), llm["retries"] + 1, ("llm", "retries"))
    operator = "diff" if config.get("diff_based_evolution", True) else "rewrite"
    out.put(("mutators",), [{"name": operator}], ("diff_based_evolution",))


def _key_env(api_key: Any) -> str | None:
    """A key is named, never written: `${VAR}` names the variable; a literal key is refused,
    since the config is stored with the run."""
    if api_key is None:
        return None
    match = ENV_REFERENCE.match(str(api_key))
    if match is None:
        raise OpenEvolveError(
            ("llm", "api_key"),
            "evolve stores the config with the run, so it takes no literal key: write "
            "${VARIABLE} and put the key in that environment variable",
        )
    return match.group(1)


def _initial_program(folder: Path, suffix: str) -> str:
    candidates = sorted(p.name for p in folder.glob(f"initial_program{suffix}") if p.is_file())
    if not candidates:
        raise OpenEvolveError(
            ("file_suffix",), f"no initial_program{suffix} beside the config in {folder}"
        )
    return candidates[0]


def _task_name(folder: Path) -> str:
    name = NAME_UNSAFE.sub("-", folder.resolve().name).strip("-._")
    return name or "openevolve-task"


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OpenEvolveError((name,), "must be a mapping")
    return value


def _dotted_keys(config: Mapping[str, Any]) -> Iterator[str]:
    for key, value in config.items():
        if key in SECTIONS and isinstance(value, Mapping):
            yield from (f"{key}.{inner}" for inner in value)
        else:
            yield str(key)
