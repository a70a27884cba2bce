"""A base for settings dataclasses that serialise themselves to and from plain JSON-ready dicts."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, ClassVar, Self

from bind_core.errors import ConfigError


class DictConfig:
    """Mixin for frozen dataclasses: ``to_dict`` and a ``from_dict`` that names unknown or mistyped keys."""

    section: ClassVar[str] = "settings"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # subclasses are dataclasses

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        if not isinstance(data, dict):
            raise ConfigError(f"{cls.section}: expected an object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"{cls.section}: unknown setting(s) {sorted(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:  # a value of the wrong type reached a comparison in __post_init__
            raise ConfigError(f"{cls.section}: {exc}") from exc
