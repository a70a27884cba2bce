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


def _deltas(session: Session, audit: Audit) -> dict[str, float | None]:
    """The audit's estimates by the user's node id (text, so that integer and text ids compare alike); ``None`` for
    a node without a value (its deletion has no minimum near the weights)."""
    row = InfluenceRow
    stmt = select(row.node_id, row.node_key, row.delta).where(row.audit_id == audit.id)
    return {
        str(key if key is not None else nid): None if d is None else float(d) for nid, key, d in session.execute(stmt)
    }


def _top_harmful(deltas: Mapping[str, float | None]) -> set[str]:
    """The ``TOP_K`` most harmful nodes (ΔΓ < 0); a node without a value is never among them."""
    harmful = sorted((d, n) for n, d in deltas.items() if d is not None and d < 0)
    return {n for _, n in harmful[:TOP_K]}


def node_comparison(session: Session, a: Audit, b: Audit) -> dict[str, Any]:
    """The overlap of the two top-``TOP_K`` harmful sets (Jaccard) and the nodes in both whose ΔΓ moved most.

    A node in both audits whose ΔΓ is null in either (no value: its deletion has no minimum near that audit's
    weights) has no movement to measure: it is counted in ``undefined`` (and listed, the first
    :data:`MOVED_SHOWN` of them, in ``undefined_nodes``), never compared as a number.
    """
    da, db = _deltas(session, a), _deltas(session, b)
    top_a, top_b = _top_harmful(da), _top_harmful(db)
    union = top_a | top_b
    common = set(da) & set(db)
    undefined = sorted(n for n in common if da[n] is None or db[n] is None)
    moved: list[tuple[str, float, float]] = []
    for n in common:
        va, vb = da[n], db[n]
        if va is not None and vb is not None:
            moved.append((n, va, vb))
    moved.sort(key=lambda m: (-abs(m[2] - m[1]), m[0]))
    return {
        "k": TOP_K,
        "both": len(top_a & top_b),
        "union": len(union),
        "jaccard": f"{len(top_a & top_b) / len(union):.2f}" if union else "—",
        "in_both": sorted(top_a & top_b),
        "common_nodes": len(common),
        "moved": [[n, f"{va:+.4f}", f"{vb:+.4f}", f"{vb - va:+.4f}"] for n, va, vb in moved[:MOVED_SHOWN]],
        "undefined": len(undefined),
        "undefined_nodes": [[n, _shown(da[n]), _shown(db[n])] for n in undefined[:MOVED_SHOWN]],
    }


def _shown(delta: float | None) -> str:
    """A node's ΔΓ as the comparison shows it: signed, or ``no value`` where it has none."""
    return "no value" if delta is None else f"{delta:+.4f}"
