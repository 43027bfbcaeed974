"""Building a task's mutators: the LLM operators need the task's model section and context."""

from __future__ import annotations

from evolve.executors import Actor, Executor
from evolve.mutators import LLM_OPERATORS, Agent, LLMEditor, Mutator
from evolve.mutators.agent_tools import AgentServices
from evolve.mutators.prompt import PromptContext
from evolve.plugin import registry
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.hardware import describe_hardware
from evolve.task.loading import LoadedTask
from evolve.task.schema import MutatorSpec


def make_mutators(
    task: LoadedTask, evaluator: Evaluator, executor: Executor, *, store_url: str, run_name: str
) -> tuple[dict[str, Mutator], Actor | None]:
    """Every mutator the task names, by name. An agent's drafts run in a sandbox like the
    workers', and it reads the store through an actor on this node, so agents on other
    machines see the run too: that actor is returned, for the caller to end with the run."""
    services = reader = None
    if any(m.name == "agent" for m in task.spec.mutators):
        reader = executor.store_reader(store_url, run_name)
        services = AgentServices(evaluator, task.spec.sandbox, reader)
    context = prompt_context(task, evaluator)
    mutators = {m.name: make_mutator(m, task, context, services) for m in task.spec.mutators}
    return mutators, reader


def make_mutator(
    spec: MutatorSpec,
    task: LoadedTask,
    context: PromptContext,
    services: AgentServices | None = None,
) -> Mutator:
    """`services` (the sandbox and store the agent's tools reach) is needed by the agent."""
    if spec.name not in LLM_OPERATORS:
        return registry.load_class("mutator", spec.name, Mutator)(spec.params)  # type: ignore[call-arg]
    llm = task.spec.llm
    if llm is None:
        raise ValueError("the task loader refuses LLM operators without an llm section")
    templates = task.root / llm.templates if llm.templates else None
    if spec.name == "agent":
        if services is None:
            raise ValueError("the engine gives the agent its services")
        return Agent(spec.params, llm, context, templates, services)
    return LLMEditor(spec.name, spec.params, llm, context, templates)


def prompt_context(task: LoadedTask, evaluator: Evaluator | None = None) -> PromptContext:
    """What every prompt of the run shares. The rules come from the evaluator's
    `prompt_rules()`, plus the sandbox's limits, which bound every evaluator's runs."""
    main_file = task.seed.main_file
    return PromptContext(
        description=task.spec.description or task.spec.name,
        objectives=tuple((o.name, o.direction) for o in task.spec.objectives),
        notes=task.notes,
        hardware=describe_hardware(),
        language=main_file.rsplit(".", 1)[-1] if "." in main_file else "",
        rules="\n".join(
            filter(None, [evaluator.prompt_rules() if evaluator else "", _limits(task)])
        ),
        evaluator=task.spec.evaluator.name,
    )


def _limits(task: LoadedTask) -> str:
    box = task.spec.sandbox
    return (
        f"- Each sandbox job (a build, a run) is stopped after {box.timeout_s:g} s and may use "
        f"{box.memory_mb} MB of memory."
    )
