"""bind-audit's service: one package per feature (audits, graphs, supplied models, schedules, webhooks,
influence, reports, datasets, tenants) over ``app.core`` (settings, database, errors, logging, publisher).

Imports `bind_core` (the science) and never `worker`: the worker imports this package, registers the task
bodies its features define (``app/<feature>/tasks.py``) under their names, and runs the loops. See
docs/ARCHITECTURE.md.
"""
