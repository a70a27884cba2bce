"""A self-contained HTML report of one audit: what a person reads to judge a GNN's bias and where it comes from.

:func:`render_report` takes the JSON of ``AuditResult.to_dict()`` (and, optionally, every training node's
influence row) and returns one HTML5 page: inline CSS, figures as inline SVG drawn on the server
(:mod:`bind_core.reporting.plots`), no script and no reference to anything outside the page, so it opens offline
and can be archived as a single file. The page is the template ``templates/report.html`` over the shared shell
(:mod:`bind_core.reporting.page`); this module only picks and formats the numbers it shows, as plain text that the
template escapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bind_core.codec import encode
from bind_core.fairness.records import Interval as MetricInterval
from bind_core.fairness.records import Intervals, Metrics, TestMetrics
from bind_core.pipeline.results import AuditResults, InfluenceRow
from bind_core.pipeline.summary import positive_class
from bind_core.reporting import plots
from bind_core.reporting.debiasing_view import DEBIAS_METRICS, debiasing_view
from bind_core.reporting.edge_check_view import edge_check_view
from bind_core.reporting.edges_view import edges_view
from bind_core.reporting.page import CSP, finite, fmt, render, trusted_svg
from bind_core.reporting.profile_view import profile_view
from bind_core.reporting.report_sections import run_view, stability_view, supplied_view, trust_view, verdict_view
from bind_core.reporting.views import (
    Card,
    GroupsView,
    Headline,
    InfluenceView,
    Refined,
    TopRow,
    normalised_words,
    typed_results,
    variant_words,
)

__all__ = ["CSP", "DEBIAS_METRICS", "HEADLINE", "TOP_ROWS", "fmt", "render_report", "typed_results"]

HEADLINE = (
    ("accuracy", "Accuracy", "utility"),
    ("auc", "ROC AUC", "utility"),
    ("f1", "F1", "utility"),
    ("delta_sp", "ΔSP", "gap in positive-prediction rates between groups"),
    ("delta_eo", "ΔEO", "gap in true-positive rates between groups"),
    ("gamma_sp", "Γ_SP", "PDD: distance between the groups' distributions of P(y=1)"),
    ("gamma_eo", "Γ_EO", "PDD on the positives only"),
    ("gamma", "Γ", "λ·Γ_SP + (1−λ)·Γ_EO, the bias that influence is measured on"),
)
TOP_ROWS = 20


def render_report(
    results: AuditResults | Mapping[str, Any],
    influence_rows: Sequence[InfluenceRow] | None = None,
    *,
    title: str = "BIND audit report",
    meta: Mapping[str, Any] | None = None,
) -> str:
    """The audit as one self-contained HTML5 page.

    Args:
        results: :class:`AuditResults`, or ``AuditResult.to_dict()`` (as stored in ``audits.results``). Missing
            blocks (no influence, no debiasing, no validation) are reported as not computed.
        influence_rows: every training node's row (``AuditResult.influence_rows()``); draws the distribution of
            influence and the top-harmful table. Without them the table falls back to ``results.top_harmful`` and
            the histogram is left out.
        title: the page's ``<title>`` and heading.
        meta: extra ``label: value`` pairs for the header (audit id, finish time...).

    Returns:
        The HTML document as a string.

    Raises:
        ResultFormatError: ``results`` is a document that does not fit the types.
    """
    typed = typed_results(results)
    return render(
        "report.html",
        title=title,
        facts=_facts(typed, meta or {}),
        warnings=list(typed.warnings),
        headline=_headline(typed.metrics),
        groups=_groups(typed),
        influence=_influence(typed, influence_rows),
        top_harmful=_top_harmful(typed, influence_rows),
        verdict=verdict_view(typed),
        ids=typed.graph.node_id_meaning or "as in the graph",
        profile=profile_view(typed.profile),
        edges=edges_view(typed.edges, typed.graph.group_labels or []),
        edge_check=edge_check_view(typed.edges),
        stability=stability_view(typed.stability),
        trust=trust_view(typed.validation),
        debiasing=debiasing_view(typed.debiasing, typed.metrics.test),
        run=run_view(typed),
        supplied=supplied_view(typed.supplied_model),
    )


def _or(value: object, missing: str = "?") -> object:
    return missing if value is None else value


def _facts(results: AuditResults, meta: Mapping[str, Any]) -> dict[str, str]:
    graph, model = results.graph, results.model
    split = f"{graph.train}/{graph.val}/{graph.test}"
    return {
        "graph": f"{graph.name}: {graph.nodes} nodes, {graph.edges} edges, "
        f"{graph.groups} groups; train/val/test {split}",
        "model": f"{_or(model.arch)}, {variant_words(model.extra, ', ')}{_or(model.layers)} layer(s), "
        f"{_or(model.hidden)} hidden, "
        f"{normalised_words(model.extra.get('norm'), ' between layers, ')}"
        f"{model.parameters} parameters",
        **{str(k): str(v) for k, v in meta.items()},
    }


def _band(ci: MetricInterval | None, level: float | None, resamples: int | None) -> str:
    """An interval for a card: its bounds, and how many resamples it rests on when some were left out."""
    if not (ci and level and finite(ci.low) and finite(ci.high)):
        return "no interval"
    band = f"{fmt(level * 100, 0)}% CI [{fmt(ci.low)}, {fmt(ci.high)}]"
    dropped = ci.dropped or 0
    if dropped and isinstance(resamples, int):
        band += f" over {fmt(resamples - dropped)} of {fmt(resamples)} resamples ({fmt(dropped)} undefined)"
    return band


def _interval(intervals: Intervals | None, key: str) -> MetricInterval | None:
    found: MetricInterval | None = getattr(intervals, key) if intervals is not None else None
    return found


def _card(test: TestMetrics, intervals: Intervals | None, key: str, name: str, what: str) -> Card:
    undefined = test.undefined or {}
    return Card(
        name=name,
        value="undefined" if key in undefined else fmt(getattr(test, key)),
        note=str(undefined[key]) if key in undefined else None,
        band=_band(
            _interval(intervals, key),
            intervals.level if intervals else None,
            intervals.resamples if intervals else None,
        ),
        what=what,
    )


def _headline(metrics: Metrics) -> Headline:
    """The metric cards and how they were got."""
    test, intervals = metrics.test, metrics.intervals
    cards = [_card(test, intervals, key, name, what) for key, name, what in HEADLINE]
    how = (
        f"Percentile bootstrap over the test nodes ({fmt(intervals.resamples)} resamples)."
        if intervals
        else "No confidence intervals were computed."
    )
    bands = [_interval(intervals, key) for key, _, _ in HEADLINE]
    if intervals and any(band is not None and not finite(band.low) for band in bands):
        how += (
            " A metric without an interval was not resampled (Γ_SP for more than two classes is an exact optimal"
            " transport between probability vectors) or undefined in every resample."
        )
    return Headline(nodes=fmt(test.nodes), cards=cards, how=how)


def _groups(results: AuditResults) -> GroupsView:
    """Each group's row, the worst pairs (with more than two groups) and the probability histograms."""
    metrics = results.metrics
    keys = ("size", "positive_rate", "tpr", "mean_probability", "accuracy")
    rows = [
        [
            fmt(g.group),
            fmt(g.name),
            *(fmt(getattr(g, k)) for k in keys),
            "yes" if g.included else f"no: {fmt(g.excluded_reason or 'below the minimum size')}",
        ]
        for g in metrics.groups
    ]
    names = {g.group: g.name for g in metrics.groups}
    positive = positive_class(results)
    svg = trusted_svg(
        plots.probability_histograms(
            encode(metrics.histograms),
            ident="probabilities",
            names={str(g): name for g, name in names.items()},
            positive=positive,
        )
    )
    return GroupsView(rows=rows, worst=_worst_pairs(metrics.test, names), svg=svg, positive=positive)


