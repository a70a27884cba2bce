"""An audit as plain text (what ``bind-audit run`` prints): the verdict first, then the numbers behind it, every
group by its name and every node by the user's id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bind_core.codec import decode, encode
from bind_core.data.carry_words import CarryWords
from bind_core.debiasing.debias import BIAS_NAMES
from bind_core.debiasing.records import DebiasingRow, RetrainRecipe
from bind_core.explain.summary import edge_lines, profile_lines
from bind_core.fairness.records import Intervals, Metrics, MetricValues
from bind_core.influence.records import InfluenceSummary
from bind_core.pipeline.audit import AuditResult
from bind_core.pipeline.caveats import METRIC_NAMES
from bind_core.pipeline.results import AuditResults, InfluenceRow, SuppliedModel
from bind_core.reporting.retraining import recipe_text
from bind_core.reporting.views import normalised_words, variant_words
from bind_core.training.records import Stationarity

__all__ = ["render", "render_supplied"]

_TEST_KEYS = ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")
_AFTER_KEYS = ("accuracy", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo")


def _pct(v: float | None) -> str:
    return "   –  " if v is None else f"{100 * v:6.2f}"


def render(result: AuditResult, *, top: int = 10) -> str:
    """A plain-text report of an audit, the verdict first.

    Args:
        result: the audit.
        top: how many of the most harmful and most helpful nodes (and edges) to list.

    Returns:
        The report, lines joined by newlines.
    """
    r = result.typed()
    lines = _verdict_lines(r)
    lines += ["", *_graph_lines(r), *_metric_lines(r.metrics), *_group_lines(r.metrics, r.graph.class_names or [])]
    if r.influence_summary is not None:
        lines += _influence_lines(r, r.influence_summary, top)
        if r.profile is not None:
            lines += profile_lines(encode(r.profile))
        if r.edges is not None:
            lines += edge_lines(encode(r.edges), result.edge_rows(), top=top, names=r.graph.group_labels or [])
        ref = r.refinement
        if ref is not None:
            lines.append(
                f"  refined: {ref.deletions} deletions re-optimised (up to {ref.max_iter} steps; "
                f"{ref.converged} converged), {_seconds(ref.seconds)} s"
            )
    if r.debiasing:
        lines += _debiasing_lines(r.debiasing, r.metrics.test)
    lines += _check_lines(r)
    if r.warnings:
        lines += ["", *(f"warning: {w}" for w in r.warnings)]
    lines += ["", "seconds: " + ", ".join(f"{k} {s:.2f}" for k, s in r.timings.items())]
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "None" if value is None else f"{value:.1f}"


def _value(values: MetricValues, key: str) -> float | None:
    found: float | None = getattr(values, key)
    return found


def _verdict_lines(r: AuditResults) -> list[str]:
    if r.summary is None:
        return []
    return ["VERDICT", *(f"  {line}" for line in r.summary.text.splitlines())]


def _graph_lines(r: AuditResults) -> list[str]:
    g, model = r.graph, r.model
    sensitive = " & ".join(g.sensitive or ["sens"])
    labels = g.group_labels or g.group_names
    sizes = ", ".join(f"{name} {size}" for name, size in zip(labels, g.group_sizes, strict=False))
    return [
        f"graph {g.name}: {g.nodes} nodes, {g.edges} edges, {g.features} features; train/val/test "
        f"{g.train}/{g.val}/{g.test}",
        f"  sensitive attribute {sensitive}: {g.groups} groups ({sizes} nodes); label {g.label or 'y'}",
        f"  node ids: {g.node_id_meaning or 'as in the graph'}",
        f"model {model.arch} ({variant_words(model.extra, ', ')}{model.layers} layer(s), "
        f"{normalised_words(model.extra.get('norm'), ', ')}{model.parameters} parameters); "
        + _stationarity_line(r.stationarity),
    ]


def _interval_lines(ci: Intervals) -> list[str]:
    bands = [getattr(ci, k) for k in _TEST_KEYS]
    level = f"{round(100 * ci.level)}%"
    return [
        f"  {level} lower".ljust(16) + " ".join(_pct(b.low if b else None) for b in bands),
        f"  {level} upper".ljust(16) + " ".join(_pct(b.high if b else None) for b in bands),
        "  resamples used".ljust(16) + " ".join(f"{ci.resamples - (b.dropped if b else 0):6d}" for b in bands),
        "  (bounds of the percentile bootstrap interval over the test nodes)",
    ]


def _metric_lines(m: Metrics) -> list[str]:
    t = m.test
    lines = [
        "",
        "test metrics (%)   acc    AUC     F1    ΔSP    ΔEO   Γ_SP   Γ_EO",
        "  value         " + " ".join(_pct(_value(t, k)) for k in _TEST_KEYS),
    ]
    if m.intervals:
        lines += _interval_lines(m.intervals)
    for key, reason in (t.undefined or {}).items():
        lines.append(f"  {METRIC_NAMES.get(key, key)} undefined (–): {reason}")
    return lines


def _group_lines(m: Metrics, classes: list[str]) -> list[str]:
    """The per-group rates (with more than two ``classes``, of the last, which the header names), then the worst
    pairs (more than two groups) and the groups kept out."""
    lines = ["", "per group (%)".ljust(28) + "test nodes  pred. positive    TPR    acc"]
    if len(classes) > 2:
        lines[-1] += f"   (rates of class {classes[-1]!r}; the verdict compares every class)"
    for g in m.groups:
        lines.append(f"  {g.name[:26]:<26} {g.size:>8}        {_pct(g.positive_rate)} {_pct(g.tpr)} {_pct(g.accuracy)}")
    names = {g.group: g.name for g in m.groups}
    worst = m.test.worst_pairs
    if len(names) > 2 and worst:
        for key, label in (("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma_sp", "Γ_SP"), ("gamma_eo", "Γ_EO")):
            w = worst.get(key)
            if w:
                a, b = w.groups
                lines.append(f"worst pair {label:<5} {100 * w.value:6.2f}  ({names.get(a, a)} vs {names.get(b, b)})")
    out = [g for g in m.groups if not g.included]
    if out:
        lines.append("kept out (below the minimum group size): " + ", ".join(f"{g.name} ({g.size})" for g in out))
    return lines


def _influence_lines(r: AuditResults, inf: InfluenceSummary, top: int) -> list[str]:
    labels = r.graph.group_labels or r.graph.group_names

    def node(row: InfluenceRow) -> str:
        group = labels[row.group] if row.group < len(labels) else row.group
        mark = "†" if row.settled is False else ""
        return f"{row.node_id} ({group}, ΔΓ {row.delta:+.2e}{mark})"

    listed = (r.top_harmful or [])[:top] + (r.top_helpful or [])[:top]
    lines = [
        "",
        f"influence (ΔΓ if the training node were deleted; negative = harmful): {inf.harmful} harmful, "
        f"{inf.helpful} helpful of {inf.count}; solver {inf.solver}",
        "  most harmful, by node id: " + ", ".join(node(row) for row in (r.top_harmful or [])[:top]),
        "  most helpful, by node id: " + ", ".join(node(row) for row in (r.top_helpful or [])[:top]),
    ]
    if inf.undefined:
        lines.append(
            f"  {inf.undefined} of {inf.count} have no ΔΓ: their deletion has no minimum near the given weights "
            "(retraining without them carries the weights away); their rows say no_minimum"
        )
    if any(row.settled is False for row in listed):
        lines.append("  † its steps did not settle: the value is where they stopped, approximate")
    return lines


def _debiasing_lines(rows: list[DebiasingRow], audited: MetricValues) -> list[str]:
    lines = ["", "debiasing (%)        deleted   acc    ΔSP    ΔEO   Γ_SP   Γ_EO"]
    first = rows[0]
    if first.retrain == "adam":
        lines.append("  retrained with Adam alone (no polish); before: the unchanged graph retrained so")
    if first.recipe:
        lines.append("  " + _recipe_line(first.recipe))
    if first.retrain != "adam" and not first.before.same_figures(audited):
        lines.append("  before: the whole graph retrained the same way, another model than the audited one (above)")
    lines.append("  before                   " + " ".join(_pct(_value(first.before, k)) for k in _AFTER_KEYS))
    for row in rows:
        flag = "  BACKFIRED" if row.clear_rises() else "  rose, within noise" if row.backfired else ""
        lines.append(
            f"  budget {row.budget:<8} {row.deleted:>6}   "
            + " ".join(_pct(_value(row.after, k)) for k in _AFTER_KEYS)
            + flag
        )
    lines += _backfires(rows)
    lines += [line for row in rows if (line := _change_line(row))]
    for row in rows:
        if row.against_random:
            lines.append(f"  budget {row.budget} against chance: {row.against_random.verdict}")
    if first.chance_rule:
        lines.append(f"  {first.chance_rule}")
    elif not any(row.against_random for row in rows):
        lines.append(
            "  against chance: not checked, so retraining noise cannot be told from an effect "
            "(--debias-seeds 1,10,100 checks it)"
        )
    return lines


def _change_line(row: DebiasingRow) -> str:
    """A budget's change in points with its paired interval over resampled test nodes (``*``: clear of 0); empty
    without one."""
    change = row.change
    if change is None:
        return ""
    parts = []
    for key, name in (("accuracy", "acc"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ")):
        band = getattr(change, key)
        if band is None or band.estimate is None or band.low is None or band.high is None:
            continue
        clear = "*" if band.clear_of_zero() else ""
        parts.append(f"{name} {100 * band.estimate:+.1f} [{100 * band.low:+.1f}, {100 * band.high:+.1f}]{clear}")
    if not parts:
        return ""
    return (
        f"  budget {row.budget} change (points, {change.level:.0%} over resampled test nodes; * clear of 0): "
        + "  ".join(parts)
    )


def _check_lines(r: AuditResults) -> list[str]:
    lines: list[str] = []
    v = r.validation
    if v is not None:
        truth = "proximal Bregman response" if v.mode == "proximal" else "re-optimised model"
        lines += [
            "",
            f"self-check on {v.count} random training nodes (estimate vs {truth}): "
            f"Pearson {v.pearson:.4f}, Spearman {_four(v.spearman)}"
            if v.pearson is not None
            else f"self-check on {v.count} nodes: correlation undefined",
        ]
        gone = v.undefined_truth
        if gone:
            lines.append(f"  {gone.count} of them without a ground truth, left out: {gone.reason}")
    st = r.stability
    if st:
        lines += [
            "",
            f"top-{st.k} harmful set across seeds {', '.join(map(str, st.seeds))}: Jaccard "
            f"{st.all.jaccard:.2f} over all ({st.all.intersection} in every set), "
            f"mean pairwise {st.mean_pairwise_jaccard:.2f}",
        ]
    return lines


def _four(value: float | None) -> str:
    return "None" if value is None else f"{value:.4f}"


def _stationarity_line(record: Stationarity) -> str:
    """How stationary the audited weights are, in a few words."""
    norm = record.grad_norm
    shown = "gradient norm " + ("–" if norm is None else f"{norm:.2e}")
    state = record.stationary
    if state is False:
        return f"{shown}: not a stationary point, audited as given (estimates: the proximal Bregman response)"
    if state == "kinks":
        return f"{shown}: a minimum on ReLU kinks"
    return shown + ("" if state is None else ": a stationary point")


def _backfires(rows: list[DebiasingRow]) -> list[str]:
    """A line per budget whose deletion raised a bias metric (``backfired``), with the metric before and after: a
    backfire where the rise is clear of the test nodes' sampling noise (or there is no interval to tell), a rise
    within the noise where its change's interval reaches 0."""
    lines = []
    for row in rows:
        clear, inside = row.clear_rises(), row.within_noise or []
        if clear:
            lines.append(f"  budget {row.budget} BACKFIRED: the deletion raised {_rises(row, clear)} (%)")
        if inside:
            lines.append(
                f"  budget {row.budget}: {_rises(row, inside)} (%) rose within the test nodes' sampling noise (the "
                "change's interval reaches 0, below): not a clear backfire"
            )
    return lines


