"""What the user sees: the live dashboard during a run, tables after it."""