def _worst_pairs(test: TestMetrics, names: Mapping[int, str]) -> list[list[str]]:
    """The largest value over group pairs of ΔSP, ΔEO, Γ_SP, Γ_EO (shown with more than two groups)."""
    worst = test.worst_pairs
    if len(names) <= 2 or not worst:
        return []
    return [
        [label, fmt(w.value), " vs ".join(fmt(names.get(g, g)) for g in w.groups)]
        for key, label in (("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma_sp", "Γ_SP"), ("gamma_eo", "Γ_EO"))
        if (w := worst.get(key))
    ]


def _influence(results: AuditResults, rows: Sequence[InfluenceRow] | None) -> InfluenceView | None:
    """The summary of every node's ΔΓ, its histogram (with the rows) and the refinement, if any."""
    summary = results.influence_summary
    if summary is None:
        return None
    q = summary.quantiles
    quantiles = (None,) * 5 if q is None else (q.p01, q.p10, q.p50, q.p90, q.p99)
    facts = [
        [
            fmt(summary.count),
            fmt(summary.harmful),
            fmt(summary.helpful),
            fmt(summary.min, 4),
            *(fmt(v, 4) for v in quantiles),
            fmt(summary.max, 4),
            summary.solver,
        ]
    ]
    values = [r.delta for r in rows or [] if r.delta is not None]
    svg = trusted_svg(plots.influence_histogram(values, ident="influence")) if values else None
    refined = results.refinement
    refinement = (
        Refined(deletions=fmt(refined.deletions), max_iter=fmt(refined.max_iter), converged=fmt(refined.converged))
        if refined is not None
        else None
    )
    return InfluenceView(facts=facts, svg=svg, refined=refinement, undefined=summary.undefined)


def _named(names: Sequence[str], code: Any) -> str:
    return names[code] if isinstance(code, int) and 0 <= code < len(names) else fmt(code)


def _most_harmful(rows: Sequence[InfluenceRow]) -> list[InfluenceRow]:
    harmful = [(r.delta, r) for r in rows if r.delta is not None and r.delta < 0]
    return [r for _, r in sorted(harmful, key=lambda pair: (pair[0], pair[1].position))]


def _top_harmful(results: AuditResults, rows: Sequence[InfluenceRow] | None) -> list[TopRow]:
    """The most harmful training nodes, most negative ΔΓ first (from the rows, else the stored top list)."""
    top = _most_harmful(rows) if rows else list(results.top_harmful or [])
    groups, classes = results.graph.group_labels or [], results.graph.class_names or []
    return [
        TopRow(
            rank=str(i + 1),
            node_id=fmt(r.node_id),
            group=_named(groups, r.group),
            label=_named(classes, r.label),
            delta=fmt(r.delta, 4),
            delta_sp=fmt(r.delta_sp, 4),
            delta_eo=fmt(r.delta_eo, 4),
            unsettled=r.settled is False,
        )
        for i, r in enumerate(top[:TOP_ROWS])
    ]
