"""The report's later sections (the verdict, the ranking's stability across seeds, the trust check, the supplied model
and the run's footer), built from the typed results as plain text that the template escapes."""

from __future__ import annotations

from bind_core.codec import encode
from bind_core.debiasing.records import Validation
from bind_core.fairness.records import MetricValues
from bind_core.influence.records import Stability
from bind_core.pipeline.results import AuditResults, SuppliedModel
from bind_core.reporting import plots
from bind_core.reporting.page import fmt, trusted_svg
from bind_core.reporting.views import RunView, StabilityView, SuppliedView, TrustView, VerdictView, without_truth

__all__ = ["COMPARED", "STABILITY_IDS", "run_view", "stability_view", "supplied_view", "trust_view", "verdict_view"]

STABILITY_IDS = 20  # node ids shown per seed's top-k set
COMPARED = (("accuracy", "accuracy"), ("delta_sp", "ΔSP"), ("delta_eo", "ΔEO"), ("gamma", "Γ"))
STATIONARY: dict[bool | str | None, str] = {
    True: "a stationary point",
    "kinks": "a minimum on ReLU kinks",
    False: "not a stationary point",
}


def verdict_view(results: AuditResults) -> VerdictView | None:
    """The summary's verdict and findings.

    Args:
        results: the audit's results.

    Returns:
        The verdict, or ``None`` for an audit from before the summary was written.
    """
    if results.summary is None:
        return None
    return VerdictView(
        headline=results.summary.verdict,
        findings=results.summary.text.splitlines()[1:],
        ids=results.graph.node_id_meaning or "as in the graph",
    )


def stability_view(stability: Stability | None) -> StabilityView | None:
    """The overlap of the top-k harmful sets across training seeds: numbers, the sets and a pairwise grid.

    Args:
        stability: the audit's stability check (``None`` unless it named stability seeds).

    Returns:
        The section's view, or ``None`` without seeds.
    """
    if stability is None or not stability.seeds:
        return None
    everywhere = stability.all
    pairs = [
        [" vs ".join(str(s) for s in p.seeds), fmt(p.intersection), fmt(p.union), fmt(p.jaccard)]
        for p in stability.pairwise
    ]
    pairs.append(["all seeds", fmt(everywhere.intersection), fmt(everywhere.union), fmt(everywhere.jaccard)])
    members = []
    for seed in stability.seeds:
        ids = list(stability.sets.get(str(seed)) or [])
        shown = ", ".join(fmt(i) for i in ids[:STABILITY_IDS]) + (
            f", … ({len(ids)} in all)" if len(ids) > STABILITY_IDS else ""
        )
        members.append([str(seed), shown or "none harmful"])
    return StabilityView(
        k=fmt(stability.k),
        seeds=[str(s) for s in stability.seeds],
        intersection=fmt(everywhere.intersection),
        union=fmt(everywhere.union),
        jaccard=fmt(everywhere.jaccard),
        mean_jaccard=fmt(stability.mean_pairwise_jaccard),
        pairs=pairs,
        members=members,
        svg=trusted_svg(plots.stability_heatmap(encode(stability), ident="stability")),
    )


def trust_view(validation: Validation | None) -> TrustView | None:
    """Estimated against actual ΔΓ on the sampled nodes: correlations and the scatter.

    Args:
        validation: the audit's self-check (``None`` when it did not run).

    Returns:
        The section's view, or ``None`` when no node was checked.
    """
    if validation is None or not validation.points:
        return None
    corr = validation.correlations
    names = (("gamma", "ΔΓ"), ("gamma_sp", "ΔΓ_SP"), ("gamma_eo", "ΔΓ_EO"))
    rows = [[n, fmt(corr[k].pearson), fmt(corr[k].spearman)] for k, n in names if k in corr]
    points = [encode(p) for p in validation.points]
    scatter = plots.validation_scatter(
        points, validation.pearson, validation.spearman, ident="trust", mode=validation.mode
    )
    return TrustView(
        count=fmt(validation.count),
        mode=validation.mode,
        rows=rows,
        svg=trusted_svg(scatter),
        without_truth=without_truth(validation.undefined_truth, validation.count, "nodes"),
    )


def run_view(results: AuditResults) -> RunView:
    """The footer: the device, the time each stage took, the gradient norm at the audited weights and whether they are
    a stationary point (information: weights that are not are attributed as given).

    Args:
        results: the audit's results.

    Returns:
        The footer's view.
    """
    stationarity = results.stationarity
    return RunView(
        device=results.device,
        spent=", ".join(f"{k} {fmt(v, 2)} s" for k, v in results.timings.items()),
        grad_norm=fmt(stationarity.grad_norm),
        stationary=STATIONARY.get(stationarity.stationary, "not checked"),
    )


def _metric(values: MetricValues, key: str) -> str:
    return fmt(getattr(values, key))


def supplied_view(record: SuppliedModel | None) -> SuppliedView | None:
    """A supplied model's section: which model the audit describes and, polished first, both side by side.

    Args:
        record: what the service did to a supplied model (``None`` for an audit of a model it trained).

    Returns:
        The section's view, or ``None`` without a supplied model.
    """
    if record is None:
        return None
    comparison = record.comparison
    rows = (
        [[name, _metric(comparison.as_given, key), _metric(comparison.polished, key)] for key, name in COMPARED]
        if comparison is not None
        else []
    )
    share = comparison.predictions_differ if comparison is not None else None
    return SuppliedView(
        polished=record.polished_by_service,
        grad_norm_supplied=fmt(record.grad_norm_supplied),
        grad_norm=fmt(record.grad_norm),
        rows=rows,
        differ=None if share is None else f"{fmt(100 * share, 1)}% of {comparison.test_nodes if comparison else None}",
        outputs=_outputs_line(record),
    )


def _outputs_line(record: SuppliedModel) -> str | None:
    """The owner's outputs against the model as read, in a sentence, where they were given."""
    match = record.outputs
    if match is None:
        return None
    return (
        f"Its owner's outputs on {match.nodes} nodes were given with it, and the model as read here gives them "
        f"(read as {match.reading}; largest difference of a probability {match.max_difference:.1e}, within "
        f"{match.tolerance:g}): the figures describe the model its owner runs, fed what its owner feeds it."
    )
