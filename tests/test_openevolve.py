"""OpenEvolve task folders, run unchanged: the layout and config keys its documentation
describes (initial_program.*, evaluator.py, config.yaml), written here from that
description in each shape its examples take."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evolve.store import Store
from evolve.task.loading import LoadedTask, load_task
from evolve.task.openevolve import REFUSED
from evolve.task.problems import TaskFileError
from tests.fakes.llm_server import ScriptedLLMServer
from tests.helpers.guessing import (
    EVALUATOR,
    PROGRAM,
    answer_closer,
    folder_with,
    primary_secondary,
)

CONFIG = """# A config as OpenEvolve's documentation lays it out.
max_iterations: 6
checkpoint_interval: 10
log_level: INFO
random_seed: 42
diff_based_evolution: true
max_code_length: 10000

llm:
  models:
    - name: scripted
      weight: 1.0
  api_base: "{api_base}"
  temperature: 0.7
  top_p: 0.95
  max_tokens: 2048
  timeout: 30
  retries: 2

prompt:
  system_message: "You are an expert at guessing the answer to everything."
  num_top_programs: 3

database:
  population_size: 100
  num_islands: 2
  migration_interval: 10
  feature_dimensions: [complexity, diversity]

evaluator:
  timeout: 20
  cascade_evaluation: false
  cascade_thresholds: [0.3, 0.6]
  parallel_evaluations: 2
"""

# Each model at its own server, with its own key and generation settings.
PER_MODEL = """max_iterations: 20
llm:
  models:
    - name: "fast-model"
      weight: 0.6
      api_base: "http://127.0.0.1:8001/v1"
      api_key: "${FAST_KEY}"
      temperature: 0.75
      top_p: 0.9
      max_tokens: 8192
      timeout: 180
    - name: "slow-model"
      weight: 0.4
      api_base: "http://127.0.0.1:8002/v1"
      temperature: 0.85
      max_tokens: 6144
      timeout: 120
  evaluator_models:
    - name: "fast-model"
      weight: 1.0
evaluator:
  cascade_evaluation: true
  cascade_thresholds: [0.5, 0.8]
  use_llm_feedback: false
"""


def openevolve_folder(root: Path, api_base: str = "http://127.0.0.1:9/v1", **edits: str) -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(PROGRAM)
    (root / "evaluator.py").write_text(EVALUATOR)
    config = CONFIG.format(api_base=api_base)
    for old, new in edits.items():
        config = config.replace(old.replace("__", " "), new)
    (root / "config.yaml").write_text(config)
    return root


def refusal(folder: Path) -> TaskFileError:
    with pytest.raises(TaskFileError) as caught:
        load_task(folder)
    return caught.value


def line_of(folder: Path, written: str) -> int:
    """The config's line that holds `written`."""
    lines = (folder / "config.yaml").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if written in line)


def ignored_keys(task: LoadedTask) -> list[str]:
    (warning,) = [w for w in task.warnings if "ignored: " in w]
    return (
        warning.split("OpenEvolve keys with no meaning in evolve, ignored: ")[1]
        .split("; ")[0]
        .split(", ")
    )


@pytest.fixture(autouse=True)
def no_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a key is needed depends on OPENAI_API_KEY: each test says whether it is set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_a_folder_maps_every_key_with_a_meaning_and_names_the_rest(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "guess-the-answer")
    before = (folder / "config.yaml").read_bytes()
    task = load_task(folder)
    spec = task.spec
    assert task.path == (folder / "config.yaml").resolve()
    assert spec.name == "guess-the-answer"
    assert list(task.seed.files) == ["initial_program.py"]
    assert spec.description == "You are an expert at guessing the answer to everything."
    assert spec.evaluator.name == "python"
    assert spec.evaluator.params == {
        "evaluator": "evaluator.py",
        "cascade": False,
        "cascade_thresholds": [0.3, 0.6],
    }
    assert [(o.name, o.direction) for o in spec.objectives] == [("combined_score", "maximize")]
    assert spec.budget.candidates == 7  # six iterations plus the seed
    assert (spec.search.islands, spec.search.migration_interval) == (2, 10)
    assert spec.search.inspirations == 5  # three top programs, and OpenEvolve's two diverse
    assert spec.sandbox.timeout_s == 20
    assert spec.llm is not None
    model = spec.llm.models[0]
    assert (model.model, model.base_url, model.weight) == ("scripted", "http://127.0.0.1:9/v1", 1.0)
    assert model.api_key_env is None  # OPENAI_API_KEY's, which a local server does not need
    assert (spec.llm.temperature, spec.llm.max_tokens, spec.llm.timeout_s) == (0.7, 2048, 30)
    assert spec.llm.max_attempts == 3
    assert [m.name for m in spec.mutators] == ["diff"]
    assert ignored_keys(task) == sorted(
        [
            "checkpoint_interval",
            "database.feature_dimensions",
            "database.population_size",
            "llm.top_p",
            "log_level",
            "max_code_length",
        ]
    )
    assert (folder / "config.yaml").read_bytes() == before, "the user's config is never rewritten"


