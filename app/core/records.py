"""Response models built from ``bind_core``'s typed records (the dataclasses the codec writes): one model per
dataclass, the same keys, the field docs as descriptions.

Served as stored: every key is optional in the schema (a document stored by an older version may lack one), keys the
models do not name are allowed and kept (``additionalProperties``), and a key the stored document does not have is
not added (no ``null`` appears that was not stored). See :func:`lenient` for a document that fits no model.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidatorFunctionWrapHandler,
    create_model,
    model_serializer,
)

from bind_core.codec import EXTRA, json_name

__all__ = ["StoredModel", "lenient", "model_for"]


class StoredModel(BaseModel):
    """A stored JSON document, typed: unnamed keys allowed and kept, absent keys left absent."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_stored(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        # no return annotation: with one, pydantic would document the serialized model as that type (``{}`` for Any)
        if not isinstance(self, StoredModel):
            return self  # a stored document that fit no model (:func:`lenient`): as stored
        data = handler(self)
        if not isinstance(data, dict):
            return data
        fields = type(self).model_fields
        aliases = {fields[n].alias for n in self.model_fields_set if n in fields}
        kept = self.model_fields_set | {a for a in aliases if a is not None} | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in kept}


_MODELS: dict[type, type[BaseModel]] = {}


_NAMES = {"Summary": "AuditResultsSummary"}
"""Schema names that the rule below would give twice: ``AuditSummary`` is also the audits list's item
(:class:`app.audits.schemas.AuditSummary`), and a client generator keeps only one of two schemas with one title."""


def _schema_name(cls: type) -> str:
    """The OpenAPI schema name of a record: its class name, prefixed with ``Audit`` (:data:`_NAMES` apart)."""
    if cls.__name__ in _NAMES:
        return _NAMES[cls.__name__]
    return cls.__name__ if cls.__name__.startswith("Audit") else f"Audit{cls.__name__}"


def _annotation(tp: Any) -> Any:
    """The pydantic annotation for a result field's type (dataclasses become their models)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return Union[tuple(_annotation(a) for a in typing.get_args(tp))]  # noqa: UP007 (built at run time)
    if origin is list:
        (item,) = typing.get_args(tp)
        return list[_annotation(item)]  # type: ignore[misc]
    if origin is dict:
        k, v = typing.get_args(tp)
        return dict[k, _annotation(v)]  # type: ignore[misc, valid-type]
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return model_for(tp)
    return tp


def model_for(cls: type) -> type[BaseModel]:
    """The response model of the result dataclass ``cls`` (built once)."""
    if cls in _MODELS:
        return _MODELS[cls]
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == EXTRA:
            continue
        doc = f.metadata.get("doc", "")
        if f.metadata.get("optional"):
            doc += " (absent when not applicable)"
        alias = None if json_name(f) == f.name else json_name(f)
        fields[f.name] = (_annotation(hints[f.name]) | None, Field(default=None, description=doc, alias=alias))
    model = create_model(_schema_name(cls), __base__=StoredModel, __doc__=cls.__doc__, **fields)
    _MODELS[cls] = model
    return model


def lenient(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A wrap validator: the typed model when the stored document fits, else the document as stored (an audit stored
    by an older version is served, never a 500)."""
    try:
        return handler(value)
    except ValidationError:
        return value
