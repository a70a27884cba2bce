"""The profile of the harmful nodes, and the edges that carry the bias, in a few lines of text (what
``bind-audit run`` prints)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bind_core.codec import decode
from bind_core.fairness.records import Intervals
from bind_core.influence.edge_records import EdgeRow

__all__ = ["edge_lines", "profile_lines"]


def _pct(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _delta(value: Any) -> str:
    return "–" if value is None else f"{value:+.2e}"


def profile_lines(profile: Mapping[str, Any], *, top: int = 3) -> list[str]:
    """The harmful set's share of the harm and group mix, then the ``top`` rules that held on the held-out half
    (or why none is reported)."""
    sets = profile["sets"]
    harmful, every = sets["harmful"], sets["all"]
    pairs = zip(harmful["groups"], every["groups"], strict=True)
    mix = ", ".join(f"{g['name']} {_pct(g['share'])} (of all training nodes {_pct(a['share'])})" for g, a in pairs)
    lines = [
        f"what the harmful nodes have in common (harmful: the {profile['fraction']:.0%} most negative ΔΓ, all < 0):",
        f"  harmful set: {harmful['nodes']} nodes holding {_pct(harmful['harm_share'])} of the harm",
        f"  its groups: {mix}",
    ]
    lines += _feature_lines(profile)
    search = profile["search"]
    rules = profile["rules"]
    if not rules:
        lines.append(f"  no rule reported: {search['reason']} ({search['tested']} candidate(s) checked)")
        return lines
    lines.append(f"  rules that held on the held-out half ({len(rules)} of {search['tested']} candidates):")
    for rule in rules[:top]:
        held = rule["holdout"]
        lines.append(
            f"    {rule['text']}: {held['support']} held-out nodes, mean ΔΓ {_delta(held['mean_delta'])}, "
            f"{_pct(held['harm_share'])} of the held-out harm (fitted {_pct(rule['fit']['harm_share'])}; "
            f"p = {rule['p_value']:.2g})"
        )
    return lines


UNITS = {
    "table": "in the node table's own units",
    "as given": "as the graph was given them (no scaling recorded to undo)",
}


def _feature_lines(profile: Mapping[str, Any], top: int = 3) -> list[str]:
    """The ``top`` features whose harmful mean differs most from all training nodes', in the user's units: a binary
    column by the value it stands for (``region=south share 100.0%``), a number by its mean."""
    ranked = sorted(
        (f for f in profile.get("features", []) if f.get("difference") is not None),
        key=lambda f: -abs(float(f["difference"])),
    )[:top]
    if not ranked:
        return []

    def value(f: Mapping[str, Any], stats: Mapping[str, Any] | None) -> str:
        if stats is None:
            return "–"
        return _pct(stats.get("share")) if f["kind"] == "binary" else f"{stats['mean']:.4g}"

    def said(f: Mapping[str, Any]) -> str:
        if f["kind"] != "binary":
            what = f"{f['name']} mean"
        elif f.get("level"):
            what = f"{f['level']} share"
        else:
            what = f"{f['name']} share at {f['high']:.6g}"
        return f"{what} {value(f, f['harmful'])} (all training nodes {value(f, f['all'])})"

    units = UNITS.get(str(profile.get("feature_units")), "as the model saw them")
    return [f"  its most distinctive features ({units}): " + "; ".join(said(f) for f in ranked)]


def _edge(row: EdgeRow, names: Sequence[str]) -> str:
    def group(code: int) -> str:
        return names[code] if 0 <= code < len(names) else f"group {code}"

    kind = "within" if row.within_group else "across"
    groups = group(row.u_group) if row.within_group else f"{group(row.u_group)}/{group(row.v_group)}"
    return f"{row.u_id}–{row.v_id} ({kind} {groups}, {_delta(row.delta)})"


def edge_lines(
    section: Mapping[str, Any], rows: Sequence[EdgeRow], *, top: int = 10, names: Sequence[str] = ()
) -> list[str]:
    """The edge attribution in a few lines.

    Args:
        section: the results' ``edges`` section, as JSON.
        rows: every edge's row (``AuditResult.edge_rows()``), or none.
        top: how many of the most harmful and most helpful edges to list.
        names: the groups' names by code (``graph.group_labels``), for the endpoints' groups.

    Returns:
        Counts, the ``top`` most harmful and helpful edges (from ``rows`` when given, else the section's own lists)
        and the cross-group edges' share of the harm against their share of edges; or why it was not computed.
    """
    if not section.get("computed"):
        return [f"edges: not attributed: {section.get('reason')}"]
    if rows:
        harmful = sorted((r for r in rows if r.delta < 0), key=lambda r: (r.delta, r.position))[:top]
        helpful = sorted((r for r in rows if r.delta > 0), key=lambda r: (-r.delta, r.position))[:top]
    else:
        harmful = [decode(EdgeRow, r, "edges.top_harmful") for r in section["top_harmful"][:top]]
        helpful = [decode(EdgeRow, r, "edges.top_helpful") for r in section["top_helpful"][:top]]
    cross = section["cross_group"]
    return [
        f"edges (ΔΓ if the edge were deleted; negative = harmful): {section['harmful']} harmful, "
        f"{section['helpful']} helpful of {section['edges']} ({section['affecting']} change anything); "
        f"{section['seconds']:.2f} s",
        "  most harmful: " + (", ".join(_edge(r, names) for r in harmful) or "none"),
        "  most helpful: " + (", ".join(_edge(r, names) for r in helpful) or "none"),
        f"  cross-group edges: {cross['edges']} ({_pct(cross['affecting_share'])} of those that change anything) "
        f"carry {_pct(cross['harm_share'])} of the harm",
        *_edge_debiasing_lines(section),
        _edge_validation_line(section),
    ]


def _edge_validation_line(section: Mapping[str, Any]) -> str:
    """The edge self-check in one line: its correlations and noise floor, or why it did not run."""
    v = section.get("validation")
    if not v:
        return f"  edge self-check: not run: {section.get('validation_reason')}"
    head = f"  edge self-check on {v['count']} random edges (estimate vs {v['ground_truth']}): "
    gone = v.get("undefined_truth")
    left_out = "" if not gone else f"; {gone['count']} without a ground truth, left out: {gone['reason']}"
    if v["pearson"] is None:
        why = (v.get("undefined") or {}).get("pearson", "undefined")
        return head + f"correlation undefined ({why})" + left_out
    floor = "—" if v.get("noise_floor") is None else f"{v['noise_floor']:.1e}"
    return head + f"Pearson {v['pearson']:.4f}, Spearman {v['spearman']:.4f}, noise floor {floor}" + left_out


def _edge_debiasing_lines(section: Mapping[str, Any]) -> list[str]:
    """One line per edge budget with its verdict against random edges, or why the edges were not debiased."""
    found = section.get("debiasing")
    if not found:
        reason = section.get("debiasing_reason")
        return [f"  edge debiasing: not run: {reason}"] if reason else []
    lines = []
    for r in found["budgets"]:
        after = "—" if r.get("after") is None else f"{r['after']:.4f}"
        lines.append(
            f"  edge debiasing {100 * r['budget']:.2g}%: deleted {r['deleted']}/{r['requested']} edges "
            f"({r['cross_group']} cross-group), Γ {r['before']:.4f} -> {after}{_gamma_band(r.get('change'))}: "
            f"{r['verdict']}"
        )
    return lines


def _gamma_band(change: Mapping[str, Any] | None) -> str:
    """`` (change [low, high] over resampled test nodes)`` of an edge budget's Γ, where it has one, and ``: within
    their noise`` where that interval reaches 0 (the change may be an artefact of which nodes were tested)."""
    if not change:
        return ""
    typed = decode(Intervals, dict(change), "change")
    band = typed.gamma
    if band is None or band.estimate is None or band.low is None or band.high is None:
        return ""
    noise = "" if band.clear_of_zero() else ": within their noise"
    bounds = f"[{band.low:+.4f}, {band.high:+.4f}]"
    return f" (change {band.estimate:+.4f}, {typed.level:.0%} {bounds} over resampled test nodes{noise})"