def test_primary_and_secondary_models_are_asked_by_their_weights(tmp_path: Path) -> None:
    task = load_task(folder_with(tmp_path / "t", primary_secondary()))
    assert task.spec.llm is not None
    models = [(m.model, m.base_url, m.weight) for m in task.spec.llm.models]
    assert models == [
        ("small-model", "http://127.0.0.1:9/v1", 0.8),
        ("big-model", "http://127.0.0.1:9/v1", 0.2),
    ]
    assert task.spec.llm.temperature == 0.6
    assert (task.spec.llm.timeout_s, task.spec.llm.max_attempts) == (60, 4)  # OpenEvolve's
    assert [m.name for m in task.spec.mutators] == ["diff"]
    assert "llm.primary_model" not in " ".join(task.warnings)


def test_a_secondary_model_without_a_weight_gets_openevolves_and_one_of_weight_0_is_never_asked(
    tmp_path: Path,
) -> None:
    unweighted = primary_secondary().replace("  secondary_model_weight: 0.2\n", "")
    task = load_task(folder_with(tmp_path / "a", unweighted))
    assert task.spec.llm is not None
    assert [(m.model, m.weight) for m in task.spec.llm.models] == [
        ("small-model", 0.8),
        ("big-model", 0.2),
    ]
    unused = primary_secondary().replace("secondary_model_weight: 0.2", "secondary_model_weight: 0")
    task = load_task(folder_with(tmp_path / "b", unused))
    assert task.spec.llm is not None
    assert [m.model for m in task.spec.llm.models] == ["small-model"]


def test_each_model_keeps_its_own_server_and_key_and_shares_one_set_of_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAST_KEY", "not-a-real-key")
    task = load_task(folder_with(tmp_path / "t", PER_MODEL))
    llm = task.spec.llm
    assert llm is not None
    assert [(m.model, m.base_url, m.api_key_env, m.weight) for m in llm.models] == [
        ("fast-model", "http://127.0.0.1:8001/v1", "FAST_KEY", 0.6),
        ("slow-model", "http://127.0.0.1:8002/v1", None, 0.4),
    ]
    # One value for all: the weightiest model's temperature, the largest of the others.
    assert (llm.temperature, llm.max_tokens, llm.timeout_s) == (0.75, 8192, 180)
    notes = " ".join(task.warnings)
    assert "the models' temperature differ (0.75, 0.85)" in notes
    assert "llm.evaluator_models" in ignored_keys(task)
    assert "llm.models[].top_p" in ignored_keys(task)
    assert task.spec.evaluator.params["cascade_thresholds"] == [0.5, 0.8]
    assert task.spec.sandbox.timeout_s == 300  # OpenEvolve's evaluation time limit


def test_a_shared_api_base_serves_every_listed_model(tmp_path: Path) -> None:
    config = textwrap.dedent(
        """\
        llm:
          api_base: "http://localhost:11434/v1"
          models:
            - name: "qwen2.5-coder:7b"
              weight: 0.7
            - name: "llama3.1:8b"
              weight: 0.3
              api_base: "http://gpu-box:8000/v1"
        """
    )
    task = load_task(folder_with(tmp_path / "t", config))
    assert task.spec.llm is not None
    assert [(m.model, m.base_url) for m in task.spec.llm.models] == [
        ("qwen2.5-coder:7b", "http://localhost:11434/v1"),
        ("llama3.1:8b", "http://gpu-box:8000/v1"),
    ]


