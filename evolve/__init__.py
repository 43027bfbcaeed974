"""evolve: make programs faster and smaller by evolution."""

__version__ = "0.1.0"
