"""Reading and writing the typed audit results (:mod:`bind_core.pipeline.results`) as the JSON that
:meth:`~bind_core.pipeline.audit.AuditResult.to_dict` produces, losslessly.

Each result class is a keyword-only dataclass whose fields are the JSON object's keys. A field made with
:func:`key` says what the key holds (``doc``, shown in the API's schema) and whether it is ``optional``: an
optional key is absent from the JSON when the field is ``None`` (a required key is always written, ``null``
included). A class with an ``extra`` field (:func:`open_keys`) keeps the keys it does not name there, in order,
so that an open-ended record (a solver's details, the polish's record) survives the round trip; a class
without one refuses unknown keys. Values are never converted, with one exception: :func:`encode` writes a number
that is not finite (NaN, infinity: an undefined figure) as ``null``, since strict JSON has neither (``json.dumps``
would write ``NaN``, which no JSON parser accepts); :func:`decode` reads ``null`` where a number is required (a field
typed ``float``, not ``float | None``) back as NaN. Every other number comes back as it went in.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union

from bind_core.errors import ConfigError

__all__ = ["EXTRA", "Encoded", "ResultFormatError", "decode", "encode", "json_name", "json_safe", "key", "open_keys"]

EXTRA = "extra"
"""The field that holds an open class's unnamed keys."""

T = TypeVar("T")


class ResultFormatError(ConfigError):
    """A results document that does not have the shape of its typed class."""


def key(doc: str, *, optional: bool = False, name: str | None = None) -> Any:
    """A result field: ``doc`` says what it holds (type and meaning); an ``optional`` key may be absent
    (then the field is ``None``, and ``None`` is written as no key); ``name``: the JSON key where it cannot be the
    field's name (``"class"``)."""
    metadata: dict[str, Any] = {"doc": doc, "optional": optional}
    if name is not None:
        metadata["name"] = name
    if optional:
        return dataclasses.field(default=None, metadata=metadata)
    return dataclasses.field(metadata=metadata)


def open_keys(doc: str) -> Any:
    """The ``extra`` field of an open class: the keys it does not name, in the order they came."""
    return dataclasses.field(default_factory=dict, metadata={"doc": doc, "optional": True, "extra": True})


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def json_name(f: dataclasses.Field[Any]) -> str:
    """The JSON key of a result field: its ``key(name=...)``, else the field's name."""
    name: str = f.metadata.get("name", f.name)
    return name


def _nullable(tp: Any) -> tuple[Any, bool]:
    """``X | None`` → ``(X, True)``, ``X | Y | None`` → ``(X | Y, True)``; anything else → ``(tp, False)``."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        rest = args[0] if len(args) == 1 else Union[tuple(args)]  # noqa: UP007 (built at run time)
        return rest, len(args) < len(typing.get_args(tp))
    return tp, False


def _check_scalar(tp: type, value: Any, where: str) -> None:
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
    }[tp]
    if not ok:
        raise ResultFormatError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")


def _decode_value(tp: Any, value: Any, where: str) -> Any:
    inner, nullable = _nullable(tp)
    if value is None:
        if nullable or inner is Any:
            return None
        if inner is float:  # a required number that was not finite: encode wrote it null
            return math.nan
        raise ResultFormatError(f"{where}: null where {inner} is required")
    if inner is Any:
        return value
    if typing.get_origin(inner) in (Union, types.UnionType):  # scalars only, e.g. ``bool | str``: the first that fits
        for option in typing.get_args(inner):
            try:
                return _decode_value(option, value, where)
            except ResultFormatError:
                continue
        raise ResultFormatError(f"{where}: {type(value).__name__} is none of {inner}")
    if dataclasses.is_dataclass(inner) and isinstance(inner, type):
        return decode(inner, value, where)
    origin = typing.get_origin(inner)
    if origin is list:
        if not isinstance(value, list):
            raise ResultFormatError(f"{where}: expected a list")
        (item,) = typing.get_args(inner)
        return [_decode_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ResultFormatError(f"{where}: expected an object")
        _, item = typing.get_args(inner)
        return {k: _decode_value(item, v, f"{where}.{k}") for k, v in value.items()}
    _check_scalar(inner, value, where)
    return value


def decode(cls: type[T], data: Any, where: str = "results") -> T:
    """``data`` (one JSON object) as ``cls``; :class:`ResultFormatError` when it does not fit."""
    if not isinstance(data, dict):
        raise ResultFormatError(f"{where}: expected an object for {cls.__name__}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    named = {json_name(f): n for n, f in fields.items() if not f.metadata.get("extra")}
    kwargs: dict[str, Any] = {}
    for name, attribute in named.items():
        if name in data:
            kwargs[attribute] = _decode_value(hints[attribute], data[name], f"{where}.{name}")
        elif not fields[attribute].metadata.get("optional"):
            raise ResultFormatError(f"{where}: missing {name!r} ({cls.__name__})")
    unknown = {k: v for k, v in data.items() if k not in named}
    if unknown:
        if EXTRA not in fields:
            raise ResultFormatError(f"{where}: unknown key(s) {sorted(unknown)} ({cls.__name__})")
        kwargs[EXTRA] = unknown
    return cls(**kwargs)


def _encode_value(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, list | tuple):
        return [_encode_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode_value(v) for k, v in value.items()}
    return value


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object of a result dataclass (the inverse of :func:`decode`): a number that is not finite (NaN,
    infinity) written as ``None`` (``null``), so that ``json.dumps`` of it is strict JSON."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.metadata.get("extra"):
            out.update(value)
        elif value is not None or not f.metadata.get("optional"):
            out[json_name(f)] = _encode_value(value)
    return out


class Encoded:
    """A mixin for the dataclasses the codec writes: :func:`encode` as a method, so that every settings and results
    class has the same ``to_dict`` (there is one encoder)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this dataclass (:func:`encode`).

        Returns:
            One key per field (nested dataclasses as their own objects, tuples as lists; an optional field that is
            ``None`` absent); what the class's ``from_dict`` reads back.
        """
        return encode(self)


def json_safe(value: object) -> object:
    """``value`` (an encoded document) with every NaN or infinity replaced by ``None``: strict JSON has neither, and
    Postgres refuses them in JSON columns.

    Args:
        value: a JSON-ready value (objects, lists, tuples, scalars).

    Returns:
        The same value, non-finite floats as ``None``, tuples as lists, keys as strings.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
