"""The exceptions `bind_core` raises. All of them are `ValueError`s so callers can catch one type."""

from __future__ import annotations


class BindError(ValueError):
    """Base class of every error `bind_core` raises on bad input."""


class GraphValidationError(BindError):
    """An attributed graph is malformed: the message names the field and what is wrong with it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class DatasetNotFoundError(BindError, FileNotFoundError):
    """A dataset name is unknown, or a file it needs is missing under the data root."""


class ConfigError(BindError):
    """A configuration value is not one of the accepted values; the message quotes it."""
