"""The worker's writes to an audit row. Every write after the claim is fenced on this attempt.

The claim is one conditional ``UPDATE``: it moves the ``queued`` audit whose turn it is (`app.audits.turns`), or
the message's own ``running`` audit whose heartbeat is stale (its worker died), to ``running`` and
increments ``attempts``. The new ``attempts`` value is the attempt's fencing token: later writes match
``state='running' AND attempts=<token>``, so a cancelled audit, or one another worker has since taken over,
is never overwritten.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select, update
from sqlalchemy.orm import Session

from app.audits import turns
from app.core.db.session import now, rowcount
from app.core.db.tables import Audit, EdgeInfluenceRow, InfluencePlanRecord, SuppliedModel, VersionOutputs
from app.core.db.tables import InfluenceRow as InfluenceRecord
from app.core.lease import Lease
from app.supplied.loading import confirmed_outputs, matched
from bind_core.pipeline import codes_of
from bind_core.pipeline.results import EdgeRow, InfluenceRow


@dataclass(frozen=True)
class Claim:
    """An attempt at an audit this worker now owns."""

    audit_id: uuid.UUID
    attempt: int
    graph_id: uuid.UUID | None
    dataset: str | None
    config: dict[str, Any]
    model_id: uuid.UUID | None = None
    """A supplied model to audit instead of training one."""


def claim(
    session: Session,
    audit_id: uuid.UUID,
    *,
    device: str,
    heartbeat_timeout: float,
    max_attempts: int,
    max_running: int = 0,
) -> Claim | None:
    """Take the queued audit whose turn it is (`app.audits.turns`: rotating between tenants, at most
    ``max_running`` running audits per tenant, 0 for no limit), whichever audit the message named.

    When no queued audit may start, take ``audit_id`` itself if it is ``running`` with a stale heartbeat
    (its worker died). Return ``None`` when nothing is ours to run: the message's audit is finished or
    cancelled (a redelivered message: no-op), another worker is running it with a fresh heartbeat, or its
    dead worker used up the last attempt (the sweeper fails it).
    """
    t = now()
    turns.serialize_claims(session)
    for _ in range(3):  # on SQLite another writer may take the pick first: pick again
        turn = turns.next_turn(session, max_running=max_running)
        if turn is None:
            break
        taken = _take(session, turn, Audit.state == "queued", device=device, at=t)
        if taken is not None:
            return taken
    stale = t - timedelta(seconds=heartbeat_timeout)
    dead = and_(
        Audit.state == "running",
        Audit.attempts < max_attempts,
        or_(Audit.heartbeat_at.is_(None), Audit.heartbeat_at < stale),
    )
    return _take(session, audit_id, dead, device=device, at=t)


def _take(session: Session, audit_id: uuid.UUID, condition: Any, *, device: str, at: datetime) -> Claim | None:
    """One conditional ``UPDATE ... RETURNING``: the audit becomes ``running`` with ``attempts + 1``."""
    values = dict(
        state="running",
        attempts=Audit.attempts + 1,
        device=device,
        stage=None,
        progress=0.0,
        pace=None,
        error=None,
        started_at=at,
        heartbeat_at=at,
        finished_at=None,
        updated_at=at,
    )
    row = session.execute(
        update(Audit)
        .where(Audit.id == audit_id, condition)
        .values(**values)
        .returning(Audit.attempts, Audit.graph_id, Audit.dataset, Audit.config, Audit.model_id)
    ).one_or_none()
    if row is None:
        return None
    return Claim(audit_id, row.attempts, row.graph_id, row.dataset, row.config, row.model_id)


def model_parts(session: Session, model_id: uuid.UUID) -> tuple[bytes, dict[str, Any]] | None:
    """The stored safetensors weights and config of a supplied model (``None`` if it was deleted)."""
    row = session.execute(
        select(SuppliedModel.weights, SuppliedModel.config).where(SuppliedModel.id == model_id)
    ).one_or_none()
    return None if row is None else (row.weights, row.config)


def registered_outputs(
    session: Session, model_id: uuid.UUID, graph_id: uuid.UUID | None
) -> tuple[dict[str, Any] | None, tuple[bytes, str] | None]:
    """The model's own outputs on ``graph_id`` (the audit's graph): those given for that version
    (``version_outputs``, :mod:`app.supplied.version_outputs`), else, where it is the graph the model was registered
    for, its registration's: the match found (``fit.outputs``) or else the outputs kept but not yet compared (a graph
    too large to compare them when given: bytes and file name), each ``None`` where there is none. The outputs'
    bytes are read only where they are still to be compared."""
    if graph_id is not None:
        given = session.execute(
            select(VersionOutputs.id, VersionOutputs.match, VersionOutputs.outputs_name).where(
                VersionOutputs.model_id == model_id, VersionOutputs.graph_id == graph_id
            )
        ).one_or_none()
        if given is not None:
            if (found := matched(given.match)) is not None:
                return found, None
            data = session.scalar(select(VersionOutputs.outputs).where(VersionOutputs.id == given.id))
            return None, (bytes(data), str(given.outputs_name)) if data is not None else None
    row = session.execute(
        select(
            SuppliedModel.graph_id,
            SuppliedModel.registration,
            SuppliedModel.outputs_name,
            SuppliedModel.outputs.is_not(None).label("kept"),
        ).where(SuppliedModel.id == model_id)
    ).one_or_none()
    if row is None or row.graph_id != graph_id:
        return None, None
    if (found := confirmed_outputs(row.registration)) is not None or not row.kept:
        return found, None
    data = session.scalar(select(SuppliedModel.outputs).where(SuppliedModel.id == model_id))
    return None, (bytes(data), str(row.outputs_name or "outputs")) if data is not None else None


def confirm_outputs(session: Session, model_id: uuid.UUID, graph_id: uuid.UUID | None, match: dict[str, Any]) -> None:
    """Keep the match an audit found of the model's kept outputs on ``graph_id``: with the outputs given for that
    version, else in the model's registration (``fit.outputs``), so that the registry says so and later audits take
    it as found."""
    same = (VersionOutputs.model_id == model_id, VersionOutputs.graph_id == graph_id)
    if session.execute(update(VersionOutputs).where(*same).values(match=match)).rowcount:  # type: ignore[attr-defined]
        return
    kept = session.scalar(select(SuppliedModel.registration).where(SuppliedModel.id == model_id))
    if kept is None:
        return
    fit = dict(kept.get("fit") or {}) | {"outputs": match}
    registration = {**kept, "fit": fit, "outputs_pending": False}
    session.execute(update(SuppliedModel).where(SuppliedModel.id == model_id).values(registration=registration))


def _fence(claim: Claim) -> Any:
    return and_(Audit.id == claim.audit_id, Audit.state == "running", Audit.attempts == claim.attempt)


def _lease_after_miss(session: Session, claim: Claim) -> Lease:
    """Why a fenced write missed: the audit was cancelled, or erased (``DELETE /v1/audits/{id}``, a graph's purge,
    retention: no row, so the attempt stops as if cancelled and writes nothing), or another attempt owns it."""
    state = session.scalar(select(Audit.state).where(Audit.id == claim.audit_id))
    return Lease.CANCELLED if state in ("cancelled", None) else Lease.LOST


def beat(
    session: Session,
    claim: Claim,
    stage: str | None,
    progress: float | None,
    pace: dict[str, Any] | None = None,
) -> Lease:
    """Touch ``heartbeat_at`` (and stage, progress and pace when given); say whether the audit is still ours."""
    t = now()
    values: dict[str, Any] = {"heartbeat_at": t, "updated_at": t}
    if stage is not None:
        values["stage"] = stage
    if progress is not None:
        values["progress"] = progress
    if pace is not None:
        values["pace"] = pace
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def earlier_timings(session: Session, claim: Claim) -> dict[str, Any] | None:
    """How long each stage took in the latest earlier succeeded audit of the same request (its ``request_hash``) or
    of the same schedule, as ``{"audit_id", "same", "seconds": {stage: seconds}}`` (``app.audits.pace``); None when
    there is none."""
    this = session.execute(
        select(Audit.tenant_id, Audit.request_hash, Audit.schedule_id).where(Audit.id == claim.audit_id)
    ).one_or_none()
    if this is None:
        return None
    same = Audit.request_hash == this.request_hash
    if this.schedule_id is not None:
        same = or_(same, Audit.schedule_id == this.schedule_id)
    found = session.execute(
        select(Audit.id, Audit.schedule_id, Audit.results["timings"].label("timings"))
        .where(Audit.tenant_id == this.tenant_id, Audit.state == "succeeded", Audit.id != claim.audit_id, same)
        .order_by(Audit.finished_at.desc())
        .limit(1)
    ).one_or_none()
    if found is None or not isinstance(found.timings, dict):
        return None
    seconds = {str(k): float(v) for k, v in found.timings.items() if isinstance(v, int | float)}
    kind = "schedule" if this.schedule_id is not None and found.schedule_id == this.schedule_id else "request"
    return {"audit_id": str(found.id), "same": kind, "seconds": seconds}


def stored_warnings(session: Session, claim: Claim) -> list[str] | None:
    """The warnings on the audit's row now (an earlier attempt's, or none: ``None``)."""
    return session.scalar(select(Audit.warnings).where(Audit.id == claim.audit_id))


def warn(session: Session, claim: Claim, warnings: Sequence[str]) -> Lease:
    """Store the warnings known while the audit runs (its model and metrics in: a supplied model's checks, small
    groups) and their codes, for ``GET /v1/audits/{id}`` to show before the estimate's minutes; say whether the audit
    is still ours."""
    t = now()
    values = {"warnings": [str(w) for w in warnings], "warning_codes": codes_of(warnings), "updated_at": t}
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def succeed(
    session: Session,
    claim: Claim,
    *,
    results: dict[str, Any],
    weights: bytes | None,
    model_config: dict[str, Any] | None,
    influence: Sequence[InfluenceRow],
    edges: Iterable[EdgeRow] = (),
) -> Lease:
    """Store everything an attempt produced and mark the audit ``succeeded``, in the caller's transaction.

    The fenced ``UPDATE`` goes first: on Postgres it locks the row, so a concurrent cancel waits and then
    finds the audit finished. Influence rows (of nodes and, with ``edges``, of every edge) of an earlier,
    interrupted attempt are replaced. On a miss nothing has been written, so the caller may commit either way.
    """
    t = now()
    values = dict(
        state="succeeded",
        stage=None,
        progress=1.0,
        results=results,
        warnings=results.get("warnings"),
        warning_codes=results.get("warning_codes"),
        model_weights=weights,
        model_config=model_config,
        error=None,
        finished_at=t,
        heartbeat_at=t,
        updated_at=t,
    )
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    if not hit:
        return _lease_after_miss(session, claim)
    session.execute(delete(InfluenceRecord).where(InfluenceRecord.audit_id == claim.audit_id))
    if influence:
        session.execute(insert(InfluenceRecord), [_influence_row(claim.audit_id, r) for r in influence])
    session.execute(delete(EdgeInfluenceRow).where(EdgeInfluenceRow.audit_id == claim.audit_id))
    rows = iter(edges)
    while batch := [_edge_row(claim.audit_id, r) for r in itertools.islice(rows, EDGE_BATCH)]:
        session.execute(insert(EdgeInfluenceRow), batch)
    return Lease.HELD


EDGE_BATCH = 20_000
"""Edge rows per ``INSERT``: a graph's edges can be millions; the parameter lists stay bounded."""


