"""A base for settings dataclasses that serialise themselves to and from plain JSON-ready dicts."""

from __future__ import annotations

import numbers
from dataclasses import fields
from typing import Any, ClassVar, Self

from bind_core.codec import Encoded
from bind_core.errors import ConfigError

_SCALARS: dict[str, tuple[type, str]] = {
    "int": (numbers.Integral, "an integer"),
    "float": (numbers.Real, "a number"),
    "bool": (bool, "true or false"),
    "str": (str, "a string"),
}
"""The scalar annotations checked by ``from_dict``: the type a value must have, and how to say so."""


def _type_error(name: str, annotation: Any, value: Any) -> str | None:
    """Why ``value`` does not fit a field annotated ``annotation`` (as a string), or None if it fits.

    Booleans are not numbers here (``True`` is an ``int`` to Python, never an epoch count to a user), and
    strings are never numbers; an integer is a valid float. ``X | None`` takes ``None`` too (unset: the default
    rule the field's docstring gives).
    """
    if not isinstance(annotation, str):
        return None
    optional = annotation.endswith(" | None")
    annotation = annotation.removesuffix(" | None")
    if annotation not in _SCALARS or (optional and value is None):
        return None
    kind, words = _SCALARS[annotation]
    if isinstance(value, kind) and (annotation == "bool" or not isinstance(value, bool)):
        return None
    return f"{name}: expected {words}{' or null' if optional else ''}, got {type(value).__name__} {value!r}"


class DictConfig(Encoded):
    """Mixin for frozen dataclasses: ``to_dict`` (:class:`~bind_core.codec.Encoded`) and a ``from_dict`` that names
    unknown or mistyped keys."""

    section: ClassVar[str] = "settings"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """The settings from :meth:`to_dict`'s form.

        Args:
            data: settings by name; missing keys take the defaults.

        Returns:
            The validated settings object.

        Raises:
            ConfigError: ``data`` is not an object, or has an unknown or mistyped key (the message names it and
                the section, :attr:`section`).
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.section}: expected an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"{cls.section}: unknown setting(s) {sorted(unknown)}")
        for field in fields(cls):  # type: ignore[arg-type]
            if field.name in data and (problem := _type_error(field.name, field.type, data[field.name])):
                raise ConfigError(f"{cls.section}: {problem}")
        try:
            return cls(**data)
        except TypeError as exc:  # a value of the wrong type reached a comparison in __post_init__
            raise ConfigError(f"{cls.section}: {exc}") from exc