def test_a_model_at_openais_own_address_is_an_openai_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenEvolve's default api_base: evolve prices the model and asks it as OpenAI's
    reasoning models want, which take no temperature."""
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    config = "llm:\n  primary_model: o3-mini\n  secondary_model: gpt-4o-mini\n"
    task = load_task(folder_with(tmp_path / "t", config))
    assert task.spec.llm is not None
    assert [(m.model, m.base_url) for m in task.spec.llm.models] == [
        ("openai:o3-mini", None),
        ("openai:gpt-4o-mini", None),
    ]
    assert task.spec.llm.temperature is None
    assert any("o3-mini takes none" in said for said in task.warnings)


@pytest.mark.parametrize(
    ("api_key", "api_base", "openai_key"),
    [
        (None, "http://127.0.0.1:9/v1", None),  # absent: a local server needs none
        ("", "http://127.0.0.1:9/v1", None),
        ("YOUR_API_KEY", "http://127.0.0.1:9/v1", None),
        ("lm-studio", "http://127.0.0.1:9/v1", None),
        ("your-api-key-here", "https://openrouter.ai/api/v1", "not-a-real-key"),
        (None, "https://generativelanguage.googleapis.com/v1beta/openai/", "not-a-real-key"),
    ],
)
def test_an_absent_or_placeholder_key_is_openai_api_keys(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    api_key: str | None,
    api_base: str,
    openai_key: str | None,
) -> None:
    if openai_key is not None:
        monkeypatch.setenv("OPENAI_API_KEY", openai_key)
    config = primary_secondary(api_base=api_base, api_key=api_key)
    task = load_task(folder_with(tmp_path / "t", config))
    assert task.spec.llm is not None
    assert {m.api_key_env for m in task.spec.llm.models} == {None}


@pytest.mark.parametrize(
    ("api_key", "api_base", "written", "variable"),
    [
        (None, "https://openrouter.ai/api/v1", "primary_model:", "OPENAI_API_KEY"),
        ("", "https://openrouter.ai/api/v1", "api_key:", "OPENAI_API_KEY"),
        ("YOUR_API_KEY", "https://openrouter.ai/api/v1", "api_key:", "OPENAI_API_KEY"),
        ("${OPENROUTER_KEY}", "https://openrouter.ai/api/v1", "api_key:", "OPENROUTER_KEY"),
        ("${LOCAL_KEY}", "http://127.0.0.1:9/v1", "api_key:", "LOCAL_KEY"),
    ],
)
def test_a_model_whose_key_is_nowhere_stops_the_run_on_its_line(
    tmp_path: Path, api_key: str | None, api_base: str, written: str, variable: str
) -> None:
    folder = folder_with(tmp_path / "t", primary_secondary(api_base=api_base, api_key=api_key))
    error = refusal(folder)
    assert error.line == line_of(folder, written), str(error)
    assert f"export {variable}" in error.message


def test_a_literal_key_never_reaches_the_store(tmp_path: Path) -> None:
    """The config is stored with the run, so a key written in it is refused outright."""
    key = "sk-proj-4fGh81KzQm20vXcB7nLp"
    folder = folder_with(tmp_path / "t", primary_secondary(api_key=key))
    error = refusal(folder)
    assert (error.line, error.field) == (line_of(folder, "api_key:"), "llm.api_key")
    assert "takes no literal key" in error.message and "${VARIABLE}" in error.message
    assert key not in str(error)


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("max_iterations: 6", "max_iterations: -3", "max_iterations", "greater than or equal"),
        ("  num_islands: 2", "  num_islands: many", "database.num_islands", "integer"),
        ("  timeout: 20", "  timeout: soon", "evaluator.timeout", "number"),
        ("  temperature: 0.7", "  temperature: 9", "llm.temperature", "less than or equal"),
        ('  api_base: "', '  api_key: "sk-live-51Hx0aB93kQz"\n  api_base: "', "llm.api_key", "${"),
        ("weight: 1.0", "weight: -1", "llm.models[0].weight", "0 or more"),
        ("evaluations: 2", "evaluations: 0", "evaluator.parallel_evaluations", "1 or more"),
        ("random_seed: 42", "random_seed: lucky", "random_seed", "whole number"),
        ('  api_base: "http', '  api_base: "ftp', "llm.api_base", "http(s) URL"),
    ],
)
def test_a_bad_value_is_reported_on_the_configs_own_line(
    tmp_path: Path, old: str, new: str, field: str, message: str
) -> None:
    folder = openevolve_folder(tmp_path / "t")
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace(old, new))
    error = refusal(folder)
    line = line_of(folder, new.splitlines()[0].strip())
    assert (error.line, error.field) == (line, field), str(error)
    assert message in error.message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("early_stopping_patience", "10"),
        ("evaluator.use_llm_feedback", "true"),
        ("prompt.template_dir", "templates"),
        ("hierarchical.enabled", "true"),
        ("llm.manual_mode", "true"),
        ("llm.provider", "gemini"),
    ],
)
def test_a_key_that_changes_the_run_and_cannot_be_honoured_is_an_error_on_its_line(
    tmp_path: Path, key: str, value: str
) -> None:
    section, _, name = key.rpartition(".")
    sections = {"": [], "llm": ["primary_model: m", "api_base: http://127.0.0.1:9/v1"]}
    sections.setdefault(section, []).append(f"{name}: {value}")
    config = "".join(f"{line}\n" for line in sections.pop(""))
    for heading, lines in sections.items():
        config += f"{heading}:\n" + "".join(f"  {line}\n" for line in lines)
    folder = folder_with(tmp_path / "t", config)
    error = refusal(folder)
    assert (error.line, error.field) == (line_of(folder, f"{name}: {value}"), key)
    assert error.message == REFUSED[key][1]


def test_a_long_random_key_holding_a_placeholder_word_is_still_refused(tmp_path: Path) -> None:
    key = "sk-proj-" + "a1B2none9Z" * 5  # "none" among random letters
    folder = folder_with(tmp_path / "a", f"llm:\n  primary_model: gpt-4o\n  api_key: {key}\n")
    error = refusal(folder)
    assert error.field == "llm.api_key"
    assert "${" in error.message


def test_those_keys_at_openevolves_defaults_run(tmp_path: Path) -> None:
    defaults = "early_stopping_patience: null\nhierarchical:\n  enabled: false\n"
    folder = openevolve_folder(
        tmp_path / "t", **{"  parallel_evaluations: 2": "  use_llm_feedback: false"}
    )
    config = folder / "config.yaml"
    config.write_text(config.read_text() + defaults)
    said = " ".join(load_task(folder).warnings)
    assert "use_llm_feedback" not in said and "hierarchical" not in said


def test_keys_openevolve_does_not_know_either_are_named_apart(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "t")
    config = folder / "config.yaml"
    config.write_text(config.read_text() + "logging:\n  level: INFO\n")
    (warning,) = [w for w in load_task(folder).warnings if "ignored: " in w]
    assert warning.endswith("; keys OpenEvolve does not know either, ignored: logging")


def test_full_rewrites_and_diffs(tmp_path: Path) -> None:
    folder = openevolve_folder(
        tmp_path / "t", **{"diff_based_evolution:__true": "diff_based_evolution: false"}
    )
    assert [m.name for m in load_task(folder).spec.mutators] == ["rewrite"]


RUST_SEED = """// EVOLVE-BLOCK-START
pub fn guess() -> i64 {
    3
}
// EVOLVE-BLOCK-END
"""

R_SEED = """# EVOLVE-BLOCK-START
guess <- function() 3
# EVOLVE-BLOCK-END
"""


def test_a_seed_in_another_language_by_its_file_suffix_or_as_the_only_one(
    tmp_path: Path,
) -> None:
    rust = primary_secondary() + 'language: "rust"\nfile_suffix: ".rs"\n'
    task = load_task(folder_with(tmp_path / "rust", rust, RUST_SEED, "initial_program.rs"))
    assert list(task.seed.files) == ["initial_program.rs"]
    assert "language" not in " ".join(task.warnings)
    task = load_task(folder_with(tmp_path / "r", primary_secondary(), R_SEED, "initial_program.r"))
    assert list(task.seed.files) == ["initial_program.r"]


def test_a_file_suffix_without_its_seed_is_an_error_on_its_line(tmp_path: Path) -> None:
    folder = folder_with(tmp_path / "t", primary_secondary() + 'file_suffix: ".rs"\n')
    error = refusal(folder)
    assert (error.line, error.field) == (line_of(folder, "file_suffix:"), "file_suffix")
    assert "no initial_program.rs" in error.message


def test_no_model_and_nothing_for_the_autotuner_is_an_error(tmp_path: Path) -> None:
    """OpenEvolve cannot run without a model; evolve's offline autotuner could, but only
    on @knob values, which an OpenEvolve seed lacks."""
    folder = folder_with(tmp_path / "t", "max_iterations: 5\nllm:\n  temperature: 0.5\n")
    error = refusal(folder)
    assert (error.line, error.field) == (line_of(folder, "llm:"), "llm")
    assert "names no model" in error.message and "@knob" in error.message
    knobbed = PROGRAM.replace("return 3", "return 3  # @knob int 0..100")
    task = load_task(folder_with(tmp_path / "k", "max_iterations: 5\n", knobbed))
    assert task.spec.llm is None
    assert [m.name for m in task.spec.mutators] == ["autotuner"]


def test_a_key_named_as_a_variable_is_read_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = openevolve_folder(tmp_path / "t")
    config = folder / "config.yaml"
    text = config.read_text().replace("  api_base:", '  api_key: "${GUESS_KEY}"\n  api_base:')
    config.write_text(text)
    monkeypatch.setenv("GUESS_KEY", "not-a-real-key")
    spec = load_task(folder).spec
    assert spec.llm is not None and spec.llm.models[0].api_key_env == "GUESS_KEY"


# -- through the command line ------------------------------------------------------------


def evolve_run(
    folder: Path, results: Path, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`evolve run` on the folder, its output and errors in one stream, in order."""
    return subprocess.run(
        [sys.executable, "-m", "evolve", "run", str(folder), "--plain", "--sandbox", "process",
         "--results", str(results), *options],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300, env=env,
    )  # fmt: skip


