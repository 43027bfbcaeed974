"""OpenEvolve task folders, run unchanged.

An OpenEvolve folder holds `initial_program.*` (with EVOLVE-BLOCK markers), `evaluator.py`
(whose `evaluate(program_path)` scores a program) and a `config.yaml`. Its config is read
as OpenEvolve reads it, never rewritten: this module turns it into the content of a
task.yaml and remembers which config key each task field came from, so that an error
points at the user's line.

Every key OpenEvolve knows is in one of three tables. HONOURED keys become part of the
task, or (`evaluator.parallel_evaluations`, `random_seed`) the run's default workers and
seed (`run_defaults`). TUNING keys only tune OpenEvolve's own machinery (checkpoints, logs,
its database, the wording of its prompts): they are named in one warning, with any key
OpenEvolve does not know either. REFUSED keys change what a run does in a way evolve
cannot: at any value but OpenEvolve's default, each is an error on its own line that says
what to do instead.

Models are OpenAI-compatible endpoints, as OpenEvolve's client treats them all: the
entries of `llm.models` and the older `llm.primary_model` / `secondary_model`, each with
its own `api_base`, `api_key` and settings or those shared in `llm:`. A key is never
written into the task, since the config is stored with the run: `${VAR}` names the
variable it is read from; absent, empty or a placeholder, it is OPENAI_API_KEY's, as in
OpenEvolve; a literal key is refused. A model that needs a key nobody set is an error
before anything starts, and so is a config that names no model where the seed gives the
offline autotuner nothing to vary: OpenEvolve could not run it either.

The evaluator becomes the `python` evaluator (evolve/evaluators/python/), which runs it beside
the candidate inside the sandbox; OpenEvolve's score, `combined_score`, is the objective.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from evolve.plugin.knobs import find_knobs
from evolve.plugin.pip_requirements import project, read_requirements
from evolve.plugin.program import Program, ProgramError
from evolve.plugin.taskpaths import TaskPathError, read_task_file
from evolve.task.yaml_limits import YAMLLimitError
from evolve.task.yaml_limits import load as load_yaml

Loc = tuple[str | int, ...]

CONFIG_NAMES = ("config.yaml", "config.yml")
EXTENDS = "openevolve"  # a task.yaml's key naming the OpenEvolve config beside it that it extends
EVALUATOR_FILE = "evaluator.py"
SEED_STEM = "initial_program"
DEFAULT_SUFFIX = ".py"
DEFAULT_ITERATIONS = 10000  # OpenEvolve's own default for max_iterations
OPENAI_BASE = "https://api.openai.com/v1"
KEY_VARIABLE = "OPENAI_API_KEY"  # the key of a model with none of its own, in OpenEvolve too
# OpenEvolve's defaults where they differ from evolve's in what a run does: the time an
# evaluation may take, and how a model is asked.
EVALUATOR_TIMEOUT_S = 300
MODEL_DEFAULTS: dict[str, Any] = {
    "temperature": 0.7,
    "max_tokens": 4096,
    "timeout": 60,
    "retries": 3,
}
SECONDARY_WEIGHT = 0.2  # secondary_model's weight where none is given
PROMPT_DEFAULTS = {"num_top_programs": 3, "num_diverse_programs": 2}
MAX_INSPIRATIONS = 10  # the most programs search.inspirations shows
ENV_REFERENCE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
# An api_key that only holds a key's place, as configs are shared or local servers want
# (`lm-studio`, `EMPTY`): saying so, short, or without the digits of a random key.
PLACEHOLDER_WORDS = (
    "your", "placeholder", "dummy", "changeme", "replace", "insert", "example", "fake",
    "xxxx", "not-needed", "not_needed", "no-key", "no_key", "unused", "none", "null", "empty",
)  # fmt: skip
KEY_MIN_CHARS = 16  # shorter than any provider's key
LONG_KEY_CHARS = 40  # longer than any placeholder: a key, whatever words it happens to hold
# Hosts on this machine or a private network, whose servers (vLLM, Ollama) want no key.
LOCAL_DOMAINS = (".localhost", ".local", ".internal", ".lan", ".home.arpa")
# OpenAI's reasoning models take no temperature; OpenEvolve leaves it out for them too.
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
REQUIREMENTS = "requirements.txt"
PROVIDED = {"openevolve"}  # the python evaluator's runner stands in for it
SECTIONS = ("llm", "prompt", "database", "evaluator", "evolution_trace", "hierarchical")
MODEL_KEY = "llm.models[]."  # how a model's own keys are named: llm.models[].top_p
# Keys with a meaning here: each becomes part of the task, or of the run's defaults.
HONOURED = frozenset(
    {
        "max_iterations", "diff_based_evolution", "file_suffix", "random_seed",
        "language",  # the prompts name the seed's language from its suffix
        "llm.models", "llm.primary_model", "llm.primary_model_weight", "llm.secondary_model",
        "llm.secondary_model_weight", "llm.api_base", "llm.api_key", "llm.temperature",
        "llm.max_tokens", "llm.timeout", "llm.retries",
        "prompt.system_message", "prompt.num_top_programs", "prompt.num_diverse_programs",
        "database.num_islands", "database.migration_interval", "database.exploration_ratio",
        "evaluator.timeout", "evaluator.cascade_evaluation", "evaluator.cascade_thresholds",
        "evaluator.parallel_evaluations",
    }
)  # fmt: skip
MODEL_HONOURED = frozenset(
    {"name", "weight", "api_base", "api_key", "temperature", "max_tokens", "timeout", "retries"}
)
# Keys that only tune OpenEvolve's own machinery, or that OpenEvolve itself leaves unused.
TUNING = frozenset(
    {
        "checkpoint_interval", "log_level", "log_dir", "max_code_length",
        "allow_full_rewrites", "convergence_threshold", "early_stopping_metric",
        "llm.top_p", "llm.retry_delay", "llm.random_seed", "llm.reasoning_effort",
        "llm.max_budget_usd",  # a per-call budget of the Claude Code CLI provider
        "llm.system_message", "llm.api_type", "llm.name", "llm.weight", "llm.init_client",
        "llm._manual_queue_dir", "diff_pattern", "max_tasks_per_child",
        "llm.evaluator_models",  # used only with evaluator.use_llm_feedback, refused below
        "prompt.evaluator_system_message", "prompt.use_template_stochasticity",
        "prompt.template_variations", "prompt.use_meta_prompting", "prompt.meta_prompt_weight",
        "prompt.include_artifacts", "prompt.max_artifact_bytes",
        "prompt.artifact_security_filter", "prompt.suggest_simplification_after_chars",
        "prompt.include_changes_under_chars", "prompt.concise_implementation_max_lines",
        "prompt.comprehensive_implementation_min_lines", "prompt.code_length_threshold",
        "prompt.programs_as_changes_description", "prompt.system_message_changes_description",
        "prompt.initial_changes_description", "prompt.diff_summary_max_line_len",
        "prompt.diff_summary_max_lines",
        "database.db_path", "database.in_memory", "database.log_prompts",
        "database.population_size", "database.archive_size", "database.programs_per_island",
        "database.elite_selection_ratio", "database.exploitation_ratio",
        "database.diversity_metric", "database.feature_dimensions", "database.feature_bins",
        "database.diversity_reference_size", "database.migration_rate",
        "database.random_seed", "database.artifacts_base_path",
        "database.artifact_size_threshold", "database.cleanup_old_artifacts",
        "database.artifact_retention_days", "database.novelty_llm", "database.embedding_model",
        "database.similarity_threshold", "database.max_snapshot_artifacts",
        "evaluator.max_retries", "evaluator.memory_limit_mb", "evaluator.cpu_limit",
        "evaluator.distributed", "evaluator.llm_feedback_weight", "evaluator.enable_artifacts",
        "evaluator.max_artifact_storage",
    }
)  # fmt: skip
MODEL_TUNING = frozenset(
    {"top_p", "retry_delay", "random_seed", "reasoning_effort", "system_message", "init_client"}
)
# Sections whose keys, but for one that REFUSED guards, tune only.
TUNING_SECTIONS = frozenset({"evolution_trace", "hierarchical"})
UNSET = (None, False, 0, "")  # values that ask for nothing
# Keys that change what a run does in a way evolve cannot: an error at any value but
# those allowed (OpenEvolve's default), saying what to do instead.
MANUAL = "evolve has no manual mode, where a person answers the prompts: set it to false"
PROVIDER = (
    "evolve asks OpenEvolve's models as OpenAI-compatible endpoints: remove it and give the "
    "server's OpenAI-compatible api_base (a task.yaml takes `anthropic:MODEL`)"
)
REFUSED: dict[str, tuple[tuple[Any, ...], str]] = {
    "early_stopping_patience": (
        UNSET,
        "evolve has no stop on a plateau: remove the key (the run then lasts "
        "max_iterations), or lower max_iterations",
    ),
    "evaluator.use_llm_feedback": (
        UNSET,
        "evolve has no model score programs: set it to false; a judgement of your own "
        "belongs among evaluator.py's metrics",
    ),
    "prompt.template_dir": (
        UNSET,
        "evolve writes its own prompts and cannot read OpenEvolve's templates: remove the "
        "key (a task.yaml overrides evolve's prompts with llm.templates)",
    ),
    "hierarchical.enabled": (
        UNSET,
        "evolve has no hierarchical evolution over tiers of models: set it to false and "
        "list the models under llm.models",
    ),
    "llm.manual_mode": (UNSET, MANUAL),
    f"{MODEL_KEY}manual_mode": (UNSET, MANUAL),
    "llm.provider": ((*UNSET, "openai"), PROVIDER),
    f"{MODEL_KEY}provider": ((*UNSET, "openai"), PROVIDER),
}


class OpenEvolveError(ValueError):
    """A config that cannot become a task, with the config key it is about."""

    def __init__(self, loc: Loc, message: str) -> None:
        super().__init__(message)
        self.loc = loc


@dataclass
class Translation:
    task: dict[str, Any]  # what a task.yaml would hold
    origins: dict[Loc, Loc] = field(default_factory=dict)  # task field -> config key
    ignored: list[str] = field(default_factory=list)  # dotted OpenEvolve keys that only tune
    unknown: list[str] = field(default_factory=list)  # dotted keys OpenEvolve does not know
    notes: list[str] = field(default_factory=list)  # other things the user should know

    def warnings(self) -> list[str]:
        said = list(self.notes)
        ignored = []
        if self.ignored:
            ignored.append(
                f"OpenEvolve keys with no meaning in evolve, ignored: {', '.join(self.ignored)}"
            )
        if self.unknown:
            ignored.append(
                f"keys OpenEvolve does not know either, ignored: {', '.join(self.unknown)}"
            )
        if ignored:
            said.insert(0, "; ".join(ignored))
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


@dataclass(frozen=True)
class RunDefaults:
    """What an OpenEvolve config asks of `evolve run` beyond its task; None: evolve's own."""

    workers: int | None = None  # evaluator.parallel_evaluations
    seed: int | None = None  # random_seed


