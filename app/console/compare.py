"""Two audits side by side: their metrics with intervals and differences, the overlap of their most harmful
training nodes, and the nodes whose estimates moved most (two models on one graph, two versions of a graph, or a
model before and after debiasing). Nodes are matched by the user's id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, InfluenceRow

METRICS = (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ"))
TOP_K = 20
MOVED_SHOWN = 10


def _pct(value: Any) -> str:
    return "—" if not isinstance(value, int | float) else f"{100 * value:.2f}"


def _interval(results: Mapping[str, Any], key: str) -> str:
    band = ((results.get("metrics") or {}).get("intervals") or {}).get(key) or {}
    low, high = band.get("low"), band.get("high")
    return "" if low is None or high is None else f" [{_pct(low)}, {_pct(high)}]"


def metric_rows(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[list[str]]:
    """Per metric: each audit's value with its interval, and the difference b − a (in points)."""
    ta, tb = (((r.get("metrics") or {}).get("test")) or {} for r in (a, b))
    rows = []
    for key, name in METRICS:
        va, vb = ta.get(key), tb.get(key)
        diff = vb - va if isinstance(va, int | float) and isinstance(vb, int | float) else None
        rows.append([name, _pct(va) + _interval(a, key), _pct(vb) + _interval(b, key), _pct(diff)])
    return rows


def _deltas(session: Session, audit: Audit) -> dict[str, float]:
    """The audit's estimates by the user's node id (text, so that integer and text ids compare alike)."""
    row = InfluenceRow
    stmt = select(row.node_id, row.node_key, row.delta).where(row.audit_id == audit.id)
    return {str(key if key is not None else nid): float(d) for nid, key, d in session.execute(stmt)}


def node_comparison(session: Session, a: Audit, b: Audit) -> dict[str, Any]:
    """The overlap of the two top-``TOP_K`` harmful sets (Jaccard) and the nodes in both whose ΔΓ moved most."""
    da, db = _deltas(session, a), _deltas(session, b)
    top_a = {n for n, _ in sorted(((n, d) for n, d in da.items() if d < 0), key=lambda x: x[1])[:TOP_K]}
    top_b = {n for n, _ in sorted(((n, d) for n, d in db.items() if d < 0), key=lambda x: x[1])[:TOP_K]}
    union = top_a | top_b
    shared = sorted(set(da) & set(db), key=lambda n: -abs(db[n] - da[n]))
    return {
        "k": TOP_K,
        "both": len(top_a & top_b),
        "union": len(union),
        "jaccard": f"{len(top_a & top_b) / len(union):.2f}" if union else "—",
        "in_both": sorted(top_a & top_b),
        "common_nodes": len(set(da) & set(db)),
        "moved": [[n, f"{da[n]:+.4f}", f"{db[n]:+.4f}", f"{db[n] - da[n]:+.4f}"] for n in shared[:MOVED_SHOWN]],
    }
