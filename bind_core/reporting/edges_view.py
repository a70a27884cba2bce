"""The report's section "Which connections carry the bias": the audit's edge attribution
(:mod:`bind_core.influence.edge_rows`) as plain-text cells that the template escapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bind_core.reporting import edge_plots
from bind_core.reporting.page import fmt, trusted_svg
from bind_core.reporting.retraining import retraining

__all__ = ["edges_view"]


def _share(value: Any) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _rows(edges: list[Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            str(i + 1),
            f"{fmt(e['u_id'])} – {fmt(e['v_id'])}",
            f"{fmt(e['u_group'])} – {fmt(e['v_group'])}",
            "within" if e["within_group"] else "across",
            fmt(e["delta"], 4),
            fmt(e["delta_sp"], 4),
            fmt(e["delta_eo"], 4),
        ]
        for i, e in enumerate(edges)
    ]


def edges_view(edges: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The section's numbers and tables, ``{"reason": ...}`` when the audit asked for edges but could not attribute
    them, or ``None`` when it did not ask."""
    if not edges:
        return None
    if not edges.get("computed"):
        return {"reason": str(edges.get("reason") or "not computed")}
    cross = edges.get("cross_group") or {}
    undefined = cross.get("undefined") or {}
    harmful, helpful = list(edges.get("top_harmful") or []), list(edges.get("top_helpful") or [])
    return {
        "reason": None,
        "facts": [
            [
                fmt(edges.get("edges")),
                fmt(edges.get("affecting")),
                fmt(edges.get("harmful")),
                fmt(edges.get("helpful")),
                fmt(edges.get("seconds"), 2),
            ]
        ],
        "cross": [
            [
                fmt(cross.get("edges")),
                _share(cross.get("edge_share")),
                _share(cross.get("affecting_share")),
                _share(cross.get("harm_share")),
                _share(cross.get("help_share")),
                "—" if cross.get("harm_ratio") is None else fmt(cross.get("harm_ratio"), 2),
            ]
        ],
        "undefined": [f"{k}: {v}" for k, v in undefined.items()],
        "estimator": _estimator(edges),
        "harmful": _rows(harmful),
        "helpful": _rows(helpful),
        "top_svg": trusted_svg(edge_plots.top_edges_bars(harmful, helpful, ident="edges-top"))
        if harmful or helpful
        else None,
        **_shares(cross),
        "debiasing": _debiasing(edges.get("debiasing")),
        "debiasing_reason": edges.get("debiasing_reason"),
    }


def _shares(cross: Mapping[str, Any]) -> dict[str, Any]:
    """The chart of the cross-group edges' share of the edges against their share of the harm (``shares_svg``), or
    why it is not drawn (``shares_reason``: either share is null)."""
    missing = [k for k in ("edge_share", "harm_share") if cross.get(k) is None]
    if not missing:
        svg = trusted_svg(edge_plots.cross_group_shares(cross, ident="edges-shares"))
        return {"shares_svg": svg, "shares_reason": None}
    undefined = cross.get("undefined") or {}
    why = "; ".join(f"{k.replace('_', ' ')}: {undefined.get(k) or 'not given'}" for k in missing)
    return {"shares_svg": None, "shares_reason": why}


def _estimator(edges: Mapping[str, Any]) -> str | None:
    """How a multi-layer or attention model's values were obtained (``None`` for the one-layer estimate)."""
    if not edges.get("estimator"):
        return None
    return (
        f"Estimate: {edges['estimator']}. {fmt(edges.get('settled'))} edges were settled, among them every edge "
        "listed below; the other edges' values are first-order values, which rank the edges but whose size is not "
        "claimed."
    )


def _spread(part: Mapping[str, Any] | None) -> str:
    return "—" if part is None else f"{fmt(part.get('mean'), 4)} ± {fmt(part.get('std'), 4)}"


def _debiasing(found: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """ "Does deleting these edges help more than deleting any edges?": one row per edge budget
    (:func:`bind_core.debiasing.edge_debias.debias_edges`), and the caveats of the budgets whose summed estimate
    exceeds Γ."""
    if not found:
        return None
    budgets: list[Mapping[str, Any]] = list(found.get("budgets") or [])
    rows, caveats = [], []
    for r in budgets:
        budget = f"{100 * float(r['budget']):.2g}%"
        rows.append(
            [
                budget,
                f"{fmt(r['deleted'])} / {fmt(r['requested'])}",
                fmt(r.get("cross_group")),
                fmt(r.get("estimated"), 4),
                fmt(r.get("before"), 4),
                fmt(r.get("after"), 4),
                _spread(r.get("selected")),
                _spread(r.get("random")),
                fmt(r.get("yardstick"), 4),
                str(r.get("verdict") or ""),
            ]
        )
        if r.get("caveat"):
            caveats.append(f"{budget}: {r['caveat']}")
    seeds: list[int] = next((list(r["seeds"]) for r in budgets if r.get("seeds")), [])
    return {
        "svg": trusted_svg(edge_plots.edge_debiasing_bars(budgets, ident="edges-debiasing")) if budgets else None,
        "pool": fmt(found.get("pool")),
        "seeds": ", ".join(str(s) for s in seeds),
        "rows": rows,
        "caveats": caveats,
        "retraining": retraining(found.get("retrain")),
    }