@dataclass(frozen=True)
class Model:
    """One model as the config names it, in llm.models or as primary/secondary_model."""

    name: str
    weight: float
    own: Mapping[str, Any]  # its own settings (none for primary/secondary_model)
    loc: Loc  # its entry, or its primary_model / secondary_model key
    name_loc: Loc
    weight_loc: Loc


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


def translate(config: Mapping[str, Any], folder: Path, *, own_llm: bool = False) -> Translation:
    """The task this config asks for. Raises OpenEvolveError on what cannot be mapped.
    `own_llm`: a task.yaml extending the config names the models itself, so the config's
    `llm:` section is neither read nor checked (its mutator still follows the config)."""
    out = Translation({})
    out.ignored, out.unknown = _ignored_keys(config)
    out.put(("name",), _task_name(folder), ())
    seed = _seed_file(config, folder)
    out.put(("seed",), [seed], ("file_suffix",))
    if (message := _section(config, "prompt").get("system_message")) is not None:
        out.put(("description",), message, ("prompt", "system_message"))
    _evaluator(config, out)
    out.put(("objectives",), [{"name": "combined_score", "direction": "maximize"}], ())
    iterations = config.get("max_iterations", DEFAULT_ITERATIONS)
    if _whole(iterations) is not None:
        iterations += 1  # OpenEvolve's iterations are children; the seed counts here too
    out.put(("budget", "candidates"), iterations, ("max_iterations",))
    _search(config, out)
    if own_llm:
        out.put(("mutators",), [{"name": _operator(config)}], ("diff_based_evolution",))
    else:
        _llm(config, folder, seed, out)
    _check_run_defaults(config)
    _requirements(folder, out)
    return out


