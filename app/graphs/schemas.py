"""Graphs as the API shows them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias

from pydantic import BaseModel, ConfigDict

from app.core.records import StoredModel, model_for
from bind_core.data.datasets import IngestSummary

if TYPE_CHECKING:
    IngestRead: TypeAlias = StoredModel
else:
    IngestRead = model_for(IngestSummary)
    """What reading a node table did (``bind_core.data.datasets.IngestSummary``)."""


class GraphSummary(BaseModel):
    """Sizes of an uploaded graph (``bind_core.Graph.summary()``)."""

    model_config = ConfigDict(extra="allow")

    nodes: int
    edges: int
    """Undirected edges, after self-loops were dropped and duplicates merged."""
    features: int
    classes: int
    groups: int
    """Sensitive groups."""
    group_sizes: list[int]
    class_sizes: list[int]
    """Labeled nodes per class."""
    unlabeled: int = 0
    """Nodes without a label: kept in the graph (they pass messages), in no split."""
    ingest: IngestRead | None = None
    """For a node table: what reading it did (columns encoded, imputed; unlabeled nodes; edges dropped; edge
    columns ignored; hints), see ``bind_core.data.datasets.IngestReport``."""
    train: int
    val: int
    test: int


class GraphRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    version: int
    """1 for the first upload of ``name``; each later upload of the same name adds the next version."""
    summary: GraphSummary
    size_bytes: int
    """Size of the stored ``.npz``."""
    created_at: datetime


class GraphPage(BaseModel):
    items: list[GraphRead]
    next_page_token: str | None = None
    """Pass as ``page_token`` for the next page; ``null`` on the last page."""
