"""Ground truth for edge estimates: the actual ΔΓ of deleting edges, by re-optimisation, and the per-edge check.

The actual change is the one the edge estimate approximates: build ``G − E'`` (the same nodes and splits, the
edges removed both ways), copy the trained weights and re-optimise on it, then measure Γ on the test nodes of
``G − E'``. For the one-layer estimate (:mod:`bind_core.influence.edges`) the re-optimisation minimises the same
objective to convergence with the project's float64 polish (``mode="reoptimize"``, as
``validation.retrain_without`` does for node deletions); for the damped estimate of multi-layer and attention
models (:mod:`bind_core.influence.deep_edges`) it is the proximal response that estimate answers
(``mode="proximal"``: the Bregman objective of ``G − e`` plus ``(μ/2)·‖θ − θ̂‖²`` with the estimate's damping ``μ``;
:mod:`bind_core.influence.bregman`).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from bind_core.data.graph import Graph
from bind_core.debiasing.proximal_truth import proximal_reoptimize
from bind_core.debiasing.validation import (
    ValidationResult,
    gammas,
    ground_truth_mode,
    proximal_coordinates,
    undefined_truth,
)
from bind_core.errors import ConfigError, NonFiniteError
from bind_core.influence.curvature import Coordinates
from bind_core.influence.edges import EdgeInfluenceResult
from bind_core.influence.functional import FunctionalModel
from bind_core.training.fit import TrainedModel
from bind_core.training.polish import polish


def reoptimize_without_edges(
    model: TrainedModel, graph: Graph, edges: Tensor, *, hold: Callable[[], None] | None = None
) -> tuple[TrainedModel, Graph]:
    """A copy of ``model`` re-optimised (float64 polish from the trained weights) on ``graph`` without ``edges``
    (``[k, 2]``), and that graph. ``hold()`` is called at every evaluation of the polish and may raise to abort."""
    reduced = graph.without_edges(edges)
    clone = TrainedModel(
        copy.deepcopy(model.module), model.model_config, model.train_config, dataclasses.replace(model.history)
    )
    cfg = model.train_config
    tick = None if hold is None else (lambda _f: hold())
    return polish(clone, reduced, max_iter=max(cfg.polish_max_iter, 1000), tol=cfg.polish_tol, progress=tick), reduced


def actual_edge_delta(
    model: TrainedModel,
    graph: Graph,
    edges: Tensor,
    groups: list[int] | None = None,
    *,
    mode: str = "reoptimize",
    damping: float = 0.0,
    hold: Callable[[], None] | None = None,
    coordinates: Coordinates | None = None,
    on_anchor: FunctionalModel | None = None,
) -> tuple[float, float]:
    """Actual ``(ΔΓ_SP, ΔΓ_EO)`` of deleting ``edges`` and re-optimising (the estimate's sign convention):
    ``mode`` ``"reoptimize"`` (the same objective) or ``"proximal"`` (with ``damping`` μ, its L-BFGS in
    ``coordinates``, the tilt read from ``on_anchor``:
    :func:`~bind_core.debiasing.proximal_truth.proximal_reoptimize`)."""
    before = gammas(model, graph, groups)
    if mode == "proximal":
        reduced = graph.without_edges(edges)
        tick = None if hold is None else (lambda _fraction: hold())
        m = int(graph.train_idx.numel())
        after_model = proximal_reoptimize(
            model,
            reduced,
            num_train=m,
            damping=damping,
            anchor=graph,
            progress=tick,
            coordinates=coordinates,
            on_anchor=on_anchor,
        )
    elif mode == "reoptimize":
        after_model, reduced = reoptimize_without_edges(model, graph, edges, hold=hold)
    else:
        raise ConfigError(f"mode: {mode!r} is not one of reoptimize, proximal")
    after = gammas(after_model, reduced, groups)
    return after[0] - before[0], after[1] - before[1]


def validate_edges(
    model: TrainedModel,
    graph: Graph,
    result: EdgeInfluenceResult,
    *,
    sample: int = 30,
    seed: int = 0,
    groups: list[int] | None = None,
    progress: Callable[[float], None] | None = None,
    coordinates: Coordinates | None = None,
) -> ValidationResult:
    """Estimated against actual ΔΓ for ``sample`` edges drawn at random among those whose deletion changes a loss
    or a test prediction (the others are exactly 0 both ways). ``sets`` holds each edge as ``[u, v]``. The ground
    truth is the question the estimate answers: the proximal response for a damped estimate (its ``solve`` says
    ``method: step``), else re-optimisation. A damped estimate's sample is drawn among its settled edges (the top
    of the ranking at each end: the values the audit lists and deletes); the other edges hold first-order values,
    which rank well but whose size is not claimed (``extra["population"]`` says which).
    ``progress(fraction of the edges checked)`` is called before and after each edge and during its
    re-optimisation; it may raise to abort. ``coordinates``: those the proximal ground truth runs in (default:
    :func:`~bind_core.debiasing.validation.proximal_coordinates`)."""
    start = time.perf_counter()
    population = result.affects if result.settled is None else result.affects & result.settled
    candidates = torch.nonzero(population).flatten()
    gen = torch.Generator().manual_seed(seed)
    picks = candidates[torch.randperm(candidates.numel(), generator=gen)[: min(sample, candidates.numel())]]
    lam = result.lam
    mode = ground_truth_mode(model, graph, result.solve.details)
    proximal = mode == "proximal"
    damping = float(result.solve.details.get("damping", 0.0)) if proximal else 0.0
    on_anchor = FunctionalModel.from_trained(model, graph) if proximal else None  # the tilt's model, made once
    if on_anchor is not None and coordinates is None:
        coordinates = proximal_coordinates(on_anchor, result.solve)
    est, act = [], []
    total = max(int(picks.numel()), 1)
    for i, k in enumerate(picks.tolist()):
        edge = result.edges[k : k + 1]
        hold = None if progress is None else (lambda i=i: progress(i / total))
        if hold is not None:
            hold()
        try:
            d_sp, d_eo = actual_edge_delta(
                model,
                graph,
                edge,
                groups,
                mode=mode,
                damping=damping,
                hold=hold,
                coordinates=coordinates,
                on_anchor=on_anchor,
            )
        except NonFiniteError:  # the objective has no minimum near θ̂ for this deletion: no ground truth
            d_sp = d_eo = float("nan")
        act.append([lam * d_sp + (1 - lam) * d_eo, d_sp, d_eo])
        est.append([float(result.delta[k]), float(result.delta_sp[k]), float(result.delta_eo[k])])
        if progress is not None:
            progress((i + 1) / total)
    if proximal:
        m = int(graph.train_idx.numel())
        again = proximal_reoptimize(
            model, graph, num_train=m, damping=damping, anchor=graph, coordinates=coordinates, on_anchor=on_anchor
        )
    else:
        again, _ = reoptimize_without_edges(model, graph, torch.empty(0, 2, dtype=torch.long))
    before, drift_g = gammas(model, graph, groups), gammas(again, graph, groups)
    drift = abs(lam * (drift_g[0] - before[0]) + (1 - lam) * (drift_g[1] - before[1]))
    actual = np.asarray(act, dtype=np.float64).reshape(-1, 3)
    finite = actual[np.isfinite(actual).all(axis=1)]
    sets = [result.edges[k].tolist() for k in picks.tolist()]
    return ValidationResult(
        protocol="edge-sample",
        mode=mode,
        sets=sets,
        estimated=np.asarray(est, dtype=np.float64).reshape(-1, 3),
        actual=actual,
        lam=lam,
        seconds=time.perf_counter() - start,
        noise_floor=drift,
        clear_of_noise=float(np.mean(np.abs(finite[:, 0]) > 2 * drift)) if finite.size else None,
        undefined_truth=undefined_truth(sets, actual, what="edge deletion"),
        extra={"population": "affecting edges" if result.settled is None else "settled edges (the top at each end)"},
    )
