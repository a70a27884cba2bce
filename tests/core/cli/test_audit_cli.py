"""The audit facade and the `bind-audit run` command line on a small synthetic graph."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch_geometric.nn import models

from bind_core.cli import main
from bind_core.data.datasets import synthetic
from bind_core.errors import ConfigError
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit, warnings_for
from bind_core.training.fit import TrainConfig


def test_config_roundtrip_and_errors() -> None:
    cfg = AuditConfig(model=ModelConfig(arch="gin", layers=2), training=TrainConfig(epochs=7), budgets=(0.05, 3))
    assert AuditConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert AuditConfig.from_dict({}) == AuditConfig()
    bad_configs = ({"lam": 2}, {"solver": "newton"}, {"budgets": [1.5]}, {"stages": ["x"]}, {"colour": 1}, {"level": 1})
    for bad in bad_configs:
        with pytest.raises(ConfigError):
            AuditConfig.from_dict(bad)
    with pytest.raises(ConfigError, match="arch"):
        AuditConfig.from_dict({"model": {"arch": "mlp"}})


def test_run_audit_produces_every_block() -> None:
    graph = synthetic(300, seed=5, train_per_class=40)
    stages: list[str] = []
    result = run_audit(
        graph,
        AuditConfig(training=TrainConfig(epochs=60), budgets=(0.1,), validation_sample=8),
        progress=lambda stage, frac: stages.append(stage),
    )
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["metrics"]["test"]["nodes"] == graph.test_idx.numel()
    assert len(doc["metrics"]["groups"]) == 2
    ci = doc["metrics"]["intervals"]
    assert ci["level"] == 0.95 and ci["accuracy"]["low"] <= ci["accuracy"]["estimate"] <= ci["accuracy"]["high"]
    assert doc["influence_summary"]["count"] == graph.train_idx.numel()
    assert len(doc["debiasing"]) == 1 and doc["validation"]["count"] == 8
    assert set(doc["timings"]) == {"training", "metrics", "influence", "debiasing", "validation"}
    assert "negative" in doc["sign_convention"]
    assert list(dict.fromkeys(stages)) == ["training", "metrics", "influence", "debiasing", "validation"]
    rows = result.influence_rows()
    assert [r.position for r in rows] == list(range(graph.train_idx.numel()))
    assert all(r["delta"] < 0 for r in doc["top_harmful"])


def test_stages_can_be_skipped() -> None:
    graph = synthetic(200, seed=1)
    result = run_audit(graph, AuditConfig(training=TrainConfig(epochs=20), stages=("training", "metrics")))
    assert result.influence is None and result.influence_rows() == []
    assert result.to_dict()["influence_summary"] is None


def test_small_groups_are_flagged() -> None:
    graph = synthetic(200, seed=1)
    assert warnings_for(graph)  # a 200-node graph has far fewer than 30 positives per group in its test split


def test_command_line_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "audit.json"
    args = ["--synthetic", "--synthetic-nodes", "300", "--epochs", "40", "--validation-sample", "6", "--budgets", "0.1"]
    code = main([*args, "--quiet", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "test metrics" in text and "most harmful" in text and "self-check" in text
    assert "what the harmful nodes have in common" in text and "harmful set:" in text
    doc = json.loads(out.read_text())
    assert doc["profile"]["sets"]["all"]["nodes"] == doc["graph"]["train"]
    assert len(doc["influence"]) == doc["graph"]["train"]
    assert {"node_id", "delta", "delta_sp", "delta_eo"} <= set(doc["influence"][0])
    assert doc["validation"]["pearson"] is not None and "spearman" in doc["validation"]
    assert doc["config"]["budgets"] == [0.1]
    assert doc["config"]["training"]["polish"] is True  # the config it ran with: the paper's GCN is polished
    # the verdict first, in the user's terms; per-group rates; the check against chance ran by default (cheap here)
    assert text.startswith("VERDICT\n") and text.splitlines()[1].strip() == doc["summary"]["verdict"]
    assert "sens=0" in text and "per group (%)" in text and "95% lower" in text and "95% upper" in text
    row = doc["debiasing"][0]
    assert "ran by default" in row["chance_rule"] and row["against_random"] is not None
    assert doc["summary"]["debiasing"]["chance_checked"] is True


@pytest.mark.heavy  # 15 s here
def test_command_line_two_layer_audit_with_the_check_against_chance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "audit.json"
    args = ["--synthetic", "--synthetic-nodes", "200", "--epochs", "40", "--layers", "2", "--hidden", "4"]
    args += ["--budgets", "3", "--polish", "on"]  # 40 epochs leave no model to speak of: polished, a stationary one
    code = main([*args, "--validation-sample", "5", "--debias-seeds", "1,2,3", "--quiet", "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "against chance:" in text and "estimate vs proximal Bregman response" in text
    doc = json.loads(out.read_text())
    assert doc["config"]["estimator"] == "auto" and doc["config"]["debias_seeds"] == [1, 2, 3]
    assert doc["influence_summary"]["solver_details"]["method"] == "step"
    check = doc["debiasing"][0]["against_random"]
    assert check["seeds"] == [1, 2, 3] and len(check["random"]["sets"]) == 3 and isinstance(check["beats_random"], bool)


def test_command_line_reports_a_missing_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dataset", "income", "--data-root", str(tmp_path), "--quiet"]) == 2
    assert "income" in capsys.readouterr().err


@pytest.mark.heavy  # 5 s here
@pytest.mark.parametrize("shape", [{"num_groups": 3}, {"num_classes": 3}, {"num_classes": 3, "num_groups": 3}])
def test_multi_group_and_multi_class_audits(shape: dict[str, int]) -> None:
    graph = synthetic(400, seed=2, train_per_class=40, **shape)
    result = run_audit(graph, AuditConfig(training=TrainConfig(epochs=30), budgets=(0.1,), validation_sample=0))
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["metrics"]["test"]["gamma"] > 0
    assert doc["influence_summary"]["count"] == graph.train_idx.numel()
    assert result.influence is not None and bool(result.influence.delta.isfinite().all())
    assert len(doc["metrics"]["groups"]) == graph.num_groups


def test_command_line_audits_a_pyg_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = synthetic(200, seed=1)
    args = {"in_channels": graph.num_features, "hidden_channels": 4, "num_layers": 1, "out_channels": 2}
    torch.manual_seed(0)
    pyg = models.GCN(**args)
    optimizer = torch.optim.Adam(pyg.parameters(), lr=0.05, weight_decay=1e-3)
    for _ in range(50):
        optimizer.zero_grad()
        F.cross_entropy(pyg(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    save_file(pyg.state_dict(), tmp_path / "gcn.safetensors")
    training = {"loss": "cross_entropy", "weight_decay": 1e-3, "epochs": 30, "lr": 0.05}
    config = {"format": "torch_geometric", "class": "GCN", "args": args, "training": training}
    (tmp_path / "gcn.json").write_text(json.dumps(config))
    files = ["--model-weights", str(tmp_path / "gcn.safetensors"), "--model-config", str(tmp_path / "gcn.json")]
    out = tmp_path / "audit.json"
    base = ["--synthetic", "--nodes", "200", "--seed", "1", "--validation-sample", "5", "--budgets", "1", "--quiet"]
    assert main([*base, *files, "--bootstrap", "0", "--json", str(out)]) == 0
    assert "read from a PyG GCN" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["supplied_model"]["pyg"]["max_logit_difference"] <= 1e-6
    assert doc["model"]["head"] is False and doc["model"]["outputs"] == 2
    assert doc["config"]["training"]["weight_decay"] == 1e-3  # the supplied model's objective
    fit = doc["supplied_model"]["training_fit"]  # a model that fits its training nodes is not flagged
    assert fit["no_better"] is False and fit["loss"] < fit["constant"] and fit["accuracy"] > fit["majority"], fit
    assert not any("no better than a constant" in w for w in doc["warnings"])
    # the config describes the model audited (its architecture and recipe), with the audit's own --seed
    assert (doc["config"]["model"]["arch"], doc["config"]["model"]["hidden"], doc["config"]["model"]["head"]) == (
        "gcn",
        4,
        False,
    )
    assert (doc["config"]["training"]["epochs"], doc["config"]["training"]["seed"]) == (30, 1)
    assert main([*base, *files[:2]]) == 2
    assert "--model-config" in capsys.readouterr().err
    # the options of a model the audit trains are refused with a supplied one, before the graph is read
    assert main([*base, *files, "--layers", "2", "--epochs", "5"]) == 2
    said = capsys.readouterr().err
    assert said.strip().splitlines()[-1].startswith("bind-audit run: error: --layers, --epochs describe a model the")


def test_command_line_audits_a_supplied_model_on_the_tables_own_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model trained on a node table's own feature values is audited on them (``--scale auto`` leaves them as
    given with ``--model-weights``): its accuracy is its own; ``--scale on`` audits it on scaled inputs and warns."""
    graph = synthetic(200, seed=1)
    raw = graph.x.double() * 10 + 5  # a table whose values are far from [-1, 1]
    split = ["train" if i in set(graph.train_idx.tolist()) else "" for i in range(graph.num_nodes)]
    for name, idx in (("val", graph.val_idx), ("test", graph.test_idx)):
        for i in idx.tolist():
            split[i] = name
    table = pd.DataFrame(raw.numpy(), columns=[f"f{j}" for j in range(graph.num_features)])
    table["group"], table["label"], table["part"] = graph.sens.numpy(), graph.y.numpy(), split
    table.to_csv(tmp_path / "nodes.csv", index=False)
    edges = graph.edge_index.T.tolist()
    (tmp_path / "edges.txt").write_text("".join(f"{a} {b}\n" for a, b in edges))
    args = {"in_channels": graph.num_features, "hidden_channels": 4, "num_layers": 1, "out_channels": 2}
    torch.manual_seed(0)
    pyg = models.GCN(**args)
    optimizer = torch.optim.Adam(pyg.parameters(), lr=0.01, weight_decay=1e-3)
    for _ in range(40):
        optimizer.zero_grad()
        F.cross_entropy(pyg(raw.float(), graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    with torch.no_grad():
        own = pyg.double()(raw, graph.edge_index).argmax(1)[graph.test_idx]
    own_accuracy = float((own == graph.y[graph.test_idx]).double().mean())
    save_file(pyg.float().state_dict(), tmp_path / "gcn.safetensors")
    training = {"loss": "cross_entropy", "weight_decay": 1e-3, "epochs": 40, "lr": 0.01}
    (tmp_path / "gcn.json").write_text(
        json.dumps({"format": "torch_geometric", "class": "GCN", "args": args, "training": training})
    )
    features = ",".join(f"f{j}" for j in range(graph.num_features))
    base = [
        "--table", str(tmp_path / "nodes.csv"), "--edges", str(tmp_path / "edges.txt"), "--label", "label",
        "--sensitive", "group", "--features", features, "--split", "part", "--skip", "influence", "--bootstrap", "0",
        "--model-weights", str(tmp_path / "gcn.safetensors"), "--model-config", str(tmp_path / "gcn.json"), "--quiet",
    ]  # fmt: skip
    out = tmp_path / "audit.json"
    assert main([*base, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["metrics"]["test"]["accuracy"] == pytest.approx(own_accuracy, abs=1e-12)
    assert doc["graph"]["features_scaled"] is False and not any("min-max" in w for w in doc["warnings"])
    assert main([*base, "--scale", "on", "--json", str(out)]) == 0
    said = capsys.readouterr()
    assert "read: the 8 feature column(s) min-max scaled" in said.err
    doc = json.loads(out.read_text())
    assert doc["graph"]["features_scaled"] is True and any("min-max scaled" in w for w in doc["warnings"])
    # on inputs it never saw it fits its own training nodes no better than a constant, and the audit says so first
    fit = doc["supplied_model"]["training_fit"]
    assert fit["no_better"] is True and fit["loss"] >= fit["constant"], fit
    assert "CHECK ITS INPUTS" in said.out and any("no better than a constant" in w for w in doc["warnings"])
    # its verdict is withheld, the gap as measured after the reason
    summary = doc["summary"]
    assert summary["withheld"].startswith("on its own training nodes the model does no better than a constant")
    verdict = summary["verdict"]
    assert verdict.startswith("No verdict: on its own training nodes") and "As measured: " in verdict
    # and on stderr as soon as it is known, before the estimate would run (in time to stop it)
    assert any(line.startswith("warning: ") and "no better than a constant" in line for line in said.err.splitlines())
    assert main(["--synthetic", "--nodes", "200", "--scale", "off"]) == 2
    assert "--scale applies only to --table" in capsys.readouterr().err
