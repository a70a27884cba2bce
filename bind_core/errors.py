"""The exceptions `bind_core` raises. All of them are `ValueError`s so callers can catch one type."""

from __future__ import annotations


class BindError(ValueError):
    """Base class of every error `bind_core` raises on bad input."""


class GraphValidationError(BindError):
    """An attributed graph is malformed: the message names the field and what is wrong with it.

    Errors about a user's file also carry where: ``file`` (the file name as the user knows it), ``rows`` (up to
    five 1-based rows as a spreadsheet or text editor shows them), ``values`` (the offending values at those
    rows, as text) and ``count`` (how many rows are at fault in all). ``field`` is then the user's column, or
    the form field or file part (``"edges"``) when no column applies.

    Args:
        field: the field, column or file part at fault.
        message: what is wrong with it (the exception's text is ``"{field}: {message}"``).
        file: the file name as the user knows it, when the error is about a user's file.
        rows: up to five 1-based rows at fault.
        values: the offending values at those rows, as text.
        count: how many rows are at fault in all.
    """

    def __init__(
        self,
        field: str,
        message: str,
        *,
        file: str | None = None,
        rows: tuple[int, ...] = (),
        values: tuple[str, ...] = (),
        count: int | None = None,
    ) -> None:
        self.field = field
        self.file = file
        self.rows = rows
        self.values = values
        self.count = count
        super().__init__(f"{field}: {message}")

    def details(self) -> dict[str, object]:
        """Where the error is, for problem+json ``errors[]``.

        Returns:
            ``file``, ``rows``, ``values`` and ``count``, each only where known.
        """
        out: dict[str, object] = {}
        if self.file is not None:
            out["file"] = self.file
        if self.rows:
            out["rows"] = list(self.rows)
        if self.values:
            out["values"] = list(self.values)
        if self.count is not None:
            out["count"] = self.count
        return out


class DatasetNotFoundError(BindError, FileNotFoundError):
    """A dataset name is unknown, or a file it needs is missing under the data root."""


class ConfigError(BindError):
    """A configuration value is not one of the accepted values; the message quotes it."""


class NonFiniteError(BindError):
    """A model's outputs (predicted probabilities) hold NaN or inf, so no prediction or metric can be made."""


class AuditCancelled(Exception):
    """The caller's progress callback asked to stop (it returned ``False``, or raised this). Not a
    :class:`BindError`: nothing is wrong with the input.

    Args:
        stage: the stage where the work stopped (``None`` when unknown).
    """

    def __init__(self, stage: str | None = None) -> None:
        self.stage = stage
        super().__init__(f"cancelled during {stage}" if stage else "cancelled")
