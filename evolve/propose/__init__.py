"""How children are proposed: which operator on which parent (proposer.py,
spread.py), how a proposal is made and where (making.py, workers.py, autotuner_draws.py),
what it is shown beyond its parent (briefing.py, digest.py, neighbours.py,
recent_attempts.py), what becomes of it (admission.py, failure_streak.py; its words in
evolve/plugin/proposal_outcomes.py),
and the run's services that model proposals reach wherever they run (services.py,
service_host.py, ledger_writer.py, store_reader.py).
"""
