"""Erasure and retention: deleting an audit, purging a graph with everything derived from it, and the sweeper's
``BIND_RETENTION_DAYS``."""
