"""HTTP routes, one file per resource; :data:`v1` gathers those under ``/v1``."""
