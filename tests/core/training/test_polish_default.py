"""Which models the audit polishes when the recipe leaves it open (``TrainConfig.polish=None``): those whose estimate
is the paper's influence function (one-layer GCN, GIN, SAGE; models above the step estimate's size), not those whose
step estimate is defined at any weights (deeper models, GAT), which are audited as Adam leaves them."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.influence.estimate import pick_method
from bind_core.models.estimator import DENSE_MAX_PARAMETERS, default_estimator, polishes_by_default
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.budget import parameter_count
from bind_core.training.fit import TrainConfig, train


@pytest.mark.parametrize(
    ("model", "polished"),
    [
        (ModelConfig(), True),
        (ModelConfig(arch="sage"), True),
        (ModelConfig(layers=2, hidden=8), False),
        (ModelConfig(arch="gat", hidden=8), False),
    ],
)
def test_by_default_only_models_with_the_linear_estimate_are_polished(
    small_graph: Graph, model: ModelConfig, polished: bool
) -> None:
    trained = train(small_graph, TrainConfig(epochs=20), model)
    assert trained.train_config.polish is polished  # the recipe records what was done
    assert trained.stationarity.polished is polished
    # float64 after the polish; Adam's own float32 weights otherwise, its best validation epoch
    dtype = next(trained.module.parameters()).dtype
    assert dtype == (torch.float64 if polished else torch.float32)
    if not polished:
        adam = train(small_graph, TrainConfig(epochs=20, polish=False), model)
        for a, b in zip(trained.module.parameters(), adam.module.parameters(), strict=True):
            assert torch.equal(a, b)


def test_an_explicit_polish_decides_for_any_model(small_graph: Graph) -> None:
    deep = train(small_graph, TrainConfig(epochs=20, polish=True), ModelConfig(layers=2, hidden=4))
    assert deep.train_config.polish is True and deep.stationarity.polished and deep.stationarity.converged
    paper = train(small_graph, TrainConfig(epochs=20, polish=False), ModelConfig())
    assert paper.train_config.polish is False and not paper.stationarity.polished


def test_the_rule_follows_the_estimate() -> None:
    for row_separable, p in [(True, 289), (False, 433), (False, DENSE_MAX_PARAMETERS + 1)]:
        auto = default_estimator(row_separable=row_separable, num_parameters=p)
        assert pick_method("auto", row_separable=row_separable, num_parameters=p) == auto
        assert polishes_by_default(estimator="auto", row_separable=row_separable, num_parameters=p) == (
            auto == "linear"
        )
    assert default_estimator(row_separable=False, num_parameters=433) == "step"
    assert default_estimator(row_separable=False, num_parameters=DENSE_MAX_PARAMETERS + 1) == "linear"
    # an explicit estimate decides: the influence function wants a stationary point, the step estimate does not
    assert polishes_by_default(estimator="linear", row_separable=False, num_parameters=433)
    assert not polishes_by_default(estimator="step", row_separable=True, num_parameters=289)
    assert TrainConfig().polishes(estimator="linear", row_separable=False, num_parameters=433)
    assert not TrainConfig(polish=False).polishes(estimator="linear", row_separable=True, num_parameters=289)


def test_the_audit_decides_once_with_its_estimator(small_graph: Graph) -> None:
    model = ModelConfig(layers=2, hidden=4)
    p = parameter_count(model, small_graph.num_features, small_graph.num_classes)
    base = AuditConfig(model=model, training=TrainConfig(epochs=10), stages=())
    assert base.with_polish_decided(p).training.polish is False
    linear = AuditConfig(model=model, training=TrainConfig(epochs=10), stages=(), estimator="linear")
    assert linear.with_polish_decided(p).training.polish is True
    set_off = AuditConfig(model=model, training=TrainConfig(epochs=10, polish=False), estimator="linear")
    assert set_off.with_polish_decided(p) is set_off
    result = run_audit(small_graph, linear)
    assert result.config.training.polish is True and result.model.stationarity.polished
    assert run_audit(small_graph, base).config.training.polish is False


def test_polish_takes_true_false_or_null_from_json() -> None:
    assert TrainConfig.from_dict({"polish": None}).polish is None
    assert TrainConfig.from_dict({"polish": True}).polish is True
    with pytest.raises(ConfigError, match="polish: expected true or false or null, got str 'yes'"):
        TrainConfig.from_dict({"polish": "yes"})
    with pytest.raises(ConfigError, match="polish: expected true or false or null, got int 1"):
        TrainConfig.from_dict({"polish": 1})
