"""The debiasing building block compares like with like: for a model whose recipe does not end with the polish (a
supplied model's, a model Adam leaves) retraining does not return to the audited weights, so ``before`` is the
unchanged graph retrained by the same recipe, as the audit's debiasing stage does, not the audited model (a supplied
PyG model's ``before`` was the user's model and ``after`` the library's retraining: a backfire that did not happen)."""

from __future__ import annotations

import pytest
from pyg_models import early_stopped
from safetensors.torch import save

from bind_core import estimate_influence
from bind_core.data.datasets import synthetic
from bind_core.debiasing.debias import debias, report
from bind_core.pipeline.audit import AuditConfig
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.training.fit import train


@pytest.mark.heavy  # ~15 s here
def test_a_supplied_models_before_is_the_unchanged_graph_retrained_by_its_recipe() -> None:
    graph = synthetic(160, seed=4, train_per_class=25)
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    kept = early_stopped("GCN", args, graph).state_dict()
    config = {"format": "torch_geometric", "class": "GCN", "args": args}
    config |= {"training": {"loss": "cross_entropy", "weight_decay": 5e-4}}
    model, _ = prepare_for_audit(save({k: v.contiguous() for k, v in kept.items()}), config, graph, AuditConfig())
    assert not model.train_config.polish
    influence = estimate_influence(model, graph)
    (row,) = debias(model, graph, influence, budgets=(5,))
    retrained = report(train(graph, model.train_config, model.model_config), graph)
    assert row.before.gamma == pytest.approx(retrained.gamma, abs=1e-12)
    assert abs(row.before.gamma - report(model, graph).gamma) > 1e-6  # the user's model is not the recipe's