def _edge_row(audit_id: uuid.UUID, row: EdgeRow) -> dict[str, Any]:
    """An edge's row as an ``edge_influence_rows`` row.

    Args:
        audit_id: the audit.
        row: the edge's row (``bind_core.influence.edge_rows``).

    Returns:
        The table's columns: a text id goes to ``u_key``/``v_key``, with the endpoint's index in ``u_id``/``v_id``.
    """
    u_text, v_text = isinstance(row.u_id, str), isinstance(row.v_id, str)
    return {
        "audit_id": audit_id,
        "position": row.position,
        "u_index": row.u_index,
        "v_index": row.v_index,
        "u_id": row.u_index if u_text else row.u_id,
        "v_id": row.v_index if v_text else row.v_id,
        "u_key": row.u_id if u_text else None,
        "v_key": row.v_id if v_text else None,
        "u_grp": row.u_group,
        "v_grp": row.v_group,
        "within_group": row.within_group,
        "affects": _affects(row),
        "delta": row.delta,
        "delta_sp": row.delta_sp,
        "delta_eo": row.delta_eo,
    }


def _affects(row: EdgeRow) -> bool:
    """The row's ``affects``: every edge's row has it (only the results' top lists leave it out)."""
    if row.affects is None:
        raise ValueError(f"edge row {row.position} has no affects: not a row of bind_core.influence.edge_rows")
    return row.affects