def _rises(row: DebiasingRow, names: list[str]) -> str:
    """``ΔSP 6.50 → 7.10`` for each of ``names``."""
    return ", ".join(
        f"{BIAS_NAMES[k]} {_pct(_value(row.before, k)).strip()} → {_pct(_value(row.after, k)).strip()}" for k in names
    )


def _recipe_line(recipe: RetrainRecipe) -> str:
    """The debiasing's retraining recipe in a line."""
    return f"retrained from scratch: {recipe_text(recipe)}"


def render_supplied(record: SuppliedModel | Mapping[str, Any]) -> str:
    """What was done to a supplied model before its audit, in a few lines.

    Args:
        record: the supplied model's record (:class:`~bind_core.pipeline.results.SuppliedModel`, or its JSON).

    Returns:
        The lines, joined by newlines.
    """
    typed = record if isinstance(record, SuppliedModel) else decode(SuppliedModel, dict(record), "supplied_model")
    lines = ["supplied model:"]
    if typed.pyg is not None:
        pyg = typed.pyg
        lines.append(
            f"  read from a PyG {pyg.cls}: largest relative logit difference "
            f"{_exp(pyg.max_logit_difference, 1)} on {pyg.nodes} nodes"
        )
    if typed.classes is not None:
        lines.append(f"  outputs read as the config's classes {', '.join(typed.classes)} (output 0 first)")
    if typed.outputs is not None:
        match = typed.outputs
        lines.append(
            f"  the outputs given for {match.nodes} nodes reproduced (read as {match.reading}, largest difference "
            f"{_exp(match.max_difference, 1)}): the audit reads the model as its owner runs it"
        )
    fit, order = typed.training_fit, typed.output_order
    inverted = order is not None and order.below_chance  # the output order explains a poor fit: its warning says so
    if fit is not None and fit.suspect and not inverted:  # first, where a reader looks: the figures may mislead
        than, against = fit.baseline()
        lines.append(
            f"  CHECK ITS INPUTS: on its own training nodes it does no better than {than} (mean cross-entropy "
            f"{_shown_loss(fit.loss)} against {_shown_loss(against)}); if it fit them when trained, it is fed "
            "other inputs here"
            + (
                f", or {CarryWords.of(typed.carried.trained_on).here_graph} differs from the data it fit"
                if typed.carried is not None
                else ""
            )
            + " (the warnings say more)"
        )
    if typed.carried is not None:
        lines.append(f"  {typed.carried.text}")
    if not typed.polished_by_service:
        lines.append(f"  audited as given (gradient norm of its training objective {_exp(typed.grad_norm, 2)})")
        return "\n".join(lines)
    lines.append(
        f"  audited polished (--reference polished): gradient norm {_exp(typed.grad_norm_supplied, 2)} as given -> "
        f"{_exp(typed.grad_norm, 2)}"
    )
    comparison = typed.comparison
    if comparison:
        lines.append(f"  {'':<10} {'as given':>10} {'polished':>10}")
        for key, name in (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ")):
            given, polished = _value(comparison.as_given, key), _value(comparison.polished, key)
            lines.append(f"  {name:<10} {_shown(given):>10} {_shown(polished):>10}")
        share = comparison.predictions_differ
        if share is not None:
            lines.append(f"  test predictions that differ: {100 * share:.1f}% of {comparison.test_nodes}")
    return "\n".join(lines)


def _shown_loss(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _exp(value: float | None, digits: int) -> str:
    return "None" if value is None else f"{value:.{digits}e}"


def _shown(value: Any) -> str:
    """A metric for the side-by-side table (null: "—")."""
    return "—" if value is None else f"{float(value):.4f}"
