"""What an attempt computes an audit with (:func:`app.audits.run.execute`): how it loads the audit's graph and how
it runs the audit. The service's engine is :data:`LIBRARY` (the stored graph or dataset, and
:func:`bind_core.run_audit`); the runner's tests pass a typed double instead of patching modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.audits.repository import Claim
from app.core.settings import Settings
from app.graphs.loading import load_graph
from bind_core import AuditConfig, Graph, TrainedModel, run_audit
from bind_core.influence.distributed import ChunkRunner
from bind_core.pipeline import Caveat
from bind_core.pipeline.results import EdgeRow, InfluenceRow


class StoredModel(Protocol):
    """The audited model as stored: safetensors bytes and its config."""

    def to_bytes(self) -> bytes: ...
    def config_dict(self) -> dict[str, Any]: ...


class Settled(Protocol):
    """Settings that say what they were (the audit's configuration, logged to MLflow)."""

    def to_dict(self) -> dict[str, Any]: ...


class AuditOutput(Protocol):
    """What an attempt stores of a computed audit (:class:`bind_core.AuditResult` is one)."""

    @property
    def model(self) -> StoredModel | None: ...
    @property
    def config(self) -> Settled: ...
    def to_dict(self) -> dict[str, Any]: ...
    def influence_rows(self) -> list[InfluenceRow]: ...
    def iter_edge_rows(self) -> Iterator[EdgeRow]: ...


class ComputeAudit(Protocol):
    """:func:`bind_core.run_audit`'s signature, as the attempt calls it."""

    def __call__(
        self,
        graph: Graph,
        config: AuditConfig | None = None,
        *,
        progress: Callable[[str, float], bool | None] | None = None,
        model: TrainedModel | None = None,
        device: str = "cpu",
        chunk_runner: ChunkRunner | None = None,
        keep: Callable[[int, TrainedModel], None] | None = None,
        deletion_threads: int = 1,
        on_warnings: Callable[[list[Caveat]], None] | None = None,
    ) -> AuditOutput: ...


class LoadGraph(Protocol):
    """The audit's graph: a stored graph version or a built-in dataset (:func:`app.graphs.loading.load_graph`)."""

    def __call__(self, sessions: sessionmaker[Session], settings: Settings, claim: Claim) -> Graph: ...


def _load_claimed(sessions: sessionmaker[Session], settings: Settings, claim: Claim) -> Graph:
    return load_graph(sessions, settings, claim.graph_id, claim.dataset)


@dataclass(frozen=True)
class Engine:
    """How an attempt loads and computes an audit."""

    load: LoadGraph
    compute: ComputeAudit


LIBRARY = Engine(load=_load_claimed, compute=run_audit)
"""The service's engine: the stored graph or dataset, and :func:`bind_core.run_audit`."""