def _influence_row(audit_id: uuid.UUID, row: InfluenceRow) -> dict[str, Any]:
    """A training node's row as an ``influence_rows`` row.

    Args:
        audit_id: the audit.
        row: the node's row (``AuditResult.influence_rows()``).

    Returns:
        The table's columns: a text id goes to ``node_key``, with the node's index in ``node_id``.
    """
    text = isinstance(row.node_id, str)
    return {
        "audit_id": audit_id,
        "position": row.position,
        "node_index": row.node_index,
        "node_id": row.node_index if text else row.node_id,
        "node_key": row.node_id if text else None,
        "grp": row.group,
        "label": row.label,
        "delta": row.delta,
        "delta_sp": row.delta_sp,
        "delta_eo": row.delta_eo,
        "settled": row.settled,
        "no_minimum": True if row.no_minimum else None,  # true or null, never false
    }


def check_influence_rows(rows: Iterable[InfluenceRow]) -> None:
    """Check that ``rows`` can be stored as they are: three finite deltas, or three nulls with ``no_minimum`` true
    (and nulls only then), so that nothing is stored as missing that has a value, and no NaN reaches
    the table (it would sort after every number and could not be served as JSON).

    Raises:
        ValueError: the first row that is neither (the worker then fails the audit instead of storing it).
    """
    for row in rows:
        deltas = (row.delta, row.delta_sp, row.delta_eo)
        if row.no_minimum is True:
            ok = all(d is None for d in deltas)
        else:
            ok = all(d is not None and math.isfinite(d) for d in deltas)
        if not ok:
            raise ValueError(
                f"influence row {row.position}: deltas {deltas} with no_minimum={row.no_minimum!r}; a row has three "
                "finite deltas, or three nulls and no_minimum true"
            )