def run_defaults(text: str, folder: Path) -> RunDefaults:
    """The workers and seed an OpenEvolve config (`text`, from `folder`, or the config a
    task.yaml there extends) asks for; none for a plain task.yaml. The text loaded as a
    task already, so what it holds was checked."""
    try:
        data = load_yaml(text)[1]
        if isinstance(data, Mapping) and isinstance(data.get(EXTENDS), str):
            data = load_yaml(read_task_file(folder, data[EXTENDS], EXTENDS))[1]
    except (yaml.YAMLError, YAMLLimitError, ValueError, TaskPathError):
        return RunDefaults()
    if not looks_like_openevolve(data, folder):
        return RunDefaults()
    evaluator = data.get("evaluator")
    workers = evaluator.get("parallel_evaluations") if isinstance(evaluator, Mapping) else None
    return RunDefaults(_whole(workers), _whole(data.get("random_seed")))


def _requirements(folder: Path, out: Translation) -> None:
    """An evaluator's PyPI requirements, installed with pip into the sandbox (`sandbox.pip`),
    read as pip reads requirements.txt (evolve/plugin/pip_requirements.py, which raises
    RequirementsError on the file's own line). `openevolve` is left out: the runner stands
    in for the one class evaluators import from it. Said in a warning, with any options
    that have no meaning here."""
    if not (folder / REQUIREMENTS).is_file():
        return
    found = read_requirements(folder, REQUIREMENTS)
    wanted = [wanted for wanted in found.listed if project(wanted) not in PROVIDED]
    if wanted:
        out.put(("sandbox", "pip"), wanted, ())
        out.notes.append(f"{REQUIREMENTS}: pip installs {', '.join(wanted)} into the sandbox")
    if found.passed_over:
        passed = "; ".join(found.passed_over)
        out.notes.append(f"{REQUIREMENTS}: options with no meaning in evolve, ignored: {passed}")


