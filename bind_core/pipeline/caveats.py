"""Caveats a reader of an audit must see: about the graph (groups kept out, few positives), about the model (kinks
of a non-smooth activation) and about the estimates (what question they answer, nodes that did not settle, a
self-check inside its noise or too low)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.data.graph import Graph
from bind_core.data.groups import exclusion_warnings, included_groups, test_group_positives
from bind_core.data.labels import group_label
from bind_core.debiasing.records import Validation
from bind_core.fairness.records import Metrics
from bind_core.influence import InfluenceResult
from bind_core.influence.lbfgs import CHANGE
from bind_core.influence.records import Refinement
from bind_core.influence.step import FINISH_EVALUATIONS, FINISH_PATIENCE, STALL_HALVINGS, STALL_SHARE
from bind_core.influence.step_nodes import MOVED_FAR
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.caveat import Caveat, coded
from bind_core.training.records import StationarityCheck

LOW_SELF_CHECK = 0.9
"""Below this per-node Pearson correlation of the self-check, the audit warns that the estimates are rough."""


MIN_TEST_POSITIVES = 30


@dataclass(frozen=True)
class AuditContext:
    """What a diagnosis needs to fit the audit: the graph, the model's configuration and Γ's λ."""

    graph: Graph
    model: ModelConfig
    lam: float


def warnings_for(graph: Graph, min_group_size: int = 0) -> list[Caveat]:
    """Caveats a reader of the audit must see: groups kept out of the metrics (absent from the test split,
    below the minimum size, without a positive test node), groups too small for stable Γ_EO estimates, a graph
    without edges."""
    out = coded(exclusion_warnings(graph, min_group_size), "group_excluded")
    if graph.num_edges == 0:
        _add(
            out,
            "no_edges",
            "the graph has no edges: the GNN sees only each node's own features (it is an MLP), and BIND's "
            "non-i.i.d. term (a node's influence through its neighbours) is zero; check the edge list if edges "
            "were expected",
        )
    test = graph.test_idx
    y, s = graph.y[test], graph.sens[test]
    for grp in included_groups(graph, min_group_size):
        pos = int(((s == grp) & (y == 1)).sum())
        if graph.num_classes == 2 and pos < MIN_TEST_POSITIVES:
            _add(
                out,
                "few_positives",
                f"group {group_label(graph, grp)} has only {pos} positive test nodes: Γ_EO and ΔEO rest on "
                f"them, and per-node estimates of the change in Γ_EO are unreliable below about {MIN_TEST_POSITIVES}",
            )
    return out


def _add(out: list[Caveat], code: str, text: str) -> None:
    out.append(Caveat(text, code))


def scaled_inputs(graph: Graph) -> list[Caveat]:
    """For a supplied model: the caveat that the graph's features were min-max scaled when it was read
    (``Graph.feature_ranges``), so a model trained on the table's own values is audited on inputs it never saw."""
    if not graph.feature_ranges:
        return []
    texts = [
        f"the graph's {graph.num_features} feature column(s) were min-max scaled to [-1, 1] when it was read (scale "
        "on): this supplied model is audited on the scaled values. If it was trained on other values (the table's "
        "own, or scaled another way, e.g. to [0, 1] or standardised), every figure here describes its predictions "
        "on inputs it never saw; give the table the values it was trained on and read it with scale off (bind-audit "
        "run --scale off; the upload's scale=false; ingest_files(scale=False)) to audit it on its own"
    ]
    return coded(texts, "scaled_inputs")


