"""A proximal re-optimisation that finds no minimum near the given weights stops once it has carried them far away
(``bind_core.influence.proximal.FAR``), and the self-check records the deletion under ``undefined_truth`` instead of
a number; the step estimate tells such nodes itself and leaves them unchecked; an edge's settling abandons its L-BFGS
finish there, keeps the edge's first-order value and says it did not settle."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.debiasing.validation import retrain_without, validate
from bind_core.errors import NonFiniteError
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.estimate import estimate
from bind_core.influence.proximal import FAR
from bind_core.models.gnn import ModelConfig, flat_parameters
from bind_core.training.fit import TrainConfig, train


@pytest.mark.heavy  # ~10 s here
def test_an_untrained_two_layer_models_deletions_have_no_minimum_near_it() -> None:
    # 20 Adam epochs leave a two-layer GCN near its initialisation: every sampled deletion's own loss outgrows the
    # damping, and the proximal objective decreases without bound (measured: 8 of 8)
    graph = synthetic(100, seed=1, train_per_class=15)
    model = train(graph, TrainConfig(epochs=20), ModelConfig(layers=2, hidden=4))
    assert model.train_config.polish is False  # a deep model the audit trains is audited as Adam leaves it
    found = estimate(model, graph, InfluenceArguments(method="step"))
    mu = float(found.solve.details["damping"])
    theta = flat_parameters(model.module)[2].double()
    reach = FAR * max(1.0, float(torch.linalg.vector_norm(theta)))
    with pytest.raises(NonFiniteError, match=rf"moved the weights \S+ from the given ones \(more than {reach:.3g}\)"):
        retrain_without(model, graph, graph.train_idx[:1], "proximal", damping=mu)
    # the estimate tells these nodes itself (tests/core/influence/test_finish.py): no value, so nothing to check
    assert found.no_minimum is not None and int(found.no_minimum.sum()) >= 25  # measured: 30 of 30
    unchecked = validate(model, graph, found, sample=4)
    assert len(unchecked.sets) == int(found.defined.sum()) and unchecked.undefined_truth is None
    # given values to check, the truths have none: recorded as such, left out of the correlations
    valued = dataclasses.replace(found, delta=torch.zeros_like(found.delta))
    checked = validate(model, graph, valued, sample=4)
    gone = checked.undefined_truth
    assert gone is not None and gone.count == 4 and "no minimum near the given weights" in gone.reason
    assert checked.correlations()["gamma"]["pearson"] is None  # nothing left to correlate, and not 0
    assert all(point.actual is None for point in checked.record().points)


@pytest.mark.heavy  # ~10 s here
def test_an_edge_without_a_minimum_near_the_weights_is_left_unsettled_not_overflowed() -> None:
    graph = synthetic(100, seed=1, train_per_class=15)
    model = train(graph, TrainConfig(epochs=20), ModelConfig(layers=2, hidden=4))
    found = estimate_edges_deep(model, graph, settle=2)
    assert torch.isfinite(found.delta).all() and torch.isfinite(found.delta_sp).all()  # first-order values stay
    details = found.solve.details
    assert details["no_minimum"] >= 1 and details["unsettled"] >= details["no_minimum"]  # not settled, told so
    assert details["settled"] + details["no_minimum"] >= 4
    assert int(found.settled.sum()) == details["settled"]  # an edge without a minimum is not among the settled