def _evaluator(config: Mapping[str, Any], out: Translation) -> None:
    section = _section(config, "evaluator")
    params: dict[str, Any] = {"evaluator": EVALUATOR_FILE}
    out.put(("evaluator",), {"name": "python", "params": params}, ())
    if section.get("cascade_evaluation") is False:
        out.put(("evaluator", "params", "cascade"), False, ("evaluator", "cascade_evaluation"))
    if "cascade_thresholds" in section:
        origin = ("evaluator", "cascade_thresholds")
        out.put(("evaluator", "params", "cascade_thresholds"), section[origin[1]], origin)
    timeout = section.get("timeout")
    timeout = EVALUATOR_TIMEOUT_S if timeout is None else timeout
    out.put(("sandbox", "timeout_s"), timeout, ("evaluator", "timeout"))


def _search(config: Mapping[str, Any], out: Translation) -> None:
    """Islands, migrations and the share of random parents as OpenEvolve's database sets
    them; the programs a prompt shows as its top and diverse programs together."""
    database = _section(config, "database")
    for key, task_key in (
        ("num_islands", "islands"),
        ("migration_interval", "migration_interval"),
        ("exploration_ratio", "exploration"),
    ):
        if database.get(key) is not None:
            out.put(("search", task_key), database[key], ("database", key))
    prompt = _section(config, "prompt")
    given = [key for key in PROMPT_DEFAULTS if prompt.get(key) is not None]
    if not given:
        return
    counts = {key: prompt.get(key, default) for key, default in PROMPT_DEFAULTS.items()}
    wrong = [key for key in given if _whole(counts[key]) is None]
    if wrong:  # the schema says what is wrong with it, on its line
        out.put(("search", "inspirations"), counts[wrong[0]], ("prompt", wrong[0]))
        return
    shown = sum(counts.values())
    if shown > MAX_INSPIRATIONS:
        out.notes.append(
            f"prompt: {shown} programs shown in a prompt (num_top_programs + "
            f"num_diverse_programs); evolve shows at most {MAX_INSPIRATIONS}"
        )
    out.put(("search", "inspirations"), min(shown, MAX_INSPIRATIONS), ("prompt", given[0]))


def _llm(config: Mapping[str, Any], folder: Path, seed: str, out: Translation) -> None:
    """Models become OpenAI-compatible endpoints, as OpenEvolve's client treats them all;
    a model at OpenAI's own address becomes an `openai:` model, which evolve prices and
    asks as OpenAI's reasoning models want."""
    llm = _section(config, "llm")
    models = _models(llm)
    if not models:
        _no_model(folder, seed, out)
        return
    specs = [_model_spec(model, llm, index, out) for index, model in enumerate(models)]
    out.put(("llm", "models"), specs, ("llm",))
    _shared_settings(models, llm, out)
    out.put(("mutators",), [{"name": _operator(config)}], ("diff_based_evolution",))