def model_warnings(model: ModelConfig, stationarity: StationarityCheck | None = None) -> list[Caveat]:
    """What the audit does about a non-smooth model (see docs/METHOD.md, "Non-smooth activations"), weights that are
    a minimum on the kinks (``stationarity.stationary == "kinks"``) and weights that are not a stationary point
    (``False``: attributed all the same, and said so).

    Args:
        model: the model's architecture.
        stationarity: the audit's stationarity check (``None``: not made).

    Returns:
        One sentence per caveat.
    """
    out = [] if stationarity is None else _not_stationary(stationarity)
    if model.norm == "batch":  # a layer normalisation's scale and shift are fitted with the rest
        _add(
            out,
            "held_normalisation",
            "the model normalises its hidden layers (batch normalisation): the audit reads each normalisation as the "
            "deployed model runs it, in evaluation mode with its running statistics, and the attribution holds its "
            "statistics, scale and shift as given, so each ΔΓ refits the convolutions and the head around them (the "
            "convolution before a normalisation can make any change its scale and shift could, so no model is out "
            "of reach; only the distance the damping measures differs); retraining for debiasing trains them as the "
            'model\'s own training does (docs/METHOD.md, "Normalisation between layers")',
        )
    where = model.kinks()
    if not where:
        return out
    texts = [
        f"the model is not smooth ({' and '.join(where)}): its training objective is piecewise smooth, and its "
        "Hessian exists almost everywhere (wherever no pre-activation is exactly at a kink). The audit "
        "differentiates it as PyTorch does (the derivative at a kink is one side's; no curvature from the kinks): "
        "the polish, the Newton finish and the influence estimate use the Hessian of the region in which the "
        "audited weights lie, as if every unit kept its side of its kink; a deletion that moves units across "
        "is followed only by the step estimate's exact gradients and exact Γ, not by the linear estimate. The "
        "self-check's correlation shows what that costs for this model"
    ]
    out += coded(texts, "non_smooth")
    stall = None if stationarity is None else stationarity.kinks
    if stationarity is not None and stationarity.stationary == "kinks" and stall is not None:
        _add(
            out,
            "minimum_on_kinks",
            f"the weights are a minimum on the kinks, not a stationary point: the gradient PyTorch reads there "
            f"does not vanish (largest entry {stationarity.max_abs_grad:.1e}; {stall.pinned} hidden "
            "pre-activations are pinned at 0) and a restarted L-BFGS found no descent, so the audit went on; "
            "the estimates expand around a point where the objective has no Hessian in every direction",
        )
    return out


def _not_stationary(stationarity: StationarityCheck) -> list[Caveat]:
    """A note for weights that are not a stationary point of their training objective: audited as given."""
    if stationarity.stationary is not False:
        return []
    worst = stationarity.max_abs_grad
    shown = "not finite" if worst != worst else f"{worst:.1e}"
    texts = [
        f"the weights are not a stationary point of their training objective (largest gradient entry {shown}, "
        "as when training stops early): the audit describes them as given, and each influence estimate answers "
        "the proximal Bregman response at these weights (retraining without the node from them, with the other "
        'nodes\' losses measured against their current predictions; docs/METHOD.md, "The model as given"), '
        "not leave-one-out retraining to a new minimum; the self-check measures that question"
    ]
    return coded(texts, "not_stationary")


METRIC_NAMES = {
    "accuracy": "accuracy",
    "auc": "ROC-AUC",
    "f1": "F1",
    "delta_sp": "ΔSP",
    "delta_eo": "ΔEO",
    "gamma_sp": "Γ_SP",
    "gamma_eo": "Γ_EO",
    "gamma": "Γ",
}


FEW_RESAMPLES = 1000
"""Percentile bootstrap intervals from fewer resamples than this are said to be unsteady (:func:`metric_warnings`): at
95%, each end is read from fewer than 25 resamples (Efron and Tibshirani advise 1000 or more for percentile
intervals)."""


def metric_warnings(metrics: Metrics) -> list[Caveat]:
    """Test metrics that are undefined (``null``, never 0), intervals from few resamples (:data:`FEW_RESAMPLES`), and
    intervals that rest on fewer resamples than drawn, because some resamples left the metric undefined (a group drew
    none of its few positives)."""
    texts = [
        f"{METRIC_NAMES.get(k, k)} is undefined on the test nodes (reported as null, not 0): {reason}"
        for k, reason in (metrics.test.undefined or {}).items()
    ]
    out = coded(texts, "metric_undefined")
    intervals = metrics.intervals
    if intervals is None:
        return out
    resamples = intervals.resamples
    if resamples < FEW_RESAMPLES:
        tail = int(resamples * (1 - intervals.level) / 2)
        beyond = "none of them" if tail == 0 else "one of them" if tail == 1 else f"{tail} of them"
        _add(
            out,
            "few_resamples",
            f"the metrics' {intervals.level:.0%} intervals rest on {resamples} bootstrap resamples, with {beyond} "
            f"beyond each end: the ends move from one run to the next; {FEW_RESAMPLES} or more (the default) give "
            "intervals to quote",
        )
    short: dict[int, list[str]] = {}  # resamples left out → the metrics whose intervals lost that many
    for name in METRIC_NAMES:
        band = getattr(intervals, name)
        if band is not None and band.dropped and band.low is not None:
            short.setdefault(band.dropped, []).append(f"{METRIC_NAMES[name]}'s")
    for dropped, names in short.items():
        which = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        _add(
            out,
            "resamples_dropped",
            f"{which} interval{'s' if len(names) > 1 else ''} rest{'' if len(names) > 1 else 's'} on "
            f"{resamples - dropped} of {resamples} bootstrap resamples: in {dropped} "
            f"{'they were' if len(names) > 1 else 'it was'} undefined (a group lost every node it needs, such as its "
            "positives) and those resamples were left out rather than counted as 0",
        )
    return out


