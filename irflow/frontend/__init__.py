"""The user-facing half of irflow: tracing OneFlow job functions into the job dialect.

Users never import from here; `irflow/__init__.py` gathers the public names.
"""
