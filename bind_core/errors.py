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


class ModelNotStationaryError(BindError):
    """The audited weights are not a stationary point of the training objective, so influence estimates (which
    linearise around one) would not mean what they say. ``max_abs_grad`` and ``grad_norm`` say how far off."""

    def __init__(self, message: str, *, max_abs_grad: float, grad_norm: float, tolerance: float) -> None:
        self.max_abs_grad = max_abs_grad
        self.grad_norm = grad_norm
        self.tolerance = tolerance
        super().__init__(message)


class NonFiniteError(BindError):
    """A model's outputs (predicted probabilities) hold NaN or inf, so no prediction or metric can be made."""


class AuditCancelled(Exception):
    """The caller's progress callback asked to stop (it returned ``False``, or raised this). Not a
    :class:`BindError`: nothing is wrong with the input. ``stage`` is where the work stopped."""

    def __init__(self, stage: str | None = None) -> None:
        self.stage = stage
        super().__init__(f"cancelled during {stage}" if stage else "cancelled")
