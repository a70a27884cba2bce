"""Caveats a reader of an audit must see: about the graph (groups kept out, few positives) and about the
estimates (what question they answer, nodes that did not settle, a self-check inside its noise or too low)."""

from __future__ import annotations

from typing import Any

from bind_core.graph import Graph
from bind_core.groups import exclusion_warnings, group_name, included_groups
from bind_core.influence import InfluenceResult

LOW_SELF_CHECK = 0.9
"""Below this per-node Pearson correlation of the self-check, the audit warns that the estimates are rough."""


MIN_TEST_POSITIVES = 30


def warnings_for(graph: Graph, min_group_size: int = 0) -> list[str]:
    """Caveats a reader of the audit must see: groups kept out of the metrics (absent from the test split,
    below the minimum size, without a positive test node), groups too small for stable Γ_EO estimates, a graph
    without edges."""
    out = exclusion_warnings(graph, min_group_size)
    if graph.num_edges == 0:
        out.append(
            "the graph has no edges: the GNN sees only each node's own features (it is an MLP), and BIND's "
            "non-i.i.d. term (a node's influence through its neighbours) is zero; check the edge list if edges "
            "were expected"
        )
    test = graph.test_idx
    y, s = graph.y[test], graph.sens[test]
    for grp in included_groups(graph, min_group_size):
        pos = int(((s == grp) & (y == 1)).sum())
        if graph.num_classes == 2 and pos < MIN_TEST_POSITIVES:
            out.append(
                f"group {grp} ({group_name(graph, grp)}) has only {pos} positive test nodes: Γ_EO and ΔEO rest on "
                f"them, and per-node estimates of the change in Γ_EO are unreliable below about {MIN_TEST_POSITIVES}"
            )
    return out


def estimate_warnings(
    influence: InfluenceResult | None, validation: dict[str, Any] | None, refinement: dict[str, Any] | None
) -> list[str]:
    """What the estimates answer and how far they can be trusted: the question a step estimate answers, nodes
    whose step did not settle, a self-check inside its ground truth's noise, and a low self-check."""
    out = _question_warnings(influence)
    validation = validation or {}
    clear = validation.get("clear_of_noise")
    if clear is not None and clear < 0.5:
        out.append(
            f"only {clear:.0%} of the self-check's deletions moved Γ by more than twice its ground truth's own "
            f"drift ({validation.get('noise_floor', 0.0):.1e}): its correlation says little about them"
        )
    pearson = validation.get("pearson")
    if pearson is None or pearson >= LOW_SELF_CHECK:
        return out
    advice = (
        "they were refined; treat single-node values as rough"
        if refinement
        else "where one Newton step is not enough (e.g. a one-layer GIN), refine_steps (e.g. 300) re-optimises "
        "each deletion approximately"
    )
    truth = (
        "the proximal re-optimisation (retraining without the node near the trained weights)"
        if (validation or {}).get("mode") == "proximal"
        else "re-optimisation without the node"
    )
    return [
        *out,
        f"the self-check's per-node Pearson correlation of estimated ΔΓ with {truth} is {pearson:.2f} "
        f"(below {LOW_SELF_CHECK}): the influence estimates rank and size nodes only roughly; {advice}",
    ]


def _question_warnings(influence: InfluenceResult | None) -> list[str]:
    if influence is None or influence.solve.details.get("method") != "step":
        return []
    d = influence.solve.details
    out = [
        "this model's objective is flat (multi-layer or attention): leave-one-out retraining from scratch is "
        "ill-posed for it, so each ΔΓ is the proximal response, the change of Γ when the model is retrained "
        f"without the node while kept near the trained weights (damping μ = {d['damping']:.2e}); read the "
        "values as the node's pull on the trained model, and check debiasing against random deletion "
        "(debias_seeds) before acting on it"
    ]
    if d.get("unsettled"):
        out.append(
            f"{d['unsettled']} of {influence.delta.numel()} nodes' steps did not settle within "
            f"{d['steps_max']} steps (largest remaining gradient entry {d['max_residual']:.1e}): their values "
            "are approximate"
        )
    return out