def estimate_warnings(
    influence: InfluenceResult | None,
    validation: Validation | None,
    refinement: Refinement | None,
    context: AuditContext | None = None,
) -> list[Caveat]:
    """What the estimates answer and how far they can be trusted: the question a step estimate answers, nodes
    whose step did not settle, a self-check inside its ground truth's noise, and a low self-check."""
    out = _question_warnings(influence)
    if validation is None:
        return out
    clear = validation.clear_of_noise
    if clear is not None and clear < 0.5:
        _add(
            out,
            "self_check_in_noise",
            f"only {clear:.0%} of the self-check's deletions moved Γ by more than twice its ground truth's own "
            f"drift ({validation.noise_floor or 0.0:.1e}): its correlation says little about them",
        )
    pearson = validation.pearson
    if pearson is None or pearson >= LOW_SELF_CHECK:
        return out
    truth = (
        "the proximal Bregman re-optimisation (retraining without the node near the given weights)"
        if validation.mode == "proximal"
        else "re-optimisation without the node"
    )
    causes = _self_check_causes(influence, validation, refinement, context)
    _add(
        out,
        "self_check_low",
        f"the self-check's per-node Pearson correlation of estimated ΔΓ with {truth} is {pearson:.2f} "
        f"(below {LOW_SELF_CHECK}): the influence estimates rank and size nodes only roughly. " + " ".join(causes),
    )
    return out


def _self_check_causes(
    influence: InfluenceResult | None,
    validation: Validation,
    refinement: Refinement | None,
    context: AuditContext | None,
) -> list[str]:
    """Why the self-check fell short, in this data and this model, and what to do about it for this model: few
    positive test nodes in a group (Γ_EO moves in jumps), deletions inside the noise, steps that did not settle, or
    a linear estimate where the model needs the step estimator. Only causes that apply are named."""
    causes: list[str] = []
    if context is not None and context.lam < 1:
        few = _few_positives(context.graph)
        if few:
            causes.append(
                f"Likely cause: {few}, so Γ_EO (weight {1 - context.lam:g} in Γ) moves in jumps as single "
                "predictions cross, which no smooth estimate follows; lam=1 (Γ_SP only) or a test split with more "
                "positives in that group gives a check that can pass."
            )
    clear = validation.clear_of_noise
    if clear is not None and clear < 0.5:
        causes.append("Most checked deletions move Γ less than the re-optimisation's own noise (see above).")
    details = {} if influence is None else influence.solve.details
    unsettled = int(details.get("unsettled") or 0) - int(details.get("no_minimum") or 0)  # those with a value
    if unsettled > 0 and details.get("method") == "step":  # refine_steps answers another question (no damping)
        where = (
            "where the steps and the L-BFGS finish stopped"
            if details.get("mixed")
            else "the lowest objective found on this model's kinks"
        )
        causes.append(f"{unsettled} nodes' steps did not settle (their values are {where}): read them as rough.")
    elif unsettled > 0:
        causes.append(
            f"{unsettled} nodes' steps did not settle; refine_steps (e.g. 300) re-optimises each deletion further."
        )
    if refinement:
        causes.append("The estimates were already refined: treat single-node values as rough.")
    elif details.get("method") != "step" and context is not None and _needs_steps(context.model):
        causes.append(
            f"For this model ({context.model.arch}, {context.model.layers} layer(s)) one Newton step may not be "
            'enough: estimator="step" answers by damped steps with Γ exact at the weights reached.'
        )
    if not causes:
        causes.append("No cause could be named from the audit's own figures; a larger validation_sample narrows it.")
    return causes


def _few_positives(graph: Graph) -> str:
    """The groups with fewer than :data:`MIN_TEST_POSITIVES` positive test nodes, in words ('' for none)."""
    if graph.num_classes != 2:
        return ""
    few = [(g, n) for g, n in enumerate(test_group_positives(graph)) if 0 < n < MIN_TEST_POSITIVES]
    return "; ".join(f"group {group_label(graph, g)} has only {n} positive test nodes" for g, n in few)


