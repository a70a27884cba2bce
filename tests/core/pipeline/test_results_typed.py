"""The typed results (issue 17): ``AuditResults.from_dict(doc).to_dict() == doc`` on the stored (JSON) form of
real audits of several configurations, every key of them typed (the open records aside), and a document that
does not fit is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from bind_core.codec import ResultFormatError, decode, encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.fairness.metrics import evaluate
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.pipeline.results import AuditResults, MetricValues

torch.set_num_threads(1)

FAST = {"training": {"epochs": 20}, "bootstrap": 20, "validation_sample": 2, "budgets": [0.05]}
CONFIGS: dict[str, dict[str, Any]] = {
    "gcn1_everything": {
        **FAST, "budgets": [0.05, 2], "debias_seeds": [1, 2, 3], "debias_random_sets": 1,
        "stability_seeds": [10, 11], "stability_k": 5, "edges": True,
    },
    "gcn2_step_utility": {**FAST, "model": {"layers": 2, "hidden": 4}, "estimator": "step", "debias_utility": True,
                          "edges": True, "training": {"epochs": 20, "polish": True}},
    "metrics_only": {"training": {"epochs": 20}, "stages": ["training", "metrics"], "bootstrap": 0},
    "gin_refined": {
        **FAST, "model": {"arch": "gin", "hidden": 4}, "bootstrap": 0, "refine_steps": 2, "validation_sample": 0,
    },
}  # fmt: skip


def _stored(result: AuditResult) -> dict[str, Any]:
    """The document as the service stores and serves it (JSON)."""
    doc: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    return doc


def _round_trip(doc: dict[str, Any]) -> AuditResults:
    typed = AuditResults.from_dict(doc)
    assert typed.to_dict() == doc
    assert json.dumps(typed.to_dict(), sort_keys=True) == json.dumps(doc, sort_keys=True)
    return typed


def _graph(groups: int = 2) -> Graph:
    return synthetic(100, num_groups=groups, seed=1, train_per_class=15)


@pytest.mark.heavy  # 11 s here
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_round_trip_is_the_identity_on_real_audits(name: str) -> None:
    result = run_audit(_graph(), AuditConfig.from_dict(CONFIGS[name]))
    typed = _round_trip(_stored(result))
    assert result.typed() == typed
    if name == "metrics_only":
        assert typed.influence_summary is None and typed.debiasing is None and typed.metrics.intervals is None
        assert typed.profile is None and "profile" not in _stored(result)
    else:
        assert typed.influence_summary is not None and typed.influence_summary.count == typed.graph.train
        assert typed.profile is not None and typed.profile.sets.all.nodes == typed.graph.train
        assert typed.debiasing and typed.debiasing[0].before.nodes == typed.graph.test
    if name == "gcn1_everything":
        assert typed.metrics.intervals is not None and typed.metrics.intervals.delta_sp is not None
        assert typed.stability is not None and typed.validation is not None and typed.validation.count == 2
        assert typed.debiasing is not None
        checks = [row.against_random for row in typed.debiasing]
        assert all(c is not None and c.verdict for c in checks)
        assert typed.edges is not None and typed.edges.computed and typed.edges.edges == typed.graph.edges
    if name == "gcn2_step_utility":
        assert typed.debiasing and typed.debiasing[0].estimated_utility is not None
        assert typed.edges is not None and typed.edges.computed and typed.edges.settled  # the damped estimate
        assert typed.edges.top_harmful and all(row.settled for row in typed.edges.top_harmful)
    if name in ("metrics_only", "gin_refined"):
        assert typed.edges is None and "edges" not in _stored(result)
    if name == "gin_refined":
        assert typed.refinement is not None and typed.refinement.max_iter == 2


def test_multigroup_with_an_excluded_group() -> None:
    """Three groups, the smallest kept out of the metrics (min_group_size): it carries its reason."""
    graph = _graph(3)
    sizes = torch.bincount(graph.sens[graph.test_idx], minlength=3)
    config = AuditConfig.from_dict({**FAST, "min_group_size": int(sizes.min()) + 1, "validation_sample": 0})
    typed = _round_trip(_stored(run_audit(graph, config)))
    excluded = [g for g in typed.metrics.groups if not g.included]
    assert len(excluded) == 1 and excluded[0].excluded_reason
    assert len(typed.metrics.included_groups) == 2


def test_undefined_numbers_are_null_with_a_reason() -> None:
    """An audit refuses a graph whose test metrics are undefined, so: resamples that cannot define ΔEO are counted
    (``dropped``) in a real audit (a group with 3 positive test nodes), and a metrics document with an undefined
    metric (null, its reason under ``undefined``) is typed as such."""
    graph = synthetic(200, seed=10)
    config = AuditConfig.from_dict({"training": {"epochs": 20}, "stages": ["training", "metrics"], "bootstrap": 200})
    typed = _round_trip(_stored(run_audit(graph, config)))
    assert typed.metrics.intervals is not None and typed.metrics.intervals.delta_eo is not None
    assert typed.metrics.intervals.delta_eo.dropped > 0
    p1 = torch.tensor([0.9, 0.2, 0.6, 0.7, 0.1, 0.4], dtype=torch.float64)
    proba, y, sens = torch.stack([1 - p1, p1], 1), torch.tensor([1, 1, 0, 0, 0, 0]), torch.tensor([0, 0, 0, 1, 1, 1])
    doc = json.loads(json.dumps(encode(evaluate(proba, y, sens).values())))
    values = decode(MetricValues, doc)
    assert values.delta_eo is None and values.undefined is not None and "delta_eo" in values.undefined
    assert encode(values) == doc


def test_open_records_keep_unnamed_keys_and_closed_ones_refuse_them() -> None:
    result = run_audit(_graph(), AuditConfig.from_dict(CONFIGS["metrics_only"]))
    doc = _stored(result)
    doc["training"]["new_figure"] = 1.5  # an open record: kept, in its place
    assert AuditResults.from_dict(doc).training.extra["new_figure"] == 1.5
    assert AuditResults.from_dict(doc).to_dict() == doc
    bad = _stored(result)
    bad["metrics"]["test"]["surprise"] = 1
    with pytest.raises(ResultFormatError, match="surprise"):
        AuditResults.from_dict(bad)
    wrong = _stored(result)
    wrong["metrics"]["test"]["nodes"] = "many"
    with pytest.raises(ResultFormatError, match="nodes"):
        AuditResults.from_dict(wrong)
    missing = _stored(result)
    del missing["graph"]
    with pytest.raises(ResultFormatError, match="graph"):
        AuditResults.from_dict(missing)


def test_what_the_service_adds_is_typed() -> None:
    """The worker adds ``supplied_model`` (an audit of a supplied model) and ``influence_summary.distributed`` (per-node
    terms spread over workers); a model with kinks is ``stationary: "kinks"``. All of it round-trips, typed."""
    doc = _stored(run_audit(_graph(), AuditConfig.from_dict({**FAST, "validation_sample": 0, "budgets": []})))
    doc["stationarity"] |= {"stationary": "kinks", "kinks": {"directions": 3}}
    doc["supplied_model"] = {
        "id": "8c0e0a4e-0000-4000-8000-000000000000", "polished_by_service": True, "grad_norm_supplied": 0.2,
        "grad_norm": 1e-9, "pyg": {"max_logit_difference": 1e-12, "class": "GCN"},
    }  # fmt: skip
    worker = {"worker": "w1", "device": "cpu", "chunks": 2, "nodes": 30, "seconds": 0.5}
    doc["influence_summary"]["distributed"] = {"chunks": 2, "coordinator": "w1", "workers": [worker], "reclaimed": 0}
    typed = _round_trip(doc)
    assert typed.stationarity.stationary == "kinks" and typed.stationarity.extra["kinks"] == {"directions": 3}
    assert typed.supplied_model is not None and typed.supplied_model.pyg is not None
    assert typed.supplied_model.pyg.cls == "GCN" and typed.supplied_model.pyg.extra == {}
    assert typed.influence_summary is not None and typed.influence_summary.distributed is not None
    assert typed.influence_summary.distributed.workers[0].nodes == 30
    doc["stationarity"]["stationary"] = 3
    with pytest.raises(ResultFormatError, match="stationary"):
        AuditResults.from_dict(doc)
