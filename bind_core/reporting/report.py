"""A self-contained HTML report of one audit: what a person reads to judge a GNN's bias and where it comes from.

:func:`render_report` takes the JSON of ``AuditResult.to_dict()`` (and, optionally, every training node's
influence row) and returns one HTML5 page: inline CSS, figures as inline SVG drawn on the server
(:mod:`bind_core.reporting.plots`), no script and no reference to anything outside the page, so it opens offline
and can be archived as a single file (the page shell: :mod:`bind_core.reporting.page`). Every string taken from the
data is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from bind_core.reporting import plots
from bind_core.reporting.page import CSP, card, figure, finite, fmt, header, page, table

__all__ = ["CSP", "DEBIAS_METRICS", "HEADLINE", "SIGN_TEXT", "TOP_ROWS", "fmt", "render_report"]

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
SIGN_TEXT = (
    "Influence is the estimated change in bias if one training node were deleted and the model retrained: "
    "<b>ΔΓ = Γ(retrained without the node) − Γ(now)</b>. A <b class=harm>negative</b> ΔΓ means deleting the node "
    "reduces bias: the node is <b class=harm>harmful</b>. A <b class=help>positive</b> ΔΓ means the node helps "
    "fairness. ΔΓ_SP and ΔΓ_EO are the same change for Γ_SP and Γ_EO. Estimates come from an influence function "
    "(BIND, Dong et al., AAAI 2023), not from retraining; the trust check below compares them with retraining."
)


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
    parts = [
        _header(results, title, meta or {}),
        f"<p class=note>{SIGN_TEXT}</p>",
        _warnings(results.get("warnings") or []),
        _headline(metrics),
        _groups(metrics),
        _influence(results, influence_rows),
        _top_harmful(results, influence_rows),
        _stability(results.get("stability")),
        _trust(results.get("validation")),
        _debiasing(results.get("debiasing")),
        _footer(results),
    ]
    return page(title, parts)


def _header(results: Mapping[str, Any], title: str, meta: Mapping[str, Any]) -> str:
    graph, model = results.get("graph") or {}, results.get("model") or {}
    split = f"{graph.get('train')}/{graph.get('val')}/{graph.get('test')}"
    facts = {
        "graph": f"{graph.get('name', '?')}: {graph.get('nodes', '?')} nodes, {graph.get('edges', '?')} edges, "
        f"{graph.get('groups', '?')} groups; train/val/test {split}",
        "model": f"{model.get('arch', '?')}, {model.get('layers', '?')} layer(s), {model.get('hidden', '?')} hidden, "
        f"{model.get('parameters', '?')} parameters",
        **meta,
    }
    return header(title, facts)


def _warnings(warnings: Sequence[Any]) -> str:
    if not warnings:
        return ""
    items = "".join(f"<div class=warn>⚠ {escape(str(w))}</div>" for w in warnings)
    return f'<section id="warnings"><h2>Warnings</h2>{items}</section>'


def _band(ci: Any, level: Any, resamples: Any) -> str:
    """An interval for a card: its bounds, and how many resamples it rests on when some were left out."""
    if not (ci and level and finite(ci.get("low")) and finite(ci.get("high"))):
        return "no interval"
    band = f"{fmt(level * 100, 0)}% CI [{fmt(ci['low'])}, {fmt(ci['high'])}]"
    dropped = ci.get("dropped") or 0
    if dropped and isinstance(resamples, int):
        band += f" over {fmt(resamples - dropped)} of {fmt(resamples)} resamples ({fmt(dropped)} undefined)"
    return band


def _headline(metrics: Mapping[str, Any]) -> str:
    test, intervals = metrics.get("test") or {}, metrics.get("intervals") or {}
    level, undefined = intervals.get("level"), test.get("undefined") or {}
    cards = []
    for key, name, what in HEADLINE:
        if key not in test:
            continue
        value = f"undefined<div class=d>{escape(str(undefined[key]))}</div>" if key in undefined else fmt(test[key])
        cards.append(card(name, value, _band(intervals.get(key), level, intervals.get("resamples")), what))
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
    return (
        f'<section id="metrics"><h2>Fairness and utility on {fmt(test.get("nodes"))} test nodes</h2>'
        f"<div class=cards>{''.join(cards)}</div><p class=meta>{how}</p></section>"
    )


def _groups(metrics: Mapping[str, Any]) -> str:
    groups, histograms = metrics.get("groups") or [], metrics.get("histograms")
    head = ["group", "name", "test nodes", "positive rate", "TPR", "mean P(y=1)", "accuracy", "in metrics"]
    keys = ("size", "positive_rate", "tpr", "mean_probability", "accuracy")
    rows = [
        [fmt(g.get("group")), fmt(g.get("name", "")), *(fmt(g.get(k)) for k in keys),
         "yes" if g.get("included", True) else f"no: {fmt(g.get('excluded_reason') or 'below the minimum size')}"]
        for g in groups
    ]  # fmt: skip
    drawn = (
        figure(
            plots.probability_histograms(histograms, ident="probabilities"),
            "Each group's distribution of predicted P(y=1) on the test nodes. Γ_SP (left) and Γ_EO (right) are "
            "the Wasserstein-1 distances between these distributions: the further apart, the more biased.",
        )
        if histograms
        else "<p>No histograms in this audit.</p>"
    )
    worst = _worst_pairs(metrics, {g.get("group"): g.get("name", g.get("group")) for g in groups})
    return f'<section id="groups"><h2>Per group</h2>{table(head, rows, 2)}{worst}{drawn}</section>'


def _worst_pairs(metrics: Mapping[str, Any], names: Mapping[Any, Any]) -> str:
    """The largest value over group pairs of ΔSP, ΔEO, Γ_SP, Γ_EO (shown with more than two groups)."""
    worst = (metrics.get("test") or {}).get("worst_pairs") or {}
    if len(names) <= 2 or not worst:
        return ""
    rows = [
        [label, fmt(w.get("value")), " vs ".join(fmt(names.get(g, g)) for g in w.get("groups", []))]
        for key, label in (("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma_sp", "Γ_SP"), ("gamma_eo", "Γ_EO"))
        if (w := worst.get(key))
    ]
    return "<h3>Worst pair of groups</h3>" + table(["metric", "value", "pair"], rows, 1)


def _influence(results: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] | None) -> str:
    summary = results.get("influence_summary")
    if not summary:
        return '<section id="influence"><h2>Influence of training nodes</h2><p>Not computed.</p></section>'
    q = summary.get("quantiles") or {}
    facts = [
        [fmt(summary.get("count")), fmt(summary.get("harmful")), fmt(summary.get("helpful")),
         fmt(summary.get("min"), 4), *(fmt(q.get(k), 4) for k in ("p01", "p10", "p50", "p90", "p99")),
         fmt(summary.get("max"), 4), escape(str(summary.get("solver", "?")))]
    ]  # fmt: skip
    head = ["nodes", "harmful", "helpful", "min ΔΓ", "p1", "p10", "median", "p90", "p99", "max ΔΓ", "solver"]
    drawn = (
        figure(
            plots.influence_histogram([float(r["delta"]) for r in rows], ident="influence"),
            "Estimated ΔΓ of every training node, harmful (red) and helpful (blue) apart. The counts are on a "
            "log scale: most nodes barely matter, a few in the tails carry the bias.",
        )
        if rows
        else "<p class=meta>Per-node rows were not supplied; the distribution is summarised by its quantiles.</p>"
    )
    refined = results.get("refinement")
    note = (
        f"<p class=meta>Refined: each of {fmt(refined.get('deletions'))} deletions re-optimised approximately from "
        f"the trained weights (up to {fmt(refined.get('max_iter'))} steps; {fmt(refined.get('converged'))} "
        f"converged) instead of the one-step influence estimate.</p>"
        if refined
        else ""
    )
    return f'<section id="influence"><h2>Influence of training nodes</h2>{table(head, facts)}{note}{drawn}</section>'


def _top_harmful(results: Mapping[str, Any], rows: Sequence[Mapping[str, Any]] | None) -> str:
    if rows:
        top = sorted((r for r in rows if r["delta"] < 0), key=lambda r: (r["delta"], r.get("position", 0)))
    else:
        top = list(results.get("top_harmful") or [])
    if not top:
        return ""
    head = ["rank", "node id", "group", "label", "ΔΓ", "ΔΓ_SP", "ΔΓ_EO"]
    ranked = [
        [str(i + 1), fmt(r.get("node_id")), fmt(r.get("group")), fmt(r.get("label")),
         f"<span class=harm>{fmt(r.get('delta'), 4)}</span>", fmt(r.get("delta_sp"), 4), fmt(r.get("delta_eo"), 4)]
        for i, r in enumerate(top[:TOP_ROWS])
    ]  # fmt: skip
    return (
        f'<section id="top-harmful"><h2>Most harmful training nodes</h2><p>Deleting any one of these is estimated '
        f"to reduce bias the most (most negative ΔΓ first; group is the sensitive attribute).</p>"
        f"{table(head, ranked, 1)}</section>"
    )


STABILITY_IDS = 20  # node ids shown per seed's top-k set


def _stability(stability: Mapping[str, Any] | None) -> str:
    """The overlap of the top-k harmful sets across training seeds: numbers, the sets and a pairwise grid."""
    heading = "<h2>Stability of the ranking across training seeds</h2>"
    if not stability or not stability.get("seeds"):
        return (
            f'<section id="stability">{heading}<p>Not computed (the audit named no stability seeds; the check '
            "retrains the model once per seed).</p></section>"
        )
    k, seeds = stability.get("k"), [escape(str(s)) for s in stability["seeds"]]
    everywhere = stability.get("all") or {}
    intro = (
        f"<p>The model was trained with each of {len(seeds)} seeds ({', '.join(seeds)}) and every training node's "
        f"ΔΓ estimated again; each seed's top-{fmt(k)} harmful set holds its {fmt(k)} most negative estimates. "
        f"In every set: <b>{fmt(everywhere.get('intersection'))}</b> node(s) of {fmt(everywhere.get('union'))} "
        f"in any; Jaccard over all seeds <b>{fmt(everywhere.get('jaccard'))}</b>, mean over pairs "
        f"<b>{fmt(stability.get('mean_pairwise_jaccard'))}</b> (1: the same set from every seed).</p>"
    )
    pairs = [
        [" vs ".join(escape(str(s)) for s in p.get("seeds", [])), fmt(p.get("intersection")), fmt(p.get("union")),
         fmt(p.get("jaccard"))]
        for p in stability.get("pairwise") or []
    ]  # fmt: skip
    pairs.append(["all seeds", fmt(everywhere.get("intersection")), fmt(everywhere.get("union")),
                  fmt(everywhere.get("jaccard"))])  # fmt: skip
    sets = stability.get("sets") or {}
    members = []
    for seed in stability["seeds"]:
        ids = list(sets.get(str(seed)) or [])
        shown = ", ".join(fmt(i) for i in ids[:STABILITY_IDS]) + (
            f", … ({len(ids)} in all)" if len(ids) > STABILITY_IDS else ""
        )
        members.append([escape(str(seed)), shown or "none harmful"])
    drawn = figure(
        plots.stability_heatmap(stability, ident="stability"),
        "Each cell compares the top-k harmful sets of two training seeds: the Jaccard index |A ∩ B| / |A ∪ B| "
        "(darker is more overlap) and the number of nodes in both; the diagonal is each seed's own set. Low "
        "values mean the ranking depends on the training run, so single nodes should not be acted on alone.",
    )
    return (
        f'<section id="stability">{heading}{intro}'
        f"{table(['seeds', 'in both', 'in either', 'Jaccard'], pairs, 1)}"
        f"{table(['seed', f'top-{fmt(k)} harmful node ids, most harmful first'], members, 2)}{drawn}</section>"
    )


def _trust(validation: Mapping[str, Any] | None) -> str:
    if not validation or not validation.get("points"):
        return '<section id="trust"><h2>Trust check</h2><p>Not run (validation sample 0).</p></section>'
    corr = validation.get("correlations") or {}
    head = ["", "Pearson", "Spearman"]
    names = (("gamma", "ΔΓ"), ("gamma_sp", "ΔΓ_SP"), ("gamma_eo", "ΔΓ_EO"))
    rows = [[n, fmt(corr[k].get("pearson")), fmt(corr[k].get("spearman"))] for k, n in names if k in corr]
    scatter = plots.validation_scatter(
        validation["points"], validation.get("pearson"), validation.get("spearman"), ident="trust"
    )
    drawn = figure(
        scatter,
        "Each point is one sampled training node: its estimated ΔΓ against the ΔΓ measured by actually deleting "
        "it and re-optimising the model. Points near the dashed line mean the estimates can be trusted.",
    )
    return (
        f'<section id="trust"><h2>Trust check: estimated vs actual ΔΓ</h2><p>{fmt(validation.get("count"))} nodes '
        f"checked ({escape(str(validation.get('mode', '')))}).</p>{table(head, rows, 1)}{drawn}</section>"
    )


def _debiasing(runs: Sequence[Mapping[str, Any]] | None) -> str:
    if not runs:
        return '<section id="debiasing"><h2>Debiasing</h2><p>Not run.</p></section>'
    head = ["budget", "deleted", "estimated ΔΓ"] + [f"{n} before → after" for _, n in DEBIAS_METRICS]
    rows = [
        [_budget(r.get("budget")), fmt(r.get("deleted")), fmt(r.get("estimated_delta"), 4)]
        + [f"{fmt(r['before'].get(k))} → {fmt(r['after'].get(k))}" for k, _ in DEBIAS_METRICS]
        for r in runs
    ]
    drawn = figure(
        plots.debiasing_bars(runs, DEBIAS_METRICS, ident="debiasing"),
        "Accuracy and bias on the test nodes before debiasing and after deleting the most harmful training nodes "
        "(non-overlapping computation graphs) and retraining, per budget. Lower ΔSP, ΔEO and Γ are fairer.",
    )
    return f'<section id="debiasing"><h2>Debiasing</h2>{table(head, rows, 1)}{drawn}{_chance(runs)}</section>'


def _chance(runs: Sequence[Mapping[str, Any]]) -> str:
    """ "Does deleting these nodes help more than deleting any nodes?" (``against_random`` of each budget)."""
    title = "<h3>Does deleting these nodes help more than deleting any nodes?</h3>"
    checked = [r for r in runs if r.get("against_random") and r["against_random"].get("selected")]
    if not checked:
        return (
            f"{title}<p>Not checked: the debiasing above was not compared with deleting random nodes "
            "(set debias_seeds, e.g. [1, 10, 100]), so it cannot tell a real effect from retraining noise.</p>"
        )
    head = ["budget", "selected ΔΓ (mean ± sd)", "random ΔΓ (mean ± sd)", "noise", "beats random", "verdict"]
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
                escape(str(c.get("verdict", ""))),
            ]
        )
    seeds = ", ".join(str(s) for s in checked[0]["against_random"].get("seeds", []))
    return (
        f"{title}<p>Each set, and random sets of the same size, retrained from scratch with seeds {seeds}; ΔΓ is "
        "paired by seed with the unchanged graph. The selection beats random deletion when its mean ΔΓ is lower "
        "by more than twice the noise (the larger of Γ's spread across seeds and the random sets' spread).</p>"
        f"{table(head, rows, 1)}"
    )


def _budget(budget: Any) -> str:
    """A budget as the audit took it: a fraction of the training set (< 1) or a count of nodes."""
    if not isinstance(budget, int | float):
        return fmt(budget)
    return f"{budget:.0%} of training nodes" if budget < 1 else f"{int(budget)} nodes"


def _footer(results: Mapping[str, Any]) -> str:
    timings = results.get("timings") or {}
    stationarity = results.get("stationarity") or {}
    spent = ", ".join(f"{escape(str(k))} {fmt(v, 2)} s" for k, v in timings.items())
    return (
        f'<section id="run"><h2>Run</h2><p class=meta>Device {escape(str(results.get("device", "?")))}; {spent}. '
        f"Gradient norm at the audited weights {fmt(stationarity.get('grad_norm'))} (influence functions assume a "
        f"stationary point).</p></section>"
    )