def _operator(config: Mapping[str, Any]) -> str:
    return "diff" if config.get("diff_based_evolution", True) else "rewrite"


def _models(llm: Mapping[str, Any]) -> list[Model]:
    """The models OpenEvolve would draw from: llm.models, then primary_model and
    secondary_model (the latter at weight 0.2 unless given). A model of weight 0 is never
    drawn, so it is left out."""
    listed = llm.get("models")
    if listed is None:
        listed = []
    if not isinstance(listed, list):
        raise OpenEvolveError(
            ("llm", "models"), "must be a list of models: [{name: ..., weight: ...}]"
        )
    models = [_listed_model(entry, ("llm", "models", index)) for index, entry in enumerate(listed)]
    for role, default in (("primary", None), ("secondary", SECONDARY_WEIGHT)):
        name, weight_key = llm.get(f"{role}_model"), f"{role}_model_weight"
        if not name:
            if llm.get(weight_key) is not None:
                message = f"a weight without a model: set {role}_model too, or remove it"
                raise OpenEvolveError(("llm", weight_key), message)
            continue
        loc = ("llm", f"{role}_model")
        weight_loc = ("llm", weight_key) if weight_key in llm else loc
        written = llm.get(weight_key)
        # As OpenEvolve reads them: primary_model's weight is 1 where it is unset or 0.
        weight = (written or 1.0) if default is None else (default if written is None else written)
        models.append(_model(name, weight, {}, loc, loc, weight_loc))
    drawn = [model for model in models if model.weight > 0]
    if models and not drawn:
        raise OpenEvolveError(("llm",), "every model has weight 0, so none would ever be asked")
    return drawn


def _listed_model(entry: Any, loc: Loc) -> Model:
    if not isinstance(entry, Mapping) or not entry.get("name"):
        raise OpenEvolveError(loc, "each model needs a name: {name: ..., weight: ...}")
    weight_loc = (*loc, "weight") if "weight" in entry else (*loc, "name")
    return _model(entry["name"], entry.get("weight", 1.0), entry, loc, (*loc, "name"), weight_loc)


def _model(
    name: Any, weight: Any, own: Mapping[str, Any], loc: Loc, name_loc: Loc, weight_loc: Loc
) -> Model:
    if not isinstance(name, str) or not name.strip():
        raise OpenEvolveError(name_loc, "must be the model's name, as its server knows it")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
        raise OpenEvolveError(weight_loc, "must be a number, 0 or more (0: never asked)")
    return Model(name.strip(), float(weight), own, loc, name_loc, weight_loc)


def _no_model(folder: Path, seed: str, out: Translation) -> None:
    """Without a model, evolve's offline autotuner proposes alone, which needs @knob values
    in the seed; OpenEvolve could not run such a config at all."""
    if not _has_knobs(folder, seed):
        raise OpenEvolveError(
            ("llm",),
            f"names no model, and {seed} has no @knob values for evolve's offline autotuner "
            "to vary, so nothing could propose a change: name a model, e.g. "
            "`primary_model: gpt-4o-mini` (OpenAI's, with OPENAI_API_KEY set), or `models: "
            "[{name: MODEL, weight: 1.0}]` with `api_base: URL` for another server",
        )
    out.put(("mutators",), [{"name": "autotuner"}], ("llm",))


def _has_knobs(folder: Path, seed: str) -> bool:
    """Whether the seed has @knob values; True where it cannot be read or parsed, for the
    seed's own check to report why."""
    try:
        return bool(find_knobs(Program({seed: read_task_file(folder, seed, "seed")})))
    except (TaskPathError, ProgramError):
        return True


def _model_spec(
    model: Model, llm: Mapping[str, Any], index: int, out: Translation
) -> dict[str, Any]:
    """The task's entry for one model, with where each of its fields was written."""
    base, base_loc = _setting(model, llm, "api_base", OPENAI_BASE)
    key_env, key_loc = _key(model, llm, base)
    spec: dict[str, Any] = {"model": f"openai:{model.name}" if _at_openai(base) else model.name}
    if not _at_openai(base):
        spec["base_url"] = base
    spec["weight"] = model.weight
    if key_env:
        spec["api_key_env"] = key_env
    here = ("llm", "models", index)
    out.origins[here] = model.loc
    for part, origin in (
        ("model", model.name_loc),
        ("base_url", base_loc),
        ("weight", model.weight_loc),
        ("api_key_env", key_loc),
    ):
        out.origins[(*here, part)] = origin
    return spec


