"""bind-audit's HTTP API: routes, schemas, dependencies, settings, database models and migrations.

Imports `bind_core` (the science) and never `worker` (the worker imports this package for its settings,
models and sessions, and receives jobs by task name through `app.core.publisher`).
"""
