"""``AuditConfig.debias_retrain`` (issue 13): with ``"adam"`` every retraining of the debiasing stage (after each
deletion, the check against chance, the edge debiasing) trains as the model's settings without the polish, and the
rows' ``before`` is the unchanged graph retrained so too; ``"audit"`` keeps the model's own settings. Checked on the
numbers themselves: each figure equals an independent Adam-only retrain's, and differs from the polished one's."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch

from bind_core.cli import build_parser, main
from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.chance import seed_baselines
from bind_core.debiasing.debias import debias, report
from bind_core.debiasing.nodesets import select
from bind_core.errors import ConfigError
from bind_core.influence import estimate
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.pipeline.budget import GraphSize, audit_cost
from bind_core.pipeline.results import AuditResults
from bind_core.pipeline.stages import metric_groups
from bind_core.reporting.report import render_report
from bind_core.reporting.retraining import RETRAINING
from bind_core.training.fit import TrainConfig, train

torch.set_num_threads(1)

CONFIG = TrainConfig(epochs=40, lr=0.01, seed=3, polish=True)
ADAM = dataclasses.replace(CONFIG, polish=False)
SEEDS = [1, 2, 3]
AUDIT: dict[str, Any] = {
    "training": {"epochs": 40, "lr": 0.01, "seed": 3},
    "bootstrap": 0,
    "validation_sample": 0,
    "budgets": [4],
    "debias_seeds": SEEDS,
    "debias_random_sets": 1,
    "edges": True,
    "edge_budgets": [0.05],
}


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=2, train_per_class=25)


@pytest.fixture(scope="module")
def adam_audit(graph: Graph) -> AuditResult:
    return run_audit(graph, AuditConfig.from_dict({**AUDIT, "debias_retrain": "adam"}))


def _stored(result: AuditResult) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    return doc


def test_the_setting_is_validated_round_trips_and_names_the_retraining() -> None:
    with pytest.raises(ConfigError, match="debias_retrain"):
        AuditConfig(debias_retrain="polish")
    with pytest.raises(ConfigError, match="debias_retrain"):
        AuditConfig.from_dict({"debias_retrain": "Adam"})
    config = AuditConfig(debias_retrain="adam")
    assert AuditConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert AuditConfig().debias_retrain == "audit" and AuditConfig().to_dict()["debias_retrain"] == "audit"
    assert AuditConfig().debias_training(CONFIG) is None
    assert config.debias_training(CONFIG) == ADAM


def test_debias_with_adam_compares_adam_only_retrains_before_and_after(graph: Graph) -> None:
    model = train(graph, CONFIG)
    assert model.stationarity.polished
    influence = estimate(model, graph).delta
    (row,) = debias(model, graph, influence, budgets=(4,), retrain=ADAM)
    unchanged = train(graph, ADAM)
    assert not unchanged.stationarity.polished
    assert row.before == report(unchanged, graph)
    assert row.before != report(model, graph)  # not the polished, audited model
    reduced, _ = graph.without_nodes(select(influence, graph, 4, "harmful", hops=1))
    assert row.after == report(train(reduced, ADAM), reduced)
    assert row.after != report(train(reduced, CONFIG), reduced)
    (own,) = debias(model, graph, influence, budgets=(4,))
    assert own.before == report(model, graph) and own.after == report(train(reduced, CONFIG), reduced)


def test_the_audit_retrains_with_adam_everywhere_in_debiasing(graph: Graph, adam_audit: AuditResult) -> None:
    doc = _stored(adam_audit)
    (row,) = doc["debiasing"]
    assert row["retrain"] == "adam"
    groups = metric_groups(graph, 0)
    assert row["before"] == json.loads(json.dumps(encode(report(train(graph, ADAM), graph, groups=groups))))
    baselines = seed_baselines(adam_audit.model, graph, SEEDS, groups=groups, retrain=ADAM)
    assert row["against_random"]["noise_floor"] == statistics.stdev(baselines.values())
    polished = seed_baselines(adam_audit.model, graph, SEEDS, groups=groups)
    assert row["against_random"]["noise_floor"] != statistics.stdev(polished.values())
    edges = doc["edges"]["debiasing"]
    assert edges["retrain"] == "adam"
    assert edges["baselines"] == {str(s): g for s, g in baselines.items()}
    typed = AuditResults.from_dict(doc)
    assert typed.to_dict() == doc and typed.debiasing is not None and typed.debiasing[0].retrain == "adam"


def test_the_default_audit_says_it_retrained_as_it_trains(graph: Graph) -> None:
    config = {**AUDIT, "edges": False, "debias_seeds": []}
    result = run_audit(graph, AuditConfig.from_dict(config))
    doc = _stored(result)
    (row,) = doc["debiasing"]
    assert result.model.stationarity.polished and row["retrain"] == "audit"
    assert row["before"] == json.loads(json.dumps(encode(report(result.model, graph, groups=metric_groups(graph, 0)))))
    html = render_report(doc)
    assert RETRAINING["audit"] in html and RETRAINING["adam"] not in html
    # the recipe in words, the polish named only where the recipe has it
    assert (
        "adam lr 0.01, weight decay 0.0001, 40 epochs, the best validation epoch&#39;s weights kept, then the polish"
        in html
    )
    unpolished = json.loads(json.dumps(doc))
    unpolished["debiasing"][0]["recipe"] |= {"polish": False, "keep": "last"}  # a supplied PyG model's recipe
    assert "40 epochs, the last epoch&#39;s weights kept, no polish" in render_report(unpolished)
    unpolished["debiasing"][0]["recipe"]["patience"] = 5  # early stopping keeps the best epoch
    assert "up to 40 epochs, early stopping after 5 epochs, the best validation epoch&#39;s" in render_report(
        unpolished
    )
    assert "then the polish" not in render_report(unpolished)
    legacy = json.loads(json.dumps(doc))
    del legacy["debiasing"][0]["retrain"]  # an audit stored before the setting: still typed, report says nothing
    assert AuditResults.from_dict(legacy).to_dict() == legacy
    assert RETRAINING["audit"] not in render_report(legacy)


def test_the_report_says_adam_alone(adam_audit: AuditResult) -> None:
    html = render_report(_stored(adam_audit))
    assert "retrained with Adam alone, stopping at the best validation epoch, as a user would train" in html
    assert html.count(RETRAINING["adam"]) == 2  # the node debiasing and the edge debiasing
    assert RETRAINING["audit"] not in html


def test_the_cost_estimate_counts_adam_only_retrains() -> None:
    size = GraphSize(nodes=1000, edges=5000, features=10, classes=2, train=200)
    base = {"debias_seeds": SEEDS, "budgets": [0.1], "edges": True}
    audit = audit_cost(AuditConfig.from_dict(base), size).work
    adam = audit_cost(AuditConfig.from_dict({**base, "debias_retrain": "adam"}), size).work
    assert adam["debiasing"] < audit["debiasing"] and adam["edge_debiasing"] < audit["edge_debiasing"]
    no_polish = audit_cost(AuditConfig.from_dict({**base, "training": {"polish": False}}), size).work
    retrains = 1 + len(SEEDS) + len(SEEDS) * (2 + 3)
    assert adam["debiasing"] == pytest.approx(no_polish["debiasing"] * (retrains + 1) / retrains)
    assert adam["edge_debiasing"] == pytest.approx(no_polish["edge_debiasing"])
    assert adam["training"] == audit["training"]


def test_the_command_line_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--synthetic", "--debias-retrain", "polish"])
    assert "invalid choice: 'polish'" in capsys.readouterr().err
    assert build_parser().parse_args(["--synthetic"]).debias_retrain == "audit"
    out = tmp_path / "audit.json"
    args = ["--synthetic", "--synthetic-nodes", "160", "--epochs", "30", "--budgets", "3", "--skip", "validation"]
    assert main([*args, "--bootstrap", "0", "--debias-retrain", "adam", "--quiet", "--json", str(out)]) == 0
    assert "retrained with Adam alone" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["config"]["debias_retrain"] == "adam" and doc["debiasing"][0]["retrain"] == "adam"
