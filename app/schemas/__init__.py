"""Pydantic models of the HTTP API, kept apart from the database models in :mod:`app.db.models`."""
