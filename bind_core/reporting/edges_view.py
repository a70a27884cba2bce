"""The report's section "Which connections carry the bias": the audit's edge attribution
(:mod:`bind_core.influence.edge_rows`) as plain-text cells that the template escapes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from bind_core.codec import encode
from bind_core.debiasing.edge_records import EdgeDebiasing
from bind_core.debiasing.records import EffectSpread, RandomSpread
from bind_core.fairness.records import Intervals
from bind_core.influence.edge_records import CrossGroupEdges, EdgeRow
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.reporting import edge_plots
from bind_core.reporting.debiasing_view import change_bracket
from bind_core.reporting.page import fmt, trusted_svg
from bind_core.reporting.retraining import retraining
from bind_core.reporting.views import Skipped, Table

__all__ = ["EdgeDebiasingView", "EdgesView", "edges_view"]


@dataclass(frozen=True, kw_only=True)
class EdgeDebiasingView:
    """ "Does deleting these edges help more than deleting any edges?": one row per edge budget and its caveats."""

    svg: Markup | None
    pool: str
    seeds: str
    rows: Table
    caveats: list[str]
    retraining: str | None
    noise: str | None = None
    """What the brackets after Γ are (the mean change's paired interval over the test nodes), where there are some."""


@dataclass(frozen=True, kw_only=True)
class EdgesView:
    """The section's numbers, tables and figures (``reason`` is always ``None``: see :class:`Skipped`)."""

    reason: None = None
    facts: Table
    cross: Table
    undefined: list[str]
    estimator: str | None
    harmful: Table
    helpful: Table
    top_svg: Markup | None
    shares_svg: Markup | None
    shares_reason: str | None
    debiasing: EdgeDebiasingView | None
    debiasing_reason: str | None


def _seconds(value: float | None) -> str:
    """A duration for a person: ``0.00729``, ``12.35``, ``< 0.001``; never in scientific notation."""
    if value is None:
        return "—"
    return "< 0.001" if value < 1e-3 else f"{value:.3g}" if value < 1 else f"{value:.2f}"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _rows(edges: list[EdgeRow], names: Sequence[str]) -> Table:
    return [
        [
            str(i + 1),
            f"{fmt(e.u_id)} – {fmt(e.v_id)}",
            f"{edge_plots.group_name(names, e.u_group)} – {edge_plots.group_name(names, e.v_group)}",
            "within" if e.within_group else "across",
            fmt(e.delta, 4),
            fmt(e.delta_sp, 4),
            fmt(e.delta_eo, 4),
        ]
        for i, e in enumerate(edges)
    ]


def _cross_row(cross: CrossGroupEdges | None) -> list[str]:
    if cross is None:
        return [fmt(None), *(["—"] * 5)]
    return [
        fmt(cross.edges),
        _share(cross.edge_share),
        _share(cross.affecting_share),
        _share(cross.harm_share),
        _share(cross.help_share),
        "—" if cross.harm_ratio is None else fmt(cross.harm_ratio, 2),
    ]


def edges_view(edges: EdgeAttribution | None, names: Sequence[str] = ()) -> EdgesView | Skipped | None:
    """The section "Which connections carry the bias".

    Args:
        edges: the audit's edge attribution (``None`` when the audit did not ask for edges).
        names: the groups' names by code (``graph.group_labels``), for the endpoints' groups.

    Returns:
        The section's numbers and tables, :class:`Skipped` when the audit asked for edges but could not attribute
        them, or ``None`` when it did not ask.
    """
    if edges is None:
        return None
    if not edges.computed:
        return Skipped(reason=edges.reason or "not computed")
    cross = edges.cross_group
    undefined = (cross.undefined if cross else None) or {}
    harmful, helpful = list(edges.top_harmful or []), list(edges.top_helpful or [])
    top_svg = (
        trusted_svg(
            edge_plots.top_edges_bars(
                [encode(e) for e in harmful], [encode(e) for e in helpful], ident="edges-top", names=names
            )
        )
        if harmful or helpful
        else None
    )
    shares_svg, shares_reason = _shares(cross)
    return EdgesView(
        facts=[
            [fmt(edges.edges), fmt(edges.affecting), fmt(edges.harmful), fmt(edges.helpful), _seconds(edges.seconds)]
        ],
        cross=[_cross_row(cross)],
        undefined=[f"{k}: {v}" for k, v in undefined.items()],
        estimator=_estimator(edges),
        harmful=_rows(harmful, names),
        helpful=_rows(helpful, names),
        top_svg=top_svg,
        shares_svg=shares_svg,
        shares_reason=shares_reason,
        debiasing=_debiasing(edges.debiasing),
        debiasing_reason=edges.debiasing_reason,
    )


def _shares(cross: CrossGroupEdges | None) -> tuple[Markup | None, str | None]:
    """The chart of the cross-group edges' share of the edges against their share of the harm, or why it is not
    drawn (either share is null)."""
    missing = [k for k in ("edge_share", "harm_share") if cross is None or getattr(cross, k) is None]
    if cross is not None and not missing:
        return trusted_svg(edge_plots.cross_group_shares(encode(cross), ident="edges-shares")), None
    undefined = (cross.undefined if cross else None) or {}
    return None, "; ".join(f"{k.replace('_', ' ')}: {undefined.get(k) or 'not given'}" for k in missing)


def _estimator(edges: EdgeAttribution) -> str | None:
    """How a multi-layer or attention model's values were obtained (``None`` for the one-layer estimate)."""
    if not edges.estimator:
        return None
    return (
        f"Estimate: {edges.estimator}. {fmt(edges.settled)} edges were settled, among them every edge "
        "listed below; the other edges' values are first-order values, which rank the edges but whose size is not "
        "claimed."
    )


def _spread(part: EffectSpread | RandomSpread | None) -> str:
    return "—" if part is None else f"{fmt(part.mean, 4)} ± {fmt(part.std, 4)}"


def _test_noise(change: Intervals | None) -> str:
    """What the verdict (judged on the seeds' noise) leaves out where Γ's change over the test nodes reaches 0."""
    band = None if change is None else change.gamma
    if band is None or band.clear_of_zero() is not False:
        return ""
    return "; over the test nodes its change's interval reaches 0: within their sampling noise"


def _debiasing(found: EdgeDebiasing | None) -> EdgeDebiasingView | None:
    """One row per edge budget (:func:`bind_core.debiasing.edge_debias.debias_edges`), and the caveats of the budgets
    whose summed estimate exceeds Γ."""
    if found is None:
        return None
    budgets = found.budgets
    rows, caveats = [], []
    for r in budgets:
        budget = f"{100 * float(r.budget):.2g}%"
        rows.append(
            [
                budget,
                f"{fmt(r.deleted)} / {fmt(r.requested)}",
                fmt(r.cross_group),
                fmt(r.estimated, 4),
                fmt(r.before, 4),
                fmt(r.after, 4) + change_bracket(r.change, "gamma", 4),
                _spread(r.selected),
                _spread(r.random),
                fmt(r.yardstick, 4),
                (r.verdict or "") + _test_noise(r.change),
            ]
        )
        if r.caveat:
            caveats.append(f"{budget}: {r.caveat}")
    seeds: list[int] = next((list(r.seeds) for r in budgets if r.seeds), [])
    changed = next((r.change for r in budgets if r.change is not None), None)
    return EdgeDebiasingView(
        svg=trusted_svg(edge_plots.edge_debiasing_bars([encode(r) for r in budgets], ident="edges-debiasing"))
        if budgets
        else None,
        pool=fmt(found.pool),
        seeds=", ".join(str(s) for s in seeds),
        rows=rows,
        caveats=caveats,
        retraining=retraining(found.retrain),
        noise=None
        if changed is None
        else (
            f"In brackets after Γ, the {changed.level:.0%} interval of its change (the mean over the seeds) over "
            f"{changed.resamples} resamples of the test nodes, the same nodes drawn for every model with and without "
            "the edges: one that excludes 0 is not an artefact of which nodes were tested (the seeds' own noise is "
            "the yardstick's)."
        ),
    )
