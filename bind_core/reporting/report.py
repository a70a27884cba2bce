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

from bind_core.reporting import plots
from bind_core.reporting.edge_check_view import edge_check_view
from bind_core.reporting.edges_view import edges_view
from bind_core.reporting.page import CSP, finite, fmt, render, trusted_svg
from bind_core.reporting.profile_view import profile_view
from bind_core.reporting.retraining import retraining

__all__ = ["CSP", "DEBIAS_METRICS", "HEADLINE", "TOP_ROWS", "fmt", "render_report"]

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
DEBIAS_METRICS = (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ"))
TOP_ROWS = 20
STABILITY_IDS = 20  # node ids shown per seed's top-k set


def render_report(
    results: Mapping[str, Any],
    influence_rows: Sequence[Mapping[str, Any]] | None = None,
    *,
    title: str = "BIND audit report",
    meta: Mapping[str, Any] | None = None,
) -> str:
    """The audit as one self-contained HTML5 page.

    Args:
        results: ``AuditResult.to_dict()`` (as stored in ``audits.results``). Missing blocks (no influence,
            no debiasing, no validation) are reported as not computed.
        influence_rows: every training node's row (``delta``, ``delta_sp``, ``delta_eo``, ``node_id``,
            ``group``, ``label``); draws the distribution of influence and the top-harmful table. Without
            them the table falls back to ``results["top_harmful"]`` and the histogram is left out.
        title: the page's ``<title>`` and heading.
        meta: extra ``label: value`` pairs for the header (audit id, finish time...).

    Returns:
        The HTML document as a string.
    """
    metrics = results.get("metrics") or {}
    return render(
        "report.html",
        title=title,
        facts=_facts(results, meta or {}),
        warnings=[str(w) for w in results.get("warnings") or []],
        headline=_headline(metrics),
        groups=_groups(metrics),
        influence=_influence(results, influence_rows),
        top_harmful=_top_harmful(results, influence_rows),
        verdict=_verdict(results),
        ids=(results.get("graph") or {}).get("node_id_meaning") or "as in the graph",
        profile=profile_view(results.get("profile")),
        edges=edges_view(results.get("edges")),
        edge_check=edge_check_view(results.get("edges")),
        stability=_stability(results.get("stability")),
        trust=_trust(results.get("validation")),
        debiasing=_debiasing(results.get("debiasing")),
        run=_run(results),
        supplied=_supplied(results.get("supplied_model")),
    )


def _facts(results: Mapping[str, Any], meta: Mapping[str, Any]) -> dict[str, str]:
    graph, model = results.get("graph") or {}, results.get("model") or {}
    split = f"{graph.get('train')}/{graph.get('val')}/{graph.get('test')}"
    return {
        "graph": f"{graph.get('name', '?')}: {graph.get('nodes', '?')} nodes, {graph.get('edges', '?')} edges, "
        f"{graph.get('groups', '?')} groups; train/val/test {split}",
        "model": f"{model.get('arch', '?')}, {model.get('layers', '?')} layer(s), {model.get('hidden', '?')} hidden, "
        f"{model.get('parameters', '?')} parameters",
        **{str(k): str(v) for k, v in meta.items()},
    }


def _band(ci: Any, level: Any, resamples: Any) -> str:
    """An interval for a card: its bounds, and how many resamples it rests on when some were left out."""
    if not (ci and level and finite(ci.get("low")) and finite(ci.get("high"))):
        return "no interval"
    band = f"{fmt(level * 100, 0)}% CI [{fmt(ci['low'])}, {fmt(ci['high'])}]"
    dropped = ci.get("dropped") or 0
    if dropped and isinstance(resamples, int):
        band += f" over {fmt(resamples - dropped)} of {fmt(resamples)} resamples ({fmt(dropped)} undefined)"
    return band


def _headline(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The metric cards (``name``, ``value``, ``note`` when undefined, ``band``, ``what``) and how they were got."""
    test, intervals = metrics.get("test") or {}, metrics.get("intervals") or {}
    level, undefined = intervals.get("level"), test.get("undefined") or {}
    cards = [
        {
            "name": name,
            "value": "undefined" if key in undefined else fmt(test[key]),
            "note": str(undefined[key]) if key in undefined else None,
            "band": _band(intervals.get(key), level, intervals.get("resamples")),
            "what": what,
        }
        for key, name, what in HEADLINE
        if key in test
    ]
    how = (
        f"Percentile bootstrap over the test nodes ({fmt(intervals.get('resamples'))} resamples)."
        if intervals
        else "No confidence intervals were computed."
    )
    if intervals and any(isinstance(v, Mapping) and not finite(v.get("low")) for v in intervals.values()):
        how += (
            " A metric without an interval was not resampled (Γ_SP for more than two classes is an exact optimal"
            " transport between probability vectors) or undefined in every resample."
        )
    return {"nodes": fmt(test.get("nodes")), "cards": cards, "how": how}


def _groups(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Each group's row, the worst pairs (with more than two groups) and the probability histograms."""
    groups, histograms = metrics.get("groups") or [], metrics.get("histograms")
    keys = ("size", "positive_rate", "tpr", "mean_probability", "accuracy")
    rows = [
        [
            fmt(g.get("group")),
            fmt(g.get("name", "")),
            *(fmt(g.get(k)) for k in keys),
            "yes" if g.get("included", True) else f"no: {fmt(g.get('excluded_reason') or 'below the minimum size')}",
        ]
        for g in groups
    ]
    svg = trusted_svg(plots.probability_histograms(histograms, ident="probabilities")) if histograms else None
    names = {g.get("group"): g.get("name", g.get("group")) for g in groups}
    return {"rows": rows, "worst": _worst_pairs(metrics, names), "svg": svg}


def _worst_pairs(metrics: Mapping[str, Any], names: Mapping[Any, Any]) -> list[list[str]]:
    """The largest value over group pairs of ΔSP, ΔEO, Γ_SP, Γ_EO (shown with more than two groups)."""
    worst = (metrics.get("test") or {}).get("worst_pairs") or {}
    if len(names) <= 2 or not worst:
        return []
    return [
        [label, fmt(w.get("value")), " vs ".join(fmt(names.get(g, g)) for g in w.get("groups", []))]
        for key, label in (("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma_sp", "Γ_SP"), ("gamma_eo", "Γ_EO"))
        if (w := worst.get(key))
    ]


def _influence(results: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The summary of every node's ΔΓ, its histogram (with the rows) and the refinement, if any."""
    summary = results.get("influence_summary")
    if not summary:
        return None
    q = summary.get("quantiles") or {}
    facts = [
        [
            fmt(summary.get("count")),
            fmt(summary.get("harmful")),
            fmt(summary.get("helpful")),
            fmt(summary.get("min"), 4),
            *(fmt(q.get(k), 4) for k in ("p01", "p10", "p50", "p90", "p99")),
            fmt(summary.get("max"), 4),
            str(summary.get("solver", "?")),
        ]
    ]
    svg = trusted_svg(plots.influence_histogram([float(r["delta"]) for r in rows], ident="influence")) if rows else None
    refined = results.get("refinement")
    refinement = {k: fmt(refined.get(k)) for k in ("deletions", "max_iter", "converged")} if refined else None
    return {"facts": facts, "svg": svg, "refined": refinement}


def _top_harmful(results: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] | None) -> list[dict[str, str]]:
    """The most harmful training nodes, most negative ΔΓ first (from the rows, else the stored top list)."""
    if rows:
        top = sorted((r for r in rows if r["delta"] < 0), key=lambda r: (r["delta"], r.get("position", 0)))
    else:
        top = list(results.get("top_harmful") or [])
    graph = results.get("graph") or {}
    groups, classes = graph.get("group_labels") or [], graph.get("class_names") or []

    def named(names: Sequence[str], code: Any) -> str:
        return names[code] if isinstance(code, int) and 0 <= code < len(names) else fmt(code)

    return [
        {
            "rank": str(i + 1),
            "node_id": fmt(r.get("node_id")),
            "group": named(groups, r.get("group")),
            "label": named(classes, r.get("label")),
            "delta": fmt(r.get("delta"), 4),
            "delta_sp": fmt(r.get("delta_sp"), 4),
            "delta_eo": fmt(r.get("delta_eo"), 4),
        }
        for i, r in enumerate(top[:TOP_ROWS])
    ]


def _verdict(results: Mapping[str, Any]) -> dict[str, Any] | None:
    """The summary's verdict and findings (``results["summary"]``; absent in audits from before it was written)."""
    summary = results.get("summary")
    if not summary:
        return None
    lines = str(summary.get("text", "")).splitlines()
    graph = results.get("graph") or {}
    return {
        "headline": str(summary.get("verdict", "")),
        "findings": lines[1:],
        "ids": graph.get("node_id_meaning") or "as in the graph",
    }


def _stability(stability: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The overlap of the top-k harmful sets across training seeds: numbers, the sets and a pairwise grid."""
    if not stability or not stability.get("seeds"):
        return None
    everywhere = stability.get("all") or {}
    pairs = [
        [
            " vs ".join(str(s) for s in p.get("seeds", [])),
            fmt(p.get("intersection")),
            fmt(p.get("union")),
            fmt(p.get("jaccard")),
        ]
        for p in stability.get("pairwise") or []
    ]
    pairs.append(
        ["all seeds", fmt(everywhere.get("intersection")), fmt(everywhere.get("union")), fmt(everywhere.get("jaccard"))]
    )
    sets = stability.get("sets") or {}
    members = []
    for seed in stability["seeds"]:
        ids = list(sets.get(str(seed)) or [])
        shown = ", ".join(fmt(i) for i in ids[:STABILITY_IDS]) + (
            f", … ({len(ids)} in all)" if len(ids) > STABILITY_IDS else ""
        )
        members.append([str(seed), shown or "none harmful"])
    return {
        "k": fmt(stability.get("k")),
        "seeds": [str(s) for s in stability["seeds"]],
        "intersection": fmt(everywhere.get("intersection")),
        "union": fmt(everywhere.get("union")),
        "jaccard": fmt(everywhere.get("jaccard")),
        "mean_jaccard": fmt(stability.get("mean_pairwise_jaccard")),
        "pairs": pairs,
        "members": members,
        "svg": trusted_svg(plots.stability_heatmap(stability, ident="stability")),
    }


def _trust(validation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Estimated against actual ΔΓ on the sampled nodes: correlations and the scatter."""
    if not validation or not validation.get("points"):
        return None
    corr = validation.get("correlations") or {}
    names = (("gamma", "ΔΓ"), ("gamma_sp", "ΔΓ_SP"), ("gamma_eo", "ΔΓ_EO"))
    rows = [[n, fmt(corr[k].get("pearson")), fmt(corr[k].get("spearman"))] for k, n in names if k in corr]
    scatter = plots.validation_scatter(
        validation["points"], validation.get("pearson"), validation.get("spearman"), ident="trust"
    )
    return {
        "count": fmt(validation.get("count")),
        "mode": str(validation.get("mode", "")),
        "rows": rows,
        "svg": trusted_svg(scatter),
    }


def _backfire(row: Mapping[str, Any]) -> str:
    """``the deletion backfired: it raised ΔSP (0.169 → 0.266)``, for each bias metric that rose."""
    names = dict(DEBIAS_METRICS)
    rose = [f"{names.get(k, k)} ({fmt(row['before'].get(k))} → {fmt(row['after'].get(k))})" for k in row["backfired"]]
    return "the deletion backfired: it raised " + ", ".join(rose)


def _debiasing(runs: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """Each budget's deletion, before and after, the bars, and the comparison with random deletion."""
    if not runs:
        return None
    head = ["budget", "deleted", "estimated ΔΓ"] + [f"{n} before → after" for _, n in DEBIAS_METRICS]
    rows = [
        [_budget(r.get("budget")), fmt(r.get("deleted")), fmt(r.get("estimated_delta"), 4)]
        + [f"{fmt(r['before'].get(k))} → {fmt(r['after'].get(k))}" for k, _ in DEBIAS_METRICS]
        for r in runs
    ]
    svg = trusted_svg(plots.debiasing_bars(runs, DEBIAS_METRICS, ident="debiasing"))
    kind = runs[0].get("retrain")
    how = retraining(kind)
    if how is not None:
        how += (
            "; before is the unchanged graph retrained the same way with the model's seed"
            if kind == "adam"
            else "; before is the audited model"
        )
    caveats = [f"{_budget(r.get('budget'))}: {r['caveat']}" for r in runs if r.get("caveat")]
    caveats += [f"{_budget(r.get('budget'))}: {_backfire(r)}" for r in runs if r.get("backfired")]
    return {"head": head, "rows": rows, "svg": svg, "chance": _chance(runs), "retraining": how, "caveats": caveats}


def _chance(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """ "Does deleting these nodes help more than deleting any nodes?" (``against_random`` of each budget)."""
    checked = [r for r in runs if r.get("against_random") and r["against_random"].get("selected")]
    if not checked:
        return None
    rows = []
    for r in checked:
        c = r["against_random"]
        sel, rnd = c["selected"], c["random"]
        rows.append(
            [
                _budget(r.get("budget")),
                f"{fmt(sel['mean'], 4)} ± {fmt(sel['std'], 4)}",
                f"{fmt(rnd['mean'], 4)} ± {fmt(rnd['std'], 4)}",
                fmt(c.get("yardstick"), 4),
                "yes" if c.get("beats_random") else "no",
                str(c.get("verdict", "")),
            ]
        )
    seeds = ", ".join(str(s) for s in checked[0]["against_random"].get("seeds", []))
    return {"seeds": seeds, "rows": rows}


def _budget(budget: Any) -> str:
    """A budget as the audit took it: a fraction of the training set (< 1) or a count of nodes."""
    if not isinstance(budget, int | float):
        return fmt(budget)
    return f"{budget:.0%} of training nodes" if budget < 1 else f"{int(budget)} nodes"


def _run(results: Mapping[str, Any]) -> dict[str, str]:
    """The footer: the device, the time each stage took, the gradient norm at the audited weights and whether they are
    a stationary point (information: weights that are not are attributed as given)."""
    timings = results.get("timings") or {}
    stationarity = results.get("stationarity") or {}
    stationary = stationarity.get("stationary")
    return {
        "device": str(results.get("device", "?")),
        "spent": ", ".join(f"{k} {fmt(v, 2)} s" for k, v in timings.items()),
        "grad_norm": fmt(stationarity.get("grad_norm")),
        "stationary": {
            True: "a stationary point",
            "kinks": "a minimum on ReLU kinks",
            False: "not a stationary point",
        }.get(stationary, "not checked"),
    }


COMPARED = (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ"))


def _supplied(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A supplied model's section: which model the audit describes and, polished first, both side by side."""
    if not record:
        return None
    comparison = record.get("comparison") or {}
    rows = [
        [name, fmt((comparison.get("as_given") or {}).get(key)), fmt((comparison.get("polished") or {}).get(key))]
        for key, name in COMPARED
    ]
    share = comparison.get("predictions_differ")
    return {
        "polished": bool(record.get("polished_by_service")),
        "grad_norm_supplied": fmt(record.get("grad_norm_supplied")),
        "grad_norm": fmt(record.get("grad_norm")),
        "rows": rows if comparison else [],
        "differ": None if share is None else f"{fmt(100 * share, 1)}% of {comparison.get('test_nodes')}",
    }
