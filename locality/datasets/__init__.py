"""Trace loaders and synthetic trace generators (pure numpy/pandas, seeded)."""
