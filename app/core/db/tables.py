"""The database tables. An audit row is the truth about its job; Celery only carries its id.

Deleting a graph sets ``audits.graph_id`` to NULL (``ON DELETE SET NULL``), so finished audits keep their
results; the API refuses to delete a graph while a queued or running audit still needs it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.orm import Mapped, deferred, mapped_column

from app.core.db.base import Base, JSONType, UTCDateTime, utcnow

ROLES = ("viewer", "auditor", "admin")
"""An API key's role, each allowed what the one before it is: read; upload, start, cancel, schedule; keys,
webhooks, deletion and the trail (``app/tenants/roles.py``)."""
AUDIT_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
ACTIVE_STATES = ("queued", "running")
FINAL_STATES = ("succeeded", "failed", "cancelled")


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiKey(Base):
    """An API key, stored as the SHA-256 of the whole key; ``prefix`` narrows the lookup; ``role``: what it may do."""

    __tablename__ = "api_keys"
    __table_args__ = (CheckConstraint(f"role IN {ROLES!r}", name="role"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    key_hash: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Graph(Base):
    """An uploaded graph, stored as ``bind_core.data.datasets.save_npz`` bytes (loaded only when asked for)."""

    __tablename__ = "graphs"
    __table_args__ = (Index(None, "tenant_id", "created_at"), UniqueConstraint("tenant_id", "name", "version"))

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[int] = mapped_column(Integer, default=1)
    """1 for the first upload of ``name`` by the tenant; each later upload of the name is the next version."""
    summary: Mapped[dict[str, Any]] = mapped_column(JSONType)
    data: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Audit(Base):
    """One audit job and, once it ran, everything it produced."""

    __tablename__ = "audits"
    __table_args__ = (
        UniqueConstraint("tenant_id", "idempotency_key"),
        Index(None, "tenant_id", "created_at"),
        Index(None, "state", "heartbeat_at"),
        CheckConstraint(f"state IN {AUDIT_STATES!r}", name="state"),
        CheckConstraint("(graph_id IS NULL) OR (dataset IS NULL)", name="one_source"),
        UniqueConstraint("schedule_id", "slot_time"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    graph_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("graphs.id", ondelete="SET NULL"), index=True)
    dataset: Mapped[str | None] = mapped_column(String(100))
    model_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("supplied_models.id", ondelete="SET NULL"), index=True
    )
    """A supplied model audited instead of training one (null: the audit trains its own)."""
    graph_version: Mapped[int | None] = mapped_column(Integer)
    """The version of the graph audited (kept when the graph is deleted)."""
    schedule_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("schedules.id", ondelete="SET NULL"))
    """The schedule that started this audit; with ``slot_time``, unique: a slot never runs twice."""
    slot_time: Mapped[datetime | None] = mapped_column(UTCDateTime)
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    request_hash: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    stage: Mapped[str | None] = mapped_column(String(32))
    progress: Mapped[float] = mapped_column(Double, default=0.0)
    pace: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """The running attempt's pace (``app.audits.pace``): its stage, when it began, the fraction done, the stages
    after it and how long they took in an earlier audit of the same request; null before the first stage."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    device: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    results: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    model_weights: Mapped[bytes | None] = deferred(mapped_column(LargeBinary))
    model_config: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    warnings: Mapped[list[str] | None] = mapped_column(JSONType)
    warning_codes: Mapped[list[str] | None] = mapped_column(JSONType)
    """Each of ``warnings``' stable code, in its order (``bind_core.pipeline.WARNING_CODES``)."""
    """The warnings known so far (null: none known yet): written while the audit runs, once its model and metrics are
    in; the results' full list once it succeeded."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class InfluenceRow(Base):
    """The estimated effect on the bias Γ of deleting one training node (BIND's ΔΓ).

    Sign: ``delta = Γ(after deleting the node and retraining) − Γ(before)``; negative means the node is
    harmful (deleting it reduces bias). ``delta_sp`` and ``delta_eo`` are its ΔSP and ΔEO parts; all three are null
    where the node's deletion has no minimum near the given weights (``no_minimum``).
    """

    __tablename__ = "influence_rows"
    __table_args__ = (
        Index(None, "audit_id", "delta", "position"),
        Index(None, "audit_id", "node_index"),
    )

    audit_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_index: Mapped[int] = mapped_column(Integer)
    node_id: Mapped[int] = mapped_column(BigInteger)
    node_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The user's id where it is text (``node_id`` then holds the node's index)."""
    grp: Mapped[int] = mapped_column(Integer)
    label: Mapped[int] = mapped_column(Integer)
    delta: Mapped[float | None] = mapped_column(Double, nullable=True)
    """Null (with ``delta_sp`` and ``delta_eo``) where no value answers the question: ``no_minimum``."""
    delta_sp: Mapped[float | None] = mapped_column(Double, nullable=True)
    delta_eo: Mapped[float | None] = mapped_column(Double, nullable=True)
    settled: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    """Whether the step estimate's steps settled for the node; null for the linear estimate (and rows stored before
    it was kept)."""
    no_minimum: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    """True where the node's deletion has no minimum near the given weights (the step estimate's): its deltas are
    null. Null on every other row (and rows stored before it was kept); never false."""

    @property
    def user_id(self) -> int | str:
        """The user's id of the node: the text id, else the integer one."""
        return self.node_key if self.node_key is not None else self.node_id


class EdgeInfluenceRow(Base):
    """The estimated effect on the bias Γ of deleting one undirected edge (both directions), for an audit run with
    ``edges`` (``bind_core.influence.edges``).

    Sign as for nodes: ``delta = Γ(after deleting the edge and retraining) − Γ(before)``; negative means the edge is
    harmful. ``position`` is the edge's place in the graph's edge order (``u_index < v_index``); ``affects`` is false
    for an edge whose deletion changes no training loss and no test prediction (its ΔΓ is exactly 0).
    """

    __tablename__ = "edge_influence_rows"
    __table_args__ = (Index(None, "audit_id", "delta", "position"),)

    audit_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    u_index: Mapped[int] = mapped_column(Integer)
    v_index: Mapped[int] = mapped_column(Integer)
    u_id: Mapped[int] = mapped_column(BigInteger)
    v_id: Mapped[int] = mapped_column(BigInteger)
    u_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    """The first endpoint's id where the user's ids are text (``u_id`` then holds its index)."""
    v_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    u_grp: Mapped[int] = mapped_column(Integer)
    v_grp: Mapped[int] = mapped_column(Integer)
    within_group: Mapped[bool] = mapped_column(Boolean)
    affects: Mapped[bool] = mapped_column(Boolean)
    delta: Mapped[float] = mapped_column(Double)
    delta_sp: Mapped[float] = mapped_column(Double)
    delta_eo: Mapped[float] = mapped_column(Double)

    @property
    def u_user_id(self) -> int | str:
        """The user's id of the first endpoint."""
        return self.u_key if self.u_key is not None else self.u_id

    @property
    def v_user_id(self) -> int | str:
        """The user's id of the second endpoint."""
        return self.v_key if self.v_key is not None else self.v_id


class SuppliedModel(Base):
    """A GNN the tenant trained elsewhere, registered for one graph: safetensors weights and a JSON config.

    Checked against the graph when registered (``bind_core.training.fit.TrainedModel.from_bytes``); never a pickle.
    """

    __tablename__ = "supplied_models"
    __table_args__ = (Index(None, "tenant_id", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    graph_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("graphs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    weights: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    unknown_categories: Mapped[str] = mapped_column(String(16), default="refuse", server_default="refuse")
    """What a later version's category the model's encoder never saw becomes when it is audited there: ``refuse``
    (the audit fails naming it) or ``ignore`` (its nodes read as none of the model's categories of that column)."""
    registration: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """What the registration found reading the model on its graph (``app.supplied.fit``): ``warnings``,
    ``warning_codes``, ``fit`` and ``fit_not_checked``; null for a model registered before it was kept."""
    outputs: Mapped[bytes | None] = deferred(mapped_column(LargeBinary, nullable=True))
    """The model's own outputs on its graph as uploaded, kept where the registration could not compare them (a graph
    above the nodes it reads): the first audit on that graph compares them; null otherwise."""
    outputs_name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    """The kept outputs' file name (its suffix says how to read them)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class VersionOutputs(Base):
    """A supplied model's own outputs on one version of its graph, as the deployed model gives them there (``PUT
    /v1/models/{id}/outputs/{graph_id}``): compared with the model as an audit reads that version (its inputs carried
    over to the registration's), when uploaded where the graph is small enough, else by the first audit of the model
    on that version; ``match`` keeps what the comparison found."""

    __tablename__ = "version_outputs"
    __table_args__ = (UniqueConstraint("model_id", "graph_id"), Index(None, "model_id", "created_at"))

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("supplied_models.id", ondelete="CASCADE"))
    graph_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("graphs.id", ondelete="CASCADE"), index=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    outputs: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    outputs_name: Mapped[str] = mapped_column(String(200))
    """The file's name as uploaded (its suffix says how to read it)."""
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    match: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """What comparing them found (``bind_core.pipeline.OutputsMatch``, encoded; only a match is kept: outputs the
    model does not give are refused, or fail the audit that compares them); null until compared."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


ARTIFACT_SOURCES = ("debias", "what_if")
"""What retrained a model an audit keeps: a debiasing budget (``budget_index``) or a verified what-if
(``what_if_id``)."""


class ModelArtifact(Base):
    """A model an audit retrained, kept to take away: safetensors weights and a JSON config in the form of the
    audited model (``bind_core.pipeline.export_model``), or, over the size cap, only the config and why the
    weights were not kept (``note``)."""

    __tablename__ = "model_artifacts"
    __table_args__ = (
        Index(None, "tenant_id", "created_at"),
        CheckConstraint(f"source IN {ARTIFACT_SOURCES!r}", name="source"),
        CheckConstraint(
            "(source = 'debias' AND budget_index IS NOT NULL) OR (source = 'what_if' AND what_if_id IS NOT NULL)",
            name="source_key",
        ),
        UniqueConstraint("audit_id", "source", "budget_index"),
        UniqueConstraint("audit_id", "what_if_id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    audit_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"), index=True)
    source: Mapped[str] = mapped_column(String(16))
    budget_index: Mapped[int | None] = mapped_column(Integer)
    """The debiasing budget's place in the audit's ``budgets`` (``source = 'debias'``)."""
    what_if_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    """The verified what-if that retrained it (``source = 'what_if'``)."""
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    weights: Mapped[bytes | None] = deferred(mapped_column(LargeBinary))
    """Null when the weights were over ``BIND_MODEL_ARTIFACT_MAX_BYTES`` (``note`` says so)."""
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


SCHEDULE_STATES = ("active", "paused")


class Schedule(Base):
    """A recurring audit of a graph's latest version (by name) or of a dataset, every interval or by cron; of a
    supplied model (``model_id``) on the latest version of the graph it was registered for, or of a model each slot
    trains.

    ``next_run_at`` is the next slot; a scheduler claims a due schedule by moving it on in the transaction
    that inserts the slot's audit, and ``audits (schedule_id, slot_time)`` is unique, so a slot runs once.
    """

    __tablename__ = "schedules"
    __table_args__ = (
        Index(None, "tenant_id", "created_at"),
        Index(None, "state", "next_run_at"),
        CheckConstraint(f"state IN {SCHEDULE_STATES!r}", name="state"),
        CheckConstraint("(graph_name IS NULL) <> (dataset IS NULL)", name="one_source"),
        CheckConstraint("(interval_seconds IS NULL) <> (cron IS NULL)", name="one_timing"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    graph_name: Mapped[str | None] = mapped_column(String(200))
    dataset: Mapped[str | None] = mapped_column(String(100))
    model_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    """A supplied model each slot audits on the latest version of ``graph_name`` (the graph it was registered for);
    no foreign key, as ``graph_name`` has none: a slot after the model's deletion fails with ``model-not-found``."""
    settings: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The audit settings as requested (the body of ``POST /v1/audits`` without its source)."""
    config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The full ``bind_core.pipeline.audit.AuditConfig`` each run uses."""
    interval_seconds: Mapped[int | None] = mapped_column(Integer)
    cron: Mapped[str | None] = mapped_column(String(100))
    thresholds: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    state: Mapped[str] = mapped_column(String(16), default="active")
    next_run_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


WEBHOOK_EVENTS = ("audit.succeeded", "audit.failed", "schedule.threshold_exceeded", "audit.warned")
DELIVERY_STATES = ("pending", "succeeded", "failed")


class Webhook(Base):
    """A subscription of a URL to events. ``secret`` (``whsec_`` + base64) signs every delivery."""

    __tablename__ = "webhooks"
    __table_args__ = (Index(None, "tenant_id", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2000))
    events: Mapped[list[str]] = mapped_column(JSONType)
    warning_codes: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    """``audit.warned`` only for an audit with one of these warning codes (null: every warned audit)."""
    secret: Mapped[str] = mapped_column(String(100))
    previous_secret: Mapped[str | None] = mapped_column(String(100), nullable=True)
    """The secret a rotation replaced: it signs each delivery beside ``secret`` until ``previous_secret_expires_at``."""
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Base):
    """One event for one subscription and what became of it (the delivery log). Written in the transaction
    that finishes the audit (an outbox), sent after the commit, retried with exponential backoff."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index(None, "webhook_id", "created_at"),
        Index(None, "state", "next_attempt_at"),
        CheckConstraint(f"state IN {DELIVERY_STATES!r}", name="state"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    webhook_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType)
    state: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    response_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(500))
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


CHUNK_STATES = ("pending", "running", "done")


class InfluencePlanRecord(Base):
    """The shared half of one audit attempt's influence estimate, while its per-node chunks are computed.

    ``plan`` is ``bind_core.influence.distributed.plan.InfluencePlan.to_bytes()`` (``s = H⁻¹·∇Γ`` and the per-node loss
    derivatives); ``model_weights``/``model_config`` the model it was made for (``TrainedModel.to_bytes()``,
    ``config_dict()``), so that any worker can compute a chunk. Written by the attempt (``attempt`` is its
    fencing token) and deleted when the estimate is complete; a new attempt replaces an older one's.
    """

    __tablename__ = "influence_plans"
    __table_args__ = (UniqueConstraint("audit_id", "attempt"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    audit_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    plan: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    model_weights: Mapped[bytes] = deferred(mapped_column(LargeBinary, nullable=False))
    model_config: Mapped[dict[str, Any]] = mapped_column(JSONType)
    chunks: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class InfluenceChunkRecord(Base):
    """One chunk of a plan: the per-node terms of training positions ``start..stop-1``.

    ``pending`` → ``running`` (claimed by ``worker``, which keeps ``heartbeat_at`` fresh; a stale one may be
    claimed again) → ``done`` (``result`` holds ``InfluenceChunk.to_bytes()``; written once).
    """

    __tablename__ = "influence_chunks"
    __table_args__ = (CheckConstraint(f"status IN {CHUNK_STATES!r}", name="status"),)

    plan_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("influence_plans.id", ondelete="CASCADE"), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    start: Mapped[int] = mapped_column(Integer)
    stop: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    claims: Mapped[int] = mapped_column(Integer, default=0)
    """How often the chunk was claimed; the current claim's fencing token."""
    worker: Mapped[str | None] = mapped_column(String(200))
    """Who holds the claim (``running``) or computed the result (``done``): ``host:pid``."""
    device: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    seconds: Mapped[float | None] = mapped_column(Double)
    result: Mapped[bytes | None] = deferred(mapped_column(LargeBinary))
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


TRAIL_ACTORS = ("key", "cli", "system")
TRAIL_OUTCOMES = ("succeeded", "denied", "failed")


class TrailEvent(Base):
    """One entry of the audit trail: who did (or tried) what to which resource, and how it ended.

    Append-only: a trigger made by the migration refuses every ``UPDATE`` and ``DELETE`` (``app/trail``). No foreign
    keys, so that erasing a graph, an audit or a key leaves the trail as it was; ``target`` is a resource path
    (``/graphs/<id>``), never the resource's data.
    """

    __tablename__ = "trail_events"
    __table_args__ = (
        Index(None, "tenant_id", "created_at"),
        CheckConstraint(f"actor IN {TRAIL_ACTORS!r}", name="actor"),
        CheckConstraint(f"outcome IN {TRAIL_OUTCOMES!r}", name="outcome"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    actor: Mapped[str] = mapped_column(String(16))
    """``key`` (an API key, through the API or the console), ``cli`` (``bind-audit keys``) or ``system`` (retention)."""
    actor_key_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str | None] = mapped_column(String(300))
    request_id: Mapped[str | None] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    status: Mapped[int | None] = mapped_column(Integer)
    """The HTTP status answered (``None`` outside a request)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WhatIf(Base):
    """A what-if verification job: delete a chosen set of an audit's training nodes, retrain over seeds and measure
    the effect the what-if only estimated, against random sets of the same size (``bind_core.debiasing.verify``).

    Claimed, fenced on ``attempts``, heartbeated and swept like an audit (``app/what_ifs``).
    """

    __tablename__ = "what_ifs"
    __table_args__ = (
        Index(None, "audit_id", "created_at"),
        Index(None, "state", "heartbeat_at"),
        CheckConstraint(f"state IN {AUDIT_STATES!r}", name="state"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    audit_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("audits.id", ondelete="CASCADE"))
    chosen_by: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """How the set was chosen: ``{"nodes": n}``, ``{"top": k}`` or ``{"rule": i, "conditions": [...]}``."""
    positions: Mapped[list[int]] = mapped_column(JSONType)
    """The set, as places in the audit's training nodes (its influence rows' positions)."""
    nodes: Mapped[list[int | str]] = mapped_column(JSONType)
    """The set, in the user's ids (same order)."""
    estimate: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """The what-if's estimate: ``bind_core.debiasing.what_if.SetEstimate``'s JSON, less ``nodes``."""
    seeds: Mapped[list[int]] = mapped_column(JSONType)
    random_sets: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    progress: Mapped[float] = mapped_column(Double, default=0.0)
    pace: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    """The running attempt's pace (``app.audits.pace``): when it began and the fraction of the retrainings done."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    device: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    """When succeeded: ``bind_core.debiasing.verify.Verification``'s JSON (``bind_core.codec.encode``)."""
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    @property
    def size(self) -> int:
        """The number of deleted training nodes."""
        return len(self.positions)