def _needs_steps(model: ModelConfig) -> bool:
    """Whether one Newton step (the linear estimate) can fall short for this model: everything but a one-layer GCN
    or SAGE (without ``normalize``), whose objective is a smooth convex function of the weights."""
    return not (model.layers == 1 and model.arch in ("gcn", "sage") and not model.normalize)


def _far_hint(far: int, influence: InfluenceResult) -> str:
    """The no-minimum warning's last words: what many such nodes say about the model."""
    if 2 * far < influence.delta.numel():
        return ""
    return "; that is most of them, as for a model far from trained (an untrained or early-stopped one)"


def _question_warnings(influence: InfluenceResult | None) -> list[Caveat]:
    if influence is None or influence.solve.details.get("method") != "step":
        return []
    d = influence.solve.details
    texts = [
        "this model's objective is flat (multi-layer or attention): leave-one-out retraining from scratch is "
        "ill-posed for it, so each ΔΓ is the proximal Bregman response, the change of Γ when the model is "
        "retrained without the node while kept near the given weights, the other nodes' losses measured against "
        f"their current predictions (damping μ = {d['damping']:.2e}); read the "
        "values as the node's pull on the trained model, and check debiasing against random deletion "
        "(debias_seeds) before acting on it"
    ]
    out = coded(texts, "proximal_question")
    far = int(d.get("no_minimum") or 0)
    if far:
        _add(
            out,
            "no_minimum",
            f"{far} of {influence.delta.numel()} nodes' deletions have no minimum near the given weights: retraining "
            "without such a node, even kept near them, carries the weights away (its own loss outgrows the damping), "
            "so no value answers the question and its ΔΓ is null (its row says no_minimum); they are left out of the "
            "summary, the profile and the self-check, and debiasing never picks them" + _far_hint(far, influence),
        )
    moved = int(d.get("moved_far") or 0)
    if moved:
        _add(
            out,
            "moved_far",
            f"{moved} of {influence.delta.numel()} nodes' deletions carry the weights more than {MOVED_FAR:.0%} of "
            f"their norm away (the farthest {float(d['moved_max']):.0%}): the objective is nearly flat along their "
            "pull, so little but the damping holds the answer near the given weights and their ΔΓ describes a "
            "substantially different model; such values saturate (several nodes' often coincide). Read them as "
            "'deleting this node moves the model far', not as the size of its effect (docs/METHOD.md, 'Deletions "
            "that move far')",
        )
    if d.get("unsettled", 0) > far:
        _add(out, "unsettled", _unsettled_warning(d, far, influence.delta.numel()))
    return out


def _unsettled_warning(d: dict[str, Any], far: int, m: int) -> str:
    """The deletions with a value that did not settle: why (a smooth model's steps stalled or ran out, and the finish
    with them; a model with kinks has no vanishing gradient at its minimum) and what their values are."""
    unsettled, steps = int(d["unsettled"]) - far, d["steps_max"]
    head = f"{unsettled} of {m} nodes' steps did not settle (largest remaining gradient entry {d['max_residual']:.1e})"
    tail = "their values are approximate (their rows say settled: false; the reports mark them †)"
    if not d.get("mixed"):  # a model with kinks: no gradient vanishes at the minimum, the finish goes by the objective
        return (
            f"{head}: on a model with kinks the objective's minimum lies on its kinks, where no gradient vanishes, "
            "so their chord steps and then L-BFGS stopped at the lowest objective they found (once "
            f"{FINISH_PATIENCE} evaluations in a row lowered it by less than {CHANGE:g} of its value, or after "
            f"{FINISH_EVALUATIONS}); {tail}"
        )
    stalled = int(d.get("stalled") or 0)
    ran_out = unsettled - stalled
    why = (
        f"each step had to be halved at least {STALL_HALVINGS} times and moved the weights by at most "
        f"{STALL_SHARE:.0%} of their way from the given weights"
    )
    how = [f"{stalled} stalled before their {steps} steps (they stopped making progress, {why})"] if stalled else []
    how += [f"{ran_out} ran out of their {steps} steps and the L-BFGS finish's {FINISH_EVALUATIONS} evaluations"]
    how = how if ran_out else how[:-1]
    return f"{head}: {' and '.join(how)}; {tail}"
