"""The toolkit plugins are written against, and the only part of evolve that the
evaluators (evolve/evaluators/) and sandboxes (evolve/sandboxes/) import: the evaluator
and sandbox contracts (evaluator.py, sandbox.py), programs and their knobs (program.py,
knobs.py), how a proposal ended (proposal_outcomes.py), results and stages (results.py,
stages.py), limits and deadlines (limits.py, watchdog.py), the machine's description,
peaks and counters (hardware.py, peaks.py, plausibility.py, counters.py), task files and
requirements (taskpaths.py, pip_requirements.py), secrets, texts (clipping.py,
failure_line.py, metric_glossary.py) and the registry that finds plugins of every kind by
name (registry.py).
"""
