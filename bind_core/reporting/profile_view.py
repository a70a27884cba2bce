"""The report's section "What the harmful nodes have in common": the audit's profile
(:mod:`bind_core.explain.profile`) as plain-text cells that the template escapes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bind_core.reporting.page import fmt

__all__ = ["FEATURE_ROWS", "profile_view"]

FEATURE_ROWS = 8
"""Feature columns shown: those whose harmful mean differs most from all training nodes'."""
SETS = (("harmful", "harmful"), ("helpful", "helpful"), ("all", "all training nodes"))


def _share(value: Any) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _set_row(label: str, s: Mapping[str, Any]) -> list[str]:
    groups = ", ".join(f"{g.get('name', g['group'])} {_share(g.get('share'))}" for g in s.get("groups") or [])
    degree, cross = s.get("degree") or {}, s.get("cross_group_share") or {}
    return [
        label,
        fmt(s.get("nodes")),
        _share(s.get("harm_share")),
        fmt(s.get("delta_mean"), 4),
        groups,
        fmt(degree.get("mean"), 2),
        fmt(cross.get("mean"), 3),
    ]


def _feature_value(stats: Mapping[str, Any] | None, kind: str) -> str:
    if not stats:
        return "—"
    return _share(stats.get("share")) if kind == "binary" else fmt(stats.get("mean"), 3)


def _feature_rows(features: list[Mapping[str, Any]]) -> list[list[str]]:
    ranked = sorted((f for f in features if f.get("difference") is not None), key=lambda f: -abs(f["difference"]))
    return [
        [
            str(f["name"]),
            "share at " + fmt(f.get("high"), 3) if f["kind"] == "binary" else "mean",
            *(_feature_value(f.get(k), f["kind"]) for k in ("harmful", "helpful", "all")),
            fmt(f["difference"], 2),
        ]
        for f in ranked[:FEATURE_ROWS]
    ]


def _rule_rows(rules: list[Mapping[str, Any]]) -> list[list[str]]:
    return [
        [
            str(r["text"]),
            fmt(r["holdout"]["support"]),
            fmt(r["holdout"]["mean_delta"], 4),
            _share(r["holdout"]["harm_share"]),
            _share(r["fit"]["harm_share"]),
            f"{r['p_value']:.2g}",
        ]
        for r in rules
    ]


def profile_view(profile: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The section's tables (sets, the most distinctive features, the rules that held) or ``None`` without a
    profile."""
    if not profile:
        return None
    sets = profile.get("sets") or {}
    search = profile.get("search") or {}
    return {
        "definition": str(profile.get("definition", "")),
        "sets": [_set_row(label, sets[key]) for key, label in SETS if key in sets],
        "features": _feature_rows(list(profile.get("features") or [])),
        "rules": _rule_rows(list(profile.get("rules") or [])),
        "none_reason": str(search.get("reason") or ""),
        "tested": fmt(search.get("tested")),
        "criterion": str(search.get("criterion", "")),
        "halves": f"{fmt(search.get('fit_nodes'))} / {fmt(search.get('holdout_nodes'))}",
    }
