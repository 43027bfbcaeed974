"""The task a user brings: task.yaml's schema (schema.py), loading it with every
mistake on its line (loading.py, problems.py, checks.py, yaml_limits.py), OpenEvolve
folders run unchanged (openevolve.py), the task as a run stored it (stored.py), and
`evolve check`'s one trial of the seed (seed_check.py, missing_tools.py); how runs are
named and where their files go (run_names.py).
"""