def fail(session: Session, claim: Claim, problem: dict[str, Any]) -> Lease:
    """Mark the audit ``failed`` with ``problem`` (an RFC 9457 document) and drop what was left half-made."""
    t = now()
    values = dict(state="failed", error=problem, finished_at=t, heartbeat_at=t, updated_at=t)
    hit = rowcount(session, update(Audit).where(_fence(claim)).values(**values))
    if hit:
        discard_partial(session, claim.audit_id)
    return Lease.HELD if hit else _lease_after_miss(session, claim)


def discard_partial(session: Session, audit_id: uuid.UUID) -> None:
    """Delete an unfinished audit's partial artefacts: a distributed estimate's plan with its chunks (their
    tasks then find no plan and do nothing) and influence rows (of nodes and edges) an earlier attempt may have left."""
    session.execute(delete(InfluencePlanRecord).where(InfluencePlanRecord.audit_id == audit_id))
    session.execute(delete(InfluenceRecord).where(InfluenceRecord.audit_id == audit_id))
    session.execute(delete(EdgeInfluenceRow).where(EdgeInfluenceRow.audit_id == audit_id))


def close_cancelled(session: Session, claim: Claim) -> None:
    """Stamp ``finished_at`` on an audit cancelled while this attempt ran (if the API did not), and drop what
    was left half-made (`discard_partial`)."""
    discard_partial(session, claim.audit_id)
    t = now()
    session.execute(
        update(Audit)
        .where(Audit.id == claim.audit_id, Audit.state == "cancelled", Audit.finished_at.is_(None))
        .values(finished_at=t, updated_at=t)
    )