def without_openai_key() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "OPENAI_API_KEY"}


@pytest.mark.system
def test_evolve_runs_the_folder_unchanged(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=answer_closer) as server:
        folder = openevolve_folder(
            tmp_path / "guess",
            api_base=server.openai_url,
            **{"  api_base:": '  api_key: "${GUESS_KEY}"\n  api_base:'},
        )
        results = tmp_path / "results"
        env = {**without_openai_key(), "GUESS_KEY": "key-from-the-environment"}
        shown = evolve_run(folder, results, "--workers", "1", env=env)
        requests = len(server.requests)
        keys = {request.api_key for request in server.requests}
    assert shown.returncode == 0, shown.stdout
    assert keys == {"key-from-the-environment"}
    kept = [path for path in results.rglob("*") if path.is_file()]
    assert kept and not [p for p in kept if b"key-from-the-environment" in p.read_bytes()]
    assert shown.stdout.splitlines()[0].startswith("models: scripted at "), shown.stdout
    assert "OpenEvolve keys with no meaning in evolve, ignored: checkpoint_interval" in shown.stdout
    assert requests > 0
    store = Store(f"sqlite:///{results / 'evolve.db'}")
    (run,) = store.list_runs()
    assert run.status == "finished"
    assert run.seed == 42  # the config's random_seed
    seed = store.seed_candidate(run.name)
    best = store.top(run.name, 1)[0]
    assert seed is not None and seed.score == pytest.approx(1 / 40)
    assert best.score is not None and best.score > seed.score, "the model's edits were scored"
    latest = store.evaluations(best.id)[-1]
    assert latest.metrics["value"] in (16, 29, 42)
    assert "is not low" in latest.feedback or "is low" in latest.feedback  # artifacts shown


