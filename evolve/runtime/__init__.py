"""The processes a run lives among: Ray started or joined (cluster.py,
lean_ray.py, ray_output.py, ray_connect_errors.py), the driver's lease on its run
(lease.py), the guardian and the clean-up after dead drivers (guardian.py, orphans.py,
processes.py), the run's log (runlog.py) and the sandbox a run's candidates get
(sandbox_choice.py).
"""
