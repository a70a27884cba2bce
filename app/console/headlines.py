"""What the audits list shows of each finished audit, read from the stored JSON by path in one query (the listing
never loads whole results documents): the graph's name, the model (a supplied one by its name), ΔSP with its
interval, accuracy, the verdict and the trust verdict."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, Graph, SuppliedModel
from bind_core.reporting import fmt

_PATHS: dict[str, tuple[tuple[str | int, ...], str]] = {
    "verdict": (("summary", "verdict"), "string"),
    "clear": (("summary", "bias", 0, "excludes_zero"), "boolean"),
    "withheld": (("summary", "withheld"), "string"),
    "trust": (("summary", "trust", "verdict"), "string"),
    "pearson": (("validation", "pearson"), "float"),
    "delta_sp": (("metrics", "test", "delta_sp"), "float"),
    "sp_low": (("metrics", "intervals", "delta_sp", "low"), "float"),
    "sp_high": (("metrics", "intervals", "delta_sp", "high"), "float"),
    "accuracy": (("metrics", "test", "accuracy"), "float"),
    "registered_on": (("supplied_model", "carried", "registered_version"), "float"),
}


def _path(column: Any, path: tuple[str | int, ...], kind: str) -> Any:
    element = column[path]
    return {"string": element.as_string, "boolean": element.as_boolean, "float": element.as_float}[kind]()


def headlines(session: Session, audits: Sequence[Audit]) -> dict[uuid.UUID, dict[str, Any]]:
    """For each of ``audits`` (already the tenant's): the graph's name, the model and the headline figures, as text
    the template prints; figures of an unfinished audit, or of one stored before the summary, are ``—``."""
    if not audits:
        return {}
    columns = [_path(Audit.results, path, kind).label(key) for key, (path, kind) in _PATHS.items()]
    arch = _path(Audit.config, ("model", "arch"), "string").label("arch")
    layers = _path(Audit.config, ("model", "layers"), "float").label("layers")
    stmt = (
        select(Audit.id, Graph.name, SuppliedModel.name.label("model_name"), arch, layers, *columns)
        .outerjoin(Graph, Graph.id == Audit.graph_id)
        .outerjoin(SuppliedModel, SuppliedModel.id == Audit.model_id)
        .where(Audit.id.in_([a.id for a in audits]))
    )
    return {row.id: _shown(row._mapping) for row in session.execute(stmt)}


def _shown(row: Any) -> dict[str, Any]:
    interval = "" if row["sp_low"] is None else f" [{100 * row['sp_low']:.1f}, {100 * row['sp_high']:.1f}]"
    verdict = row["verdict"]
    badge = {True: "biased", False: "no clear bias"}.get(row["clear"], "see the verdict") if verdict else "—"
    if verdict and row["withheld"]:  # the verdict says why there is none: the gap as measured is no finding
        badge = "no verdict"
    return {
        "graph_name": row["name"],
        "model": _model(row),
        "delta_sp": "—" if row["delta_sp"] is None else f"{100 * row['delta_sp']:.1f}{interval}",
        "accuracy": "—" if row["accuracy"] is None else f"{100 * row['accuracy']:.1f}",
        "verdict": verdict,
        "verdict_badge": badge,
        "trust": row["trust"] or ("—" if row["pearson"] is None else f"Pearson {fmt(row['pearson'])}"),
    }


def _model(row: Any) -> str:
    """The audited model: the architecture and layers (``gcn-2``), led by the name it was registered under for a
    supplied model (``income-gcn (gcn-2)``, or ``gcn-2, supplied`` where the name is the architecture's own), and
    the version it was registered on where the audit carried its inputs over from another (``…, registered on
    v1``)."""
    if row["arch"] is None:
        return "—"
    shape = f"{row['arch']}-{int(row['layers'] or 1)}"
    name = row["model_name"]
    if name is None:
        return shape
    on = "" if row["registered_on"] is None else f", registered on v{int(row['registered_on'])}"
    return f"{shape}, supplied{on}" if name == row["arch"] else f"{name} ({shape}{on})"
