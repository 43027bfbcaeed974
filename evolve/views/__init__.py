"""What a person is shown of a run beyond the live board (evolve/ui/) and the
report (evolve/report/): figures in the objective's own terms (figures.py,
objective_terms.py), a run's state as a reader should see it (run_states.py), lineage
trees and diffs (lineage_tree.py, program_diff.py) and exports (export.py).
"""
