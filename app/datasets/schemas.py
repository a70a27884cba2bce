"""The built-in datasets a server offers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DatasetRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    """The name to pass as ``dataset`` in ``POST /v1/audits``."""
    title: str
    aliases: list[str]
    present: bool
    """Whether its files are under the server's data root (only present datasets can be audited)."""
    missing: list[str]


class DatasetList(BaseModel):
    items: list[DatasetRead]
