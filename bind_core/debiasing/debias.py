"""Debiasing by deletion: remove the most harmful training nodes, retrain from scratch, compare."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from bind_core.data.graph import Graph, positions
from bind_core.data.labels import user_ids
from bind_core.debiasing.chance import against_random, seed_baselines
from bind_core.debiasing.nodesets import resolve_budget, select
from bind_core.debiasing.overreach import overreach
from bind_core.fairness.metrics import evaluate
from bind_core.influence.result import InfluenceResult
from bind_core.training.fit import ProgressCallback, TrainConfig, TrainedModel, train


def report(
    model: TrainedModel, graph: Graph, lam: float = 0.5, groups: list[int] | None = None
) -> dict[str, float | int]:
    """Accuracy, AUC, F1, ΔSP, ΔEO, Γ_SP, Γ_EO, Γ of ``model`` on ``graph``'s test nodes; the fairness metrics
    over pairs of ``groups`` (default: all)."""
    test = graph.test_idx
    proba = model.predict_proba(graph, test).double()
    y, sens = graph.y[test], graph.sens[test]
    return evaluate(proba, y, sens, lam=lam, num_groups=graph.num_groups, groups=groups).to_dict()


BIAS_METRICS = ("delta_sp", "delta_eo", "gamma")
"""The bias metrics a deletion is meant to lower; one that rises instead is a backfire (:func:`backfired`)."""


def backfired(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The bias metrics (:data:`BIAS_METRICS`) that rose from ``before`` to ``after``: the deletion backfired on them.
    A metric undefined on either side is left out (it cannot be said to have risen)."""
    rose = []
    for name in BIAS_METRICS:
        b, a = before.get(name), after.get(name)
        if isinstance(b, int | float) and isinstance(a, int | float) and a > b + 1e-12:
            rose.append(name)
    return rose