def _setting(model: Model, llm: Mapping[str, Any], key: str, default: Any) -> tuple[Any, Loc]:
    """A model's setting and where it was written: its own, else the one shared in `llm:`,
    else OpenEvolve's default (placed at the model)."""
    if model.own.get(key) is not None:
        return model.own[key], (*model.loc, key)
    if llm.get(key) is not None:
        return llm[key], ("llm", key)
    return default, model.name_loc


def _key(model: Model, llm: Mapping[str, Any], base: Any) -> tuple[str | None, Loc]:
    """The variable the model's key is read from (None: OPENAI_API_KEY) and where the key
    was written, checked now: a variable it names must be set, and so must OPENAI_API_KEY
    where the key is absent or a placeholder and the server wants one."""
    value, loc = _setting(model, llm, "api_key", None)
    written = "" if value is None else str(value).strip()
    if named := ENV_REFERENCE.match(written):
        variable = named.group(1)
        if not os.environ.get(variable, "").strip():
            raise OpenEvolveError(
                loc,
                f"names ${{{variable}}}, which is not set: export {variable}=<the key> and run "
                "again (evolve reads the key from it and never stores it)",
            )
        return variable, loc
    if written and not _placeholder(written):
        raise OpenEvolveError(
            loc,
            "evolve stores the config with the run, so it takes no literal key: write "
            "${VARIABLE} and put the key in that environment variable",
        )
    if not os.environ.get(KEY_VARIABLE, "").strip() and _needs_key(base):
        stands = "a placeholder" if written else "empty" if value is not None else "not given"
        raise OpenEvolveError(
            loc if value is not None else model.name_loc,
            f"{model.name} at {base} needs an API key, and {KEY_VARIABLE} is not set "
            f"(OpenEvolve's key for a model whose api_key is {stands}): export {KEY_VARIABLE}, "
            "or write api_key: ${VARIABLE} naming the variable that holds the key",
        )
    return None, loc


def _placeholder(written: str) -> bool:
    """Whether an api_key only holds a key's place (`YOUR_API_KEY`, `your-api-key-here`,
    `lm-studio`) rather than looking like a key, which is long and random."""
    lowered = written.lower()
    random_looking = len(written) >= KEY_MIN_CHARS and any(c.isdigit() for c in written)
    if len(written) >= LONG_KEY_CHARS and random_looking and not any(c.isspace() for c in written):
        return False  # a real key may hold "none" or "fake" among its random letters
    return not random_looking or any(word in lowered for word in PLACEHOLDER_WORDS)


def _needs_key(url: Any) -> bool:
    """Whether a server wants a key: any on the internet does. One on this machine or a
    private network (a vLLM, Ollama or llama.cpp server) is sent a placeholder where no key
    is set; a URL that is no URL is the schema's to report."""
    if not isinstance(url, str):
        return False
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    try:
        return ipaddress.ip_address(host).is_global
    except ValueError:
        return "." in host and not host.endswith(LOCAL_DOMAINS)


def _shared_settings(models: list[Model], llm: Mapping[str, Any], out: Translation) -> None:
    """evolve asks every model with the same settings. Where the models' own differ, the
    weightiest model's temperature is used, and the largest max_tokens, timeout and retries,
    and a note says so. OpenAI's reasoning models take no temperature, so none is sent
    where one of them is asked."""
    weightiest = max(range(len(models)), key=lambda i: models[i].weight)
    for key, task_key in (
        ("temperature", "temperature"),
        ("max_tokens", "max_tokens"),
        ("timeout", "timeout_s"),
        ("retries", "max_attempts"),
    ):
        found = [_setting(model, llm, key, MODEL_DEFAULTS[key]) for model in models]
        if key == "temperature":
            reasoning = [m.name for m in models if _reasons(m, llm)]
            if reasoning:
                out.notes.append(
                    f"llm.temperature is not sent: {', '.join(reasoning)} takes none "
                    "(OpenEvolve leaves it out for such models too)"
                )
                continue
            value, loc = found[weightiest]
        else:
            value, loc = _largest(found)
        differ = sorted({repr(v) for v, _ in found})
        if len(differ) > 1:
            out.notes.append(
                f"llm: the models' {key} differ ({', '.join(differ)}); evolve asks every "
                f"model with one: {value!r}"
            )
        if key == "retries" and _whole(value) is not None:
            value += 1  # attempts: the first, then the retries
        out.put(("llm", task_key), value, loc)


