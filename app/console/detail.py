"""What a finished audit's console page shows under its verdict: the per-group rates, the most harmful and helpful
training nodes by the user's ids, the profile's rules, each debiasing budget with its check against chance, and the
self-check; plain text the template prints (and escapes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bind_core.reporting import budget_text, fmt, said

TOP_SHOWN = 5
RULES_SHOWN = 3


def _pct(value: Any) -> str:
    return "—" if not isinstance(value, int | float) else f"{100 * value:.1f}"


def audit_sections(results: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The sections of a finished audit's page (``None`` without results)."""
    if not results:
        return None
    graph = results.get("graph") or {}
    labels = list(graph.get("group_labels") or graph.get("group_names") or [])
    return {
        "ids": graph.get("node_id_meaning") or "as in the graph",
        "groups": [_group(g) for g in (results.get("metrics") or {}).get("groups") or []],
        "harmful": [_node(r, labels) for r in (results.get("top_harmful") or [])[:TOP_SHOWN]],
        "helpful": [_node(r, labels) for r in (results.get("top_helpful") or [])[:TOP_SHOWN]],
        "rules": _rules(results.get("profile")),
        "debiasing": [_budget(row) for row in results.get("debiasing") or []],
        "self_check": _self_check(results.get("validation")),
        "warnings": [str(w) for w in results.get("warnings") or []],
        "edges": _edges(results.get("edges"), labels),
    }


def _group(g: Mapping[str, Any]) -> list[str]:
    included = "yes" if g.get("included", True) else f"no: {g.get('excluded_reason') or 'too small'}"
    rates = (_pct(g.get("positive_rate")), _pct(g.get("tpr")), _pct(g.get("accuracy")))
    return [str(g.get("name", g.get("group"))), fmt(g.get("size")), *rates, included]


def _node(row: Mapping[str, Any], labels: Sequence[str]) -> list[str]:
    group = row.get("group")
    name = labels[group] if isinstance(group, int) and 0 <= group < len(labels) else fmt(group)
    return [fmt(row.get("node_id")), name, fmt(row.get("label")), fmt(row.get("delta"), 4)]


def _rules(profile: Mapping[str, Any] | None) -> list[str]:
    if not profile:
        return []
    return [
        f"{rule['text']}: {_pct(rule['holdout'].get('harm_share'))}% of the held-out harm (p = {rule['p_value']:.2g})"
        for rule in (profile.get("rules") or [])[:RULES_SHOWN]
    ]


def _budget(row: Mapping[str, Any]) -> dict[str, Any]:
    before, after = row.get("before") or {}, row.get("after") or {}
    chance = row.get("against_random") or {}
    return {
        "budget": budget_text(float(row["budget"])) if isinstance(row.get("budget"), int | float) else "—",
        "deleted": fmt(row.get("deleted")),
        "delta_sp": f"{_pct(before.get('delta_sp'))} → {_pct(after.get('delta_sp'))}",
        "accuracy": f"{_pct(before.get('accuracy'))} → {_pct(after.get('accuracy'))}",
        "backfired": _backfired(row.get("backfired") or [], row.get("within_noise") or []),
        "chance": chance.get("verdict") or row.get("chance_rule") or "not checked (set debias_seeds)",
    }


def _backfired(rose: Sequence[str], inside: Sequence[str]) -> str:
    """The metrics a deletion raised, by their names (ΔSP, ΔEO, Γ), each rise within the test nodes' sampling noise
    marked so."""
    return ", ".join(f"{said([name])} (within noise)" if name in inside else said([name]) for name in rose)


def _self_check(validation: Mapping[str, Any] | None) -> str:
    if not validation:
        return "not run"
    pearson = validation.get("pearson")
    shown = "undefined" if pearson is None else f"Pearson {pearson:.4f}"
    return f"{shown} over {fmt(validation.get('count'))} training nodes deleted and re-optimised"


def _edges(section: Mapping[str, Any] | None, labels: Sequence[str]) -> dict[str, Any] | None:
    """The edges' attribution, when the audit ran it: counts, the cross-group edges' share of the harm, and the
    most harmful edges by their endpoints' ids (``None`` when not asked for)."""
    if not section:
        return None
    if not section.get("computed"):
        return {"reason": section.get("reason") or "not computed", "harmful": [], "line": ""}
    cross = section.get("cross_group") or {}
    line = (
        f"{fmt(section.get('edges'))} edges attributed, {fmt(section.get('affecting'))} of which change anything; "
        f"{fmt(section.get('harmful'))} harmful. Edges between groups are {_pct(cross.get('edge_share'))}% of the "
        f"edges and carry {_pct(cross.get('harm_share'))}% of the harm."
    )

    def group(code: Any) -> str:
        return labels[code] if isinstance(code, int) and 0 <= code < len(labels) else fmt(code)

    harmful = [
        [
            f"{fmt(e.get('u_id'))} – {fmt(e.get('v_id'))}",
            f"{group(e.get('u_group'))} – {group(e.get('v_group'))}",
            fmt(e.get("delta"), 4),
        ]
        for e in (section.get("top_harmful") or [])[:TOP_SHOWN]
    ]
    return {"reason": None, "harmful": harmful, "line": line}
