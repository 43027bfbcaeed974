"""Helpers that more than one test module uses: task writers, scripted models, recorders and
commands, kept here so that no test module imports another."""
