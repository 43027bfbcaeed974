"""Evaluator plugins shipped with evolve, found through the "evolve.evaluators" entry points."""
