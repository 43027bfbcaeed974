"""Plugins of every kind are found one way, through entry points: a distribution installed
beside evolve registers a strategy, a mutator or a sandbox backend exactly as evolve
registers its own, and a task names it; a name nothing is registered under, or a class of
the wrong kind, fails the task file on its line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.cli.commands import main
from evolve.mutators import MutationRequest, Parent
from evolve.mutators.factory import make_mutator, prompt_context
from evolve.plugin import registry
from evolve.plugin.program import Program
from evolve.plugin.sandbox import backend
from evolve.search import IslandStrategy, SearchStrategy, make_strategy
from evolve.task.loading import TaskFileError, load_task
from tests.conftest import SYNTHETIC_SEED

PLUGINS = '''
from pydantic import BaseModel

from evolve.mutators import Mutator, Proposal
from evolve.search import IslandStrategy


class Appender(Mutator):
    """Adds a comment line at the end of the parent's block: a mutator from outside evolve."""

    class Params(BaseModel):
        text: str = "# appended"

    def __init__(self, params):
        self.params = self.Params.model_validate(params)

    def propose(self, request):
        files = dict(request.parent.program.files)
        main = next(iter(files))
        end = "# EVOLVE-BLOCK-END"
        files[main] = files[main].replace(end, self.params.text + "\\n" + end)
        return Proposal(request.parent.program.replace(files), {"operator": "appender"})


class Ring(IslandStrategy):
    """The islands strategy under another name: a strategy from outside evolve."""


class Loose:
    """Registered as a mutator and as a strategy, but neither."""

    def __init__(self, params):
        pass
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution `evolve-extras` on sys.path, registering plugins of three kinds."""
    site = tmp_path / "site"
    info = site / "evolve_extras-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "evolve_extras.py").write_text(PLUGINS)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evolve-extras\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[evolve.mutators]\nappender = evolve_extras:Appender\nloose = evolve_extras:Loose\n"
        "[evolve.strategies]\nring = evolve_extras:Ring\nloose = evolve_extras:Loose\n"
        "[evolve.sandboxes]\nlocal_copy = evolve.sandboxes.process\n"
    )
    monkeypatch.syspath_prepend(str(site))


def _task(folder: Path, extra: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "seed.py").write_text(SYNTHETIC_SEED)
    task = folder / "task.yaml"
    head = (
        "name: plugged\nseed: seed.py\nevaluator: {name: synthetic}\n"
        "objectives: [{name: distance, direction: minimize}]\nbudget: {candidates: 3}\n"
    )
    task.write_text(head + textwrap.dedent(extra))
    return task


def test_evolve_registers_its_own_plugins_as_any_other_distribution_does() -> None:
    assert set(registry.registered("strategy")) >= {"islands", "map_elites", "pareto"}
    assert set(registry.registered("mutator")) >= {"autotuner", "agent", "diff", "fix"}
    assert set(registry.registered("sandbox backend")) >= {"docker", "process"}
    assert set(registry.registered("evaluator")) >= {"python", "c_kernel", "synthetic"}


@pytest.mark.usefixtures("installed")
def test_a_strategy_from_another_distribution_is_the_one_a_task_names(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path / "t", "search: {strategy: ring}\n"))
    strategy = make_strategy(task.spec.search, task.spec.objectives, seed_id=1)
    assert type(strategy).__name__ == "Ring"
    assert isinstance(strategy, IslandStrategy)


@pytest.mark.usefixtures("installed")
def test_a_mutator_from_another_distribution_is_built_and_proposes(tmp_path: Path) -> None:
    task = load_task(_task(tmp_path / "t", "mutators: [{name: appender, params: {text: '# x'}}]\n"))
    mutator = make_mutator(task.spec.mutators[0], task, prompt_context(task))
    parent = Program({"seed.py": SYNTHETIC_SEED})
    child = mutator.propose(MutationRequest(Parent(1, parent, None), (), seed=0)).program
    assert child.files["seed.py"] == SYNTHETIC_SEED.replace(
        "# EVOLVE-BLOCK-END", "# x\n# EVOLVE-BLOCK-END"
    )


@pytest.mark.usefixtures("installed")
def test_a_plugin_params_are_checked_on_their_line(tmp_path: Path) -> None:
    task = _task(tmp_path / "t", "mutators:\n  - {name: appender, params: {text: [1]}}\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert "task.yaml:7" in str(caught.value)
    assert "mutators[0].params.text" in str(caught.value)


@pytest.mark.usefixtures("installed")
def test_a_sandbox_backend_from_another_distribution_is_found_by_its_name() -> None:
    assert backend("local_copy").__name__ == "evolve.sandboxes.process"


@pytest.mark.usefixtures("installed")
@pytest.mark.parametrize(
    ("extra", "line", "said"),
    [
        ("search: {strategy: spiral}\n", 6, "unknown strategy 'spiral' (known: islands, loose, "),
        ("sandbox: {backend: vm}\n", 6, "unknown sandbox backend 'vm' (known: docker, "),
        ("mutators: [{name: shuffle}]\n", 6, "unknown mutator 'shuffle' (known: agent, appender"),
        ("mutators: [{name: loose}]\n", 6, "is not a subclass of evolve.mutators.base.Mutator"),
    ],
)
def test_a_name_nothing_is_registered_under_fails_on_its_line(
    tmp_path: Path, extra: str, line: int, said: str
) -> None:
    with pytest.raises(TaskFileError) as caught:
        load_task(_task(tmp_path / "t", extra))
    assert f"task.yaml:{line}" in str(caught.value)
    assert said in str(caught.value)


@pytest.mark.usefixtures("installed")
def test_a_registered_class_of_the_wrong_kind_is_refused() -> None:
    with pytest.raises(TypeError, match=r"evolve\.search\.strategy\.SearchStrategy: derive it"):
        registry.load_class("strategy", "loose", SearchStrategy)


@pytest.mark.parametrize("command", ["run", "check"])
def test_sandbox_flag_names_an_installed_backend_or_exits_2(tmp_path: Path, command: str) -> None:
    task = _task(tmp_path / "t", "")
    said = CliRunner().invoke(main, [command, str(task), "--sandbox", "vm"])
    assert said.exit_code == 2, said.output
    assert "--sandbox: no sandbox backend plugin named 'vm' (installed: docker, process" in (
        " ".join(said.output.split())
    )