def _reasons(model: Model, llm: Mapping[str, Any]) -> bool:
    """Whether the model is one of OpenAI's reasoning models, at OpenAI's address."""
    base = _setting(model, llm, "api_base", OPENAI_BASE)[0]
    return _at_openai(base) and REASONING_MODEL.match(model.name) is not None


def _at_openai(base: Any) -> bool:
    return isinstance(base, str) and base.rstrip("/") == OPENAI_BASE


def _largest(found: list[tuple[Any, Loc]]) -> tuple[Any, Loc]:
    """The largest of the values, or the first that is no number, for the schema to report
    on its own line."""
    for value, loc in found:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value, loc
    return max(found, key=lambda pair: pair[0])


def _check_run_defaults(config: Mapping[str, Any]) -> None:
    """What `run_defaults` reads must be usable, or the run would not start as asked."""
    workers = _section(config, "evaluator").get("parallel_evaluations")
    if workers is not None and (_whole(workers) is None or workers < 1):
        message = "must be a whole number, 1 or more: the evaluations run at once"
        raise OpenEvolveError(("evaluator", "parallel_evaluations"), message)
    if config.get("random_seed") is not None and _whole(config["random_seed"]) is None:
        raise OpenEvolveError(("random_seed",), "must be a whole number, or null")


def _ignored_keys(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The config's keys that evolve ignores: OpenEvolve's that only tune, and those
    OpenEvolve does not know either. A REFUSED key set to do something is an error."""
    tuning: set[str] = set()
    unknown: set[str] = set()
    for name, loc, value in _written_keys(config):
        if name in REFUSED:
            allowed, advice = REFUSED[name]
            if value not in allowed:
                raise OpenEvolveError(loc, advice)
        elif name.startswith(MODEL_KEY):
            own = name.removeprefix(MODEL_KEY)
            if own in MODEL_TUNING:
                tuning.add(name)
            elif own not in MODEL_HONOURED:
                unknown.add(name)
        elif name in TUNING or name.split(".")[0] in TUNING_SECTIONS:
            tuning.add(name)
        elif name not in HONOURED:
            unknown.add(name)
    return sorted(tuning), sorted(unknown)


def _written_keys(config: Mapping[str, Any]) -> Iterator[tuple[str, Loc, Any]]:
    """Every key of the config as (dotted name, where, value): a section's keys are
    `section.key`, and a listed model's own are `llm.models[].key`."""
    for key, value in config.items():
        if key not in SECTIONS:
            yield str(key), (key,), value
        elif isinstance(value, Mapping):  # an empty section is None; any other, _section's
            for inner, inner_value in value.items():
                yield f"{key}.{inner}", (key, inner), inner_value
    llm = config.get("llm")
    listed = llm.get("models") if isinstance(llm, Mapping) else None
    for index, model in enumerate(listed if isinstance(listed, list) else []):
        for own, own_value in model.items() if isinstance(model, Mapping) else ():
            yield f"{MODEL_KEY}{own}", ("llm", "models", index, own), own_value


def _seed_file(config: Mapping[str, Any], folder: Path) -> str:
    """The seed: initial_program with the config's file_suffix; without one,
    initial_program.py, or the folder's only initial_program.* (a Rust or R seed)."""
    suffix = config.get("file_suffix")
    if suffix is not None:
        if not isinstance(suffix, str) or not suffix.strip(".").strip():
            raise OpenEvolveError(("file_suffix",), "must be a file suffix such as .py or .rs")
        name = SEED_STEM + (suffix if suffix.startswith(".") else f".{suffix}")
        if not (folder / name).is_file():
            raise OpenEvolveError(("file_suffix",), f"no {name} beside the config in {folder}")
        return name
    default = SEED_STEM + DEFAULT_SUFFIX
    found = sorted(p.name for p in folder.glob(f"{SEED_STEM}.*") if p.is_file())
    if default in found or len(found) == 1:
        return default if default in found else found[0]
    if not found:
        raise OpenEvolveError((), f"no {default} (nor another {SEED_STEM}.*) in {folder}")
    message = f"several seeds in {folder} ({', '.join(found)}): set file_suffix to choose one"
    raise OpenEvolveError((), message)


def _whole(value: Any) -> int | None:
    """`value` where it is a whole number (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
