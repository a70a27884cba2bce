"""The report's section "What the harmful nodes have in common": the audit's profile
(:mod:`bind_core.explain.profile`) as plain-text cells that the template escapes."""

from __future__ import annotations

from dataclasses import dataclass

from bind_core.explain.records import FeatureProfile, FeatureStats, NodeProfile, ProfileRule, ProfileSet
from bind_core.reporting.page import fmt
from bind_core.reporting.views import Table

__all__ = ["FEATURE_ROWS", "ProfileView", "profile_view", "units_text"]

FEATURE_ROWS = 8
"""Feature columns shown: those whose harmful mean differs most from all training nodes'."""
SETS = (("harmful", "harmful"), ("helpful", "helpful"), ("all", "all training nodes"))


@dataclass(frozen=True, kw_only=True)
class ProfileView:
    """The section's tables (sets, the most distinctive features, the rules that held) and how they were found."""

    definition: str
    units: str
    sets: Table
    features: Table
    rules: Table
    none_reason: str
    tested: str
    criterion: str
    halves: str


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _set_row(label: str, s: ProfileSet) -> list[str]:
    groups = ", ".join(f"{g.name} {_share(g.share)}" for g in s.groups)
    return [
        label,
        fmt(s.nodes),
        _share(s.harm_share),
        fmt(s.delta_mean, 4),
        groups,
        fmt(s.degree.mean if s.degree else None, 2),
        fmt(s.cross_group_share.mean if s.cross_group_share else None, 3),
    ]


def _feature_value(stats: FeatureStats | None, kind: str) -> str:
    if stats is None:
        return "—"
    return _share(stats.share) if kind == "binary" else fmt(stats.mean, 3)


def _statistic(f: FeatureProfile) -> tuple[str, str]:
    """The row's feature and statistic: a binary column by the value it stands for (``region=south``, share), else
    by its name (share at its higher value, or mean)."""
    if f.kind != "binary":
        return f.name, "mean"
    if f.level is not None:
        return f.level, "share"
    return f.name, "share at " + ("—" if f.high is None else f"{f.high:.6g}")


def units_text(units: str | None) -> str:
    """What the features' numbers are in, for people (``NodeProfile.feature_units``)."""
    if units == "table":
        return (
            "Feature values and thresholds are in the node table's own units (the scaling applied when it was read is "
            "undone)."
        )
    if units == "as given":
        return "Feature values and thresholds are the graph's values as given (it records no scaling to undo)."
    return (
        "Feature values and thresholds are as the model saw them (this audit was stored before they were given in the "
        "table's units)."
    )


def _feature_rows(features: list[FeatureProfile]) -> Table:
    ranked = sorted(((f, f.difference) for f in features if f.difference is not None), key=lambda pair: -abs(pair[1]))
    return [
        [
            *_statistic(f),
            *(_feature_value(stats, f.kind) for stats in (f.harmful, f.helpful, f.all)),
            fmt(difference, 2),
        ]
        for f, difference in ranked[:FEATURE_ROWS]
    ]


def _rule_rows(rules: list[ProfileRule]) -> Table:
    return [
        [
            r.text,
            fmt(r.holdout.support),
            fmt(r.holdout.mean_delta, 4),
            _share(r.holdout.harm_share),
            _share(r.fit.harm_share),
            f"{r.p_value:.2g}",
        ]
        for r in rules
    ]


def profile_view(profile: NodeProfile | None) -> ProfileView | None:
    """The section "What the harmful nodes have in common".

    Args:
        profile: the audit's profile of the harmful nodes (``None`` without influence, or in older audits).

    Returns:
        The section's tables, or ``None`` without a profile.
    """
    if profile is None:
        return None
    sets, search = profile.sets, profile.search
    return ProfileView(
        definition=profile.definition,
        units=units_text(profile.feature_units),
        sets=[_set_row(label, getattr(sets, key)) for key, label in SETS],
        features=_feature_rows(profile.features),
        rules=_rule_rows(profile.rules),
        none_reason=search.reason or "",
        tested=fmt(search.tested),
        criterion=search.criterion,
        halves=f"{fmt(search.fit_nodes)} / {fmt(search.holdout_nodes)}",
    )
