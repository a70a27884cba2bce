"""Debiasing with the user's recipe (issue 32): a supplied model's debiasing retrains from scratch with its config's
training section (optimiser, learning rate, weight decay, epochs, early stopping), never with the project's polish
unless the config says so, and every row reports the recipe it used."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save
from torch_geometric.nn import models

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.debias import report
from bind_core.errors import ConfigError
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.pipeline.results import AuditResults
from bind_core.training.fit import TrainConfig, train

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=2, train_per_class=25)


def test_early_stopping_stops_after_patience_epochs_without_improvement_and_keeps_the_best(graph: Graph) -> None:
    stopped = train(graph, TrainConfig(epochs=400, lr=0.05, patience=5, polish=False))
    history = stopped.history
    assert history.epochs is not None and history.best_epoch is not None
    assert history.epochs < 400 and history.epochs == history.best_epoch + 6
    full = train(graph, TrainConfig(epochs=history.epochs, lr=0.05, polish=False))  # the same path, not stopped
    assert full.history.best_epoch == history.best_epoch
    assert all(torch.equal(a, b) for a, b in zip(stopped.module.parameters(), full.module.parameters(), strict=True))


def test_sgd_is_a_recipe_and_bad_settings_are_refused(graph: Graph) -> None:
    sgd = train(graph, TrainConfig(epochs=30, lr=0.1, optimizer="sgd", momentum=0.9, polish=False))
    adam = train(graph, TrainConfig(epochs=30, lr=0.1, polish=False))
    assert not torch.equal(next(sgd.module.parameters()), next(adam.module.parameters()))
    for bad in ({"optimizer": "adamw"}, {"momentum": 0.5}, {"patience": -1}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            TrainConfig(**bad)  # type: ignore[arg-type]


RECIPE = {"loss": "cross_entropy", "weight_decay": 5e-4, "lr": 0.01, "epochs": 80, "patience": 10, "seed": 4}


def _supplied(graph: Graph) -> tuple[bytes, dict[str, Any]]:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 1, "out_channels": 2}
    torch.manual_seed(0)
    module = models.GCN(**args)
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(40):
        optimizer.zero_grad()
        F.cross_entropy(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    weights = save({k: v.contiguous() for k, v in copy.deepcopy(module).state_dict().items()})
    return weights, {"format": "torch_geometric", "class": "GCN", "args": args, "training": dict(RECIPE)}


def test_a_supplied_models_debiasing_retrains_with_its_recipe_and_reports_it(graph: Graph) -> None:
    weights, config = _supplied(graph)
    audit = AuditConfig(bootstrap=0, validation_sample=0, budgets=(4,), debias_seeds=(1, 2, 3), debias_random_sets=1)
    model, _ = prepare_for_audit(weights, config, graph, audit)
    recipe = model.train_config
    assert (recipe.lr, recipe.epochs, recipe.patience, recipe.polish) == (0.01, 80, 10, False)
    result = run_audit(graph, audit, model=model)
    (row,) = result.debiasing or []
    assert row.retrain == "audit"
    recipe_doc = encode(row.recipe)
    assert {k: recipe_doc[k] for k in ("optimizer", "lr", "weight_decay", "epochs", "patience", "polish")} == {
        "optimizer": "adam", "lr": 0.01, "weight_decay": 5e-4, "epochs": 80, "patience": 10, "polish": False,
    }  # fmt: skip
    # before: the unchanged graph retrained from scratch with that recipe (the model's seed), not the given weights
    again = train(graph, recipe, model.model_config)
    expected = report(again, graph, audit.lam, None)
    assert row.before.gamma == pytest.approx(expected.gamma, abs=1e-12)
    assert row.before.gamma != pytest.approx(result.metrics.test.gamma, abs=1e-9)
    typed = AuditResults.from_dict(result.to_dict())
    assert typed.debiasing is not None and typed.debiasing[0].recipe is not None
    assert typed.debiasing[0].recipe.patience == 10