@pytest.mark.system
def test_a_primary_model_at_the_configs_api_base_is_asked(tmp_path: Path) -> None:
    """The shape that ran the autotuner instead, and ended with the seed as best: every
    proposal is the model's, none the autotuner's or the finisher's (the program has no
    @knob values), and parallel_evaluations is the run's worker count."""
    with ScriptedLLMServer(default=answer_closer) as server:
        config = primary_secondary(
            api_base=server.openai_url, api_key="YOUR_API_KEY", iterations=10, workers=1
        )
        folder = folder_with(tmp_path / "guess", config)
        results = tmp_path / "results"
        shown = evolve_run(folder, results, env=without_openai_key())
        asked = {request.body["model"] for request in server.requests}
        keys = {request.api_key for request in server.requests}
    assert shown.returncode == 0, shown.stdout
    first = shown.stdout.splitlines()[0]
    assert first.startswith("models: small-model at ") and "big-model" in first, first
    assert asked <= {"small-model", "big-model"} and "small-model" in asked
    assert "YOUR_API_KEY" not in keys  # a placeholder is no key: none is sent to a local server
    store = Store(f"sqlite:///{results / 'evolve.db'}")
    (run,) = store.list_runs()
    assert run.settings["workers"] == 1
    proposals = store.proposals(run.name)
    assert {p.operator for p in proposals} == {"diff"}, [(p.operator, p.detail) for p in proposals]
    best = store.top(run.name, 1)[0]
    assert best.score is not None and best.score > 1 / 40


@pytest.mark.system
def test_a_model_without_a_key_stops_before_anything_starts(tmp_path: Path) -> None:
    folder = folder_with(tmp_path / "t", primary_secondary(api_base="https://openrouter.ai/api/v1"))
    shown = evolve_run(folder, tmp_path / "results", env=without_openai_key())
    assert shown.returncode == 2, shown.stdout
    (line,) = shown.stdout.splitlines()
    where = f"{folder / 'config.yaml'}:{line_of(folder, 'primary_model:')}: llm.primary_model:"
    assert line.startswith(f"error: {where} small-model at https://openrouter.ai/api/v1 needs")
    assert "export OPENAI_API_KEY" in line
    assert not (tmp_path / "results").exists()