def debias(
    model: TrainedModel,
    graph: Graph,
    influence: InfluenceResult | torch.Tensor,
    *,
    budgets: Sequence[float] = (0.01, 0.1),
    lam: float | None = None,
    progress: ProgressCallback | None = None,
    groups: list[int] | None = None,
    utility: torch.Tensor | None = None,
    chance_seeds: Sequence[int] = (),
    random_sets: int = 3,
    set_estimate: Callable[[list[int]], float] | None = None,
    retrain: TrainConfig | None = None,
) -> list[dict[str, Any]]:
    """For each budget: delete the harmful node set (:func:`~bind_core.debiasing.nodesets.select`), retrain from scratch
    with the model's original settings and seed, and report the metrics before and after.

    ``retrain``: the settings of every retraining here (the after-deletion one and the chance check's), e.g. the
    model's without the polish (``AuditConfig.debias_retrain="adam"``); ``None``: the model's own. When given,
    ``before`` is the unchanged graph retrained with them too (the model's seed), not the audited model, so that
    before and after went through the same training.

    ``utility`` (aligned with ``train_idx``, :func:`~bind_core.influence.utility.utility_influence`): when given,
    nodes whose deletion is estimated to raise the validation loss (``utility > 0``) are never deleted, so the
    set trades no estimated utility for fairness (utility-aware BIND; the paper's method is ``None``).

    ``set_estimate(positions)`` (positions in ``train_idx``), when given, estimates each set as a whole (a step
    estimate's :class:`~bind_core.influence.step.Stepper`); the set is then the top of the ranking with overlapping
    computation graphs allowed, so a multi-layer model's budget can be reached (Theorem 3's non-overlap rule,
    which makes the members' estimates add up, admitted 27 of 100 requested nodes for a two-layer GCN). Without
    it the set keeps the non-overlap rule and its estimate is the members' sum.

    ``chance_seeds`` (at least 3 training seeds; empty: skipped): each budget's set is also checked against chance
    (:func:`bind_core.debiasing.chance.against_random`: the set and ``random_sets`` random sets of its size, each
    retrained with every seed, against the seeds' noise floor on the unchanged graph), in the row's ``against_random``.

    ``influence``: the estimate (:func:`bind_core.estimate_influence`), or its ``delta`` (aligned with
    ``train_idx``). ``lam``: Γ's weighting of Γ_SP; default: the estimate's, or 0.5 for a bare tensor.

    Returns:
        One dict per budget: ``budget``, ``requested`` (node count), ``deleted`` (count), ``nodes`` (original
        ids), ``estimated_delta`` (sum of the set's estimates), ``utility_aware`` and, when so,
        ``estimated_utility`` (the sum of the set's ``utility``), ``caveat`` (only where the estimate is below −Γ:
        :func:`~bind_core.debiasing.overreach.overreach`), ``before`` and ``after`` (metric dicts),
        ``backfired`` (the bias metrics that rose after the deletion, :func:`backfired`; empty when none did),
        ``seconds``, ``against_random`` (or ``None``), ``selection`` (``non_overlapping`` or ``top_ranked``). The
        fairness metrics are over pairs of ``groups``.
    """
    if isinstance(influence, InfluenceResult):
        lam = influence.lam if lam is None else lam
        influence = influence.delta
    lam = 0.5 if lam is None else lam
    candidates = influence
    if utility is not None:
        if utility.shape != influence.shape:
            raise ValueError("utility must be aligned with influence (one value per training node)")
        candidates = torch.where(utility.to(influence.device) > 0, torch.full_like(influence, torch.inf), influence)
    settings = model.train_config if retrain is None else retrain
    rows = []
    parts = len(budgets) * (2 if chance_seeds else 1) + (1 if chance_seeds else 0)  # progress: retraining groups
    parts += 0 if retrain is None else 1
    done = 0
    audited = report(model, graph, lam, groups)
    gamma = audited.get("gamma")  # what the estimates are relative to: the audited model's Γ
    if retrain is None:
        before = audited
    else:
        step = None if progress is None else (lambda _s, f: progress("debiasing", f / parts))
        unchanged = train(graph, retrain, model.model_config, progress=step, device=model.device)
        before = report(unchanged, graph, lam, groups)
        done = 1
    position = positions(graph.train_idx, graph.num_nodes)  # node -> its place in train_idx
    baselines = None
    if chance_seeds:
        hold = None if progress is None else (lambda d=done: progress("debiasing", d / parts))
        baselines = seed_baselines(model, graph, chance_seeds, lam=lam, groups=groups, hold=hold, retrain=retrain)
        done += 1
        if progress is not None:
            progress("debiasing", done / parts)
    for i, budget in enumerate(budgets):
        start = time.perf_counter()
        hops = 0 if set_estimate is not None else model.model_config.layers  # 0: overlap allowed
        nodes = select(candidates, graph, budget, "harmful", hops=hops)
        reduced, _ = graph.without_nodes(nodes)
        step = None if progress is None else (lambda _s, f, d=done: progress("debiasing", (d + f) / parts))
        retrained = train(reduced, settings, model.model_config, progress=step, device=model.device)
        done += 1
        chance = None
        if baselines is not None:
            tick = None if progress is None else (lambda f, d=done: progress("debiasing", (d + f) / parts))
            chance = against_random(
                model, graph, nodes, baselines, random_sets=random_sets, lam=lam, groups=groups, seed=i,
                progress=tick, retrain=retrain,
            )  # fmt: skip
            done += 1
        if set_estimate is not None and nodes.numel():
            est = set_estimate(position[nodes].tolist())
        else:
            est = float(influence[position[nodes]].sum())
        caveat = overreach(est, None if gamma is None else float(gamma), "nodes")
        rows.append(
            {
                "budget": budget,
                "requested": resolve_budget(budget, graph.train_idx.numel()),
                "deleted": int(nodes.numel()),
                "nodes": user_ids(graph, nodes.tolist()),
                "estimated_delta": est,
                **({"caveat": caveat} if caveat is not None else {}),
                "selection": "top_ranked" if set_estimate is not None else "non_overlapping",
                "utility_aware": utility is not None,
                **({"estimated_utility": float(utility[position[nodes]].sum())} if utility is not None else {}),
                "before": before,
                "after": (after := report(retrained, reduced, lam, groups)),
                "backfired": backfired(before, after),
                "against_random": chance,
                "seconds": time.perf_counter() - start,
            }
        )
    return rows
