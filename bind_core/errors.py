"""The exceptions `bind_core` raises. All of them are `ValueError`s so callers can catch one type.

Errors on bad input say what to do in terms of the parameters of bind_core's API (``impute_missing``,
``on_unknown_nodes``...). Each caller names those in its own terms: the command line by its flags
(``--impute-missing``), the HTTP API by its request fields. So a message that advises an option holds an
:class:`Option` rather than its name in text, and :meth:`GraphValidationError.text` says the message with
the options named by the caller's function; ``str()`` names them as bind_core's Python API does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict


@dataclass(frozen=True)
class Option:
    """A parameter of bind_core's API that a message advises, and the value to give it.

    Attributes:
        name: the parameter's name (``"on_unknown_nodes"``), as :func:`~bind_core.data.datasets.ingest_files`
            spells it.
        value: the value to give it (``"drop"``), ``True`` for a switch to turn on, ``None`` for the parameter
            itself (``features``: "list the feature columns").
    """

    name: str
    value: str | bool | None = None

    def python(self) -> str:
        """The option as bind_core's Python API takes it.

        Returns:
            A keyword argument: ``on_unknown_nodes='drop'``, ``impute_missing=True``, ``features=``.
        """
        return f"{self.name}=" if self.value is None else f"{self.name}={self.value!r}"


Namer = Callable[[Option], str]
"""How a caller names an option in its own terms (a CLI flag, a request field)."""

Part = str | Option
"""A piece of a message: text as it is, or an option the caller names."""


@dataclass(frozen=True)
class Message:
    """Text whose options each caller names in its own terms: its parts are text, or :class:`Option` s."""

    parts: tuple[Part, ...]

    @classmethod
    def of(cls, *parts: Part | Message) -> Message:
        """The parts in order; a :class:`Message` among them adds its own parts."""
        flat: list[Part] = []
        for part in parts:
            flat += part.parts if isinstance(part, Message) else [part]
        return cls(tuple(flat))

    def text(self, name: Namer = Option.python) -> str:
        """The message with each option said by ``name`` (default: as a Python keyword argument)."""
        return "".join(part if isinstance(part, str) else name(part) for part in self.parts)

    def options(self) -> tuple[Option, ...]:
        """The options the message names, in order."""
        return tuple(part for part in self.parts if isinstance(part, Option))

    def __str__(self) -> str:
        return self.text()


def as_message(text: str | Message) -> Message:
    """``text`` as a :class:`Message` (a string is one part)."""
    return text if isinstance(text, Message) else Message((text,))


class BindError(ValueError):
    """Base class of every error `bind_core` raises on bad input."""


class ProblemDetails(TypedDict, total=False):
    """Where a :class:`GraphValidationError` is and what was given (:meth:`GraphValidationError.details`), each key
    only where known: the members of a problem+json ``errors[]`` entry beside its ``field`` and ``message``."""

    value: str
    column: str
    file: str
    count: int
    rows: list[int]
    values: list[str]
    suggestions: list[str]


class GraphValidationError(BindError):
    """An attributed graph is malformed: the message says what is wrong, and where.

    Args:
        field: the parameter the error is about: the file (``nodes``, ``edges``, ``npz``) when its content is at
            fault, else the option whose value is (``label``, ``sensitive``, ``features``, ``sensitive_bins``...);
            for :meth:`~bind_core.data.graph.Graph.build`, its argument (``x``, ``y``, ``edge_index``...).
        message: what is wrong with it, its advice's options as :class:`Option` s (the exception's text is
            ``"{field}: {message}"``, options named as keyword arguments; :meth:`text` names them otherwise).
        value: the value given to that option, when it is at fault (``"aproved"`` for a misspelled label).
        column: the node table's column concerned, where one is.
        file: the file name as the user knows it.
        rows: the first offending rows as a spreadsheet or text editor shows them (1-based).
        values: the offending values at those rows, as text.
        count: how many rows are at fault in all.
        suggestions: names close to a misspelled one ("did you mean").
        problems: when several problems are reported at once (:meth:`together`), each of them; else empty.

    Each argument is kept as the attribute of the same name (``message`` as a :class:`Message`).
    """

    def __init__(
        self,
        field: str,
        message: str | Message,
        *,
        value: str | None = None,
        column: str | None = None,
        file: str | None = None,
        rows: tuple[int, ...] = (),
        values: tuple[str, ...] = (),
        count: int | None = None,
        suggestions: tuple[str, ...] = (),
        problems: tuple[GraphValidationError, ...] = (),
    ) -> None:
        self.field = field
        self.message = as_message(message)
        self.value = value
        self.column = column
        self.file = file
        self.rows = rows
        self.values = values
        self.count = count
        self.suggestions = suggestions
        self.problems = problems
        super().__init__(f"{field}: {self.message.text()}")

    @classmethod
    def together(cls, problems: Sequence[GraphValidationError]) -> GraphValidationError:
        """One error reporting every one of ``problems``.

        Args:
            problems: the errors; one of several problems counts as its problems.

        Returns:
            The error of them all (the one itself when there is one): its ``field`` and ``file`` the first's.
        """
        problems = [q for p in problems for q in (p.problems or (p,))]
        if len(problems) == 1:
            return problems[0]
        parts: list[Part | Message] = [f"{len(problems)} problems: "]
        for i, problem in enumerate(problems, start=1):
            parts += ["; " if i > 1 else "", f"({i}) ", problem.message]
        first = problems[0]
        return cls(first.field, Message.of(*parts), file=first.file, problems=tuple(problems))

    def text(self, name: Namer = Option.python) -> str:
        """The message in a caller's terms.

        Args:
            name: how the caller says an option (default: as a keyword argument of bind_core's API).

        Returns:
            The message without the field, each option it advises said by ``name``.
        """
        return self.message.text(name)

    def details(self) -> ProblemDetails:
        """Where the error is and what was given, for problem+json ``errors[]``.

        Returns:
            ``value``, ``column``, ``file``, ``rows``, ``values``, ``count`` and ``suggestions``, each only where
            known.
        """
        out = ProblemDetails()
        if self.value is not None:
            out["value"] = self.value
        if self.column is not None:
            out["column"] = self.column
        if self.file is not None:
            out["file"] = self.file
        if self.count is not None:
            out["count"] = self.count
        if self.rows:
            out["rows"] = list(self.rows)
        if self.values:
            out["values"] = list(self.values)
        if self.suggestions:
            out["suggestions"] = list(self.suggestions)
        return out


class DatasetNotFoundError(BindError, FileNotFoundError):
    """A dataset name is unknown, or a file it needs is missing under the data root."""


class ConfigError(BindError):
    """A configuration value is not one of the accepted values; the message quotes it."""


class ModelDoesNotFitError(ConfigError):
    """A model does not fit the graph it is given: its input features or its outputs are not the graph's
    (:func:`bind_core.models.fits.fit_problems`).

    Args:
        problems: every ``(field, message)`` at fault (``in_dim``, ``num_classes``, ``classes``); the exception's text
            joins them.
    """

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        super().__init__(
            "the model does not fit the graph: " + "; ".join(f"{field}: {message}" for field, message in problems)
        )


class MetricInputError(BindError):
    """The inputs of a metric do not fit together (:func:`bind_core.fairness.metrics.evaluate`): probabilities that
    are not a ``[nodes, classes]`` matrix of rows summing to 1, labels or groups of another length, or codes that are
    not integers.

    Args:
        field: the argument at fault (``proba``, ``y``, ``sens``).
        message: what is wrong with it (the exception's text is ``"{field}: {message}"``).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


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
