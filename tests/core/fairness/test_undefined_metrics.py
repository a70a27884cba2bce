"""Undefined is not zero (issue 16): ΔEO and Γ_EO without two groups with positives are null with a reason,
bootstrap intervals leave out the resamples that cannot define a metric and count them, and probabilities
that are not finite are refused."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from app.audits.failures import problem_for
from bind_core.cli import main
from bind_core.codec import encode, json_safe
from bind_core.data.datasets import synthetic
from bind_core.debiasing.debias import report
from bind_core.errors import NonFiniteError
from bind_core.fairness.bootstrap import bootstrap_metrics, resample_weights
from bind_core.fairness.metrics import delta_eo, delta_sp, evaluate, worst_pairs
from bind_core.reporting.exports import model_card
from bind_core.reporting.report import render_report
from bind_core.training.fit import TrainConfig, train

torch.set_num_threads(1)


def _two_groups() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Six nodes; group 1 has no positive node. P(y=1) = 0.9, 0.2, 0.6 | 0.7, 0.1, 0.4."""
    p1 = torch.tensor([0.9, 0.2, 0.6, 0.7, 0.1, 0.4], dtype=torch.float64)
    y = torch.tensor([1, 1, 0, 0, 0, 0])
    sens = torch.tensor([0, 0, 0, 1, 1, 1])
    return torch.stack([1 - p1, p1], 1), y, sens


def test_eo_without_positives_in_a_group_is_null_with_a_reason() -> None:
    proba, y, sens = _two_groups()
    report = evaluate(proba, y, sens)
    assert math.isnan(report.delta_eo) and math.isnan(report.gamma_eo) and math.isnan(report.gamma)
    doc = encode(report.values())
    assert doc["delta_eo"] is None and doc["gamma_eo"] is None and doc["gamma"] is None
    assert "(group 1 has none)" in doc["undefined"]["delta_eo"]
    assert doc["undefined"]["gamma"].startswith("Γ_EO is undefined")
    # ΔSP and Γ_SP are defined: predicted positive rates 2/3 and 1/3; W1 of {0.9,0.2,0.6} and {0.7,0.1,0.4}.
    assert doc["delta_sp"] == pytest.approx(1 / 3) and doc["gamma_sp"] == pytest.approx(0.5 / 3)
    assert math.isnan(delta_eo(y, proba.argmax(1), sens))  # was 0.0: "perfectly fair"
    assert encode(evaluate(proba, y, sens, lam=1.0).values())["gamma"] == pytest.approx(0.5 / 3)  # Γ = Γ_SP at λ = 1
    assert math.isnan(delta_sp(proba.argmax(1), torch.zeros(6, dtype=torch.long)))  # one group: no gap
    one_group = encode(evaluate(proba, y, torch.zeros(6, dtype=torch.long), lam=0.0).values())
    assert one_group["delta_sp"] is None and one_group["gamma"] is None and "gamma_sp" in one_group["undefined"]


def test_the_reasons_speak_the_users_terms() -> None:
    """A label of numbers (three classes) and text groups: the audit's reasons name ``region=south`` and ``score=30``,
    never ``group(s) [1]`` or ``class 2``."""
    base = synthetic(120, seed=1)
    y = base.y.clone()
    test = base.test_idx
    order = torch.arange(test.numel())
    y[test] = torch.where(base.sens[test] == 0, order % 3, order % 2)  # class 2 ("30") only in group 0 among them
    y[base.train_idx[:10]] = 2
    graph = dataclasses.replace(
        base, y=y, label_name="score", class_names=("10", "20", "30"), sensitive=("region",),
        group_names=("north", "south"),
    )  # fmt: skip
    values = encode(report(train(graph, TrainConfig(epochs=2, polish=False)), graph))
    reason = values["undefined"]["delta_eo"]
    assert "a node of class score=30 (region=south has none)" in reason, reason
    assert "[1]" not in reason and "class 1" not in reason
    assert values["undefined"]["gamma"].startswith("Γ_EO is undefined: ")


def test_defined_metrics_carry_no_reason() -> None:
    proba, y, sens = _two_groups()
    y = torch.tensor([1, 0, 0, 1, 0, 0])
    doc = encode(evaluate(proba, y, sens).values())
    assert "undefined" not in doc and doc["delta_eo"] == pytest.approx(0.0)  # both TPRs 1: a real 0


def test_worst_pairs_skip_pairs_that_cannot_define_a_metric() -> None:
    p1 = torch.tensor([0.9, 0.2, 0.8, 0.4, 0.6, 0.7], dtype=torch.float64)
    y = torch.tensor([1, 0, 1, 1, 0, 0])
    sens = torch.tensor([0, 0, 1, 1, 2, 2])  # group 2: no positive
    worst = worst_pairs(torch.stack([1 - p1, p1], 1), y, sens)
    eo, sp = worst["delta_eo"], worst["delta_sp"]
    assert eo is not None and eo.value == pytest.approx(0.5) and eo.groups == [0, 1]  # TPRs 1 and 1/2
    assert sp is not None and sp.value == pytest.approx(0.5) and sp.groups == [0, 2]  # positive rates 1/2, 1/2, 1


def _three_positives(k: int = 50) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Group 1 has 3 positive nodes of 10 (all predicted positive); group 0 detects half of its 20 positives."""
    gen = torch.Generator().manual_seed(0)
    sens = torch.tensor([0] * 40 + [1] * 10)
    y = torch.tensor([1] * 20 + [0] * 20 + [1] * 3 + [0] * 7)
    p1 = torch.rand(k, generator=gen, dtype=torch.float64) * 0.4
    p1[:10] += 0.55  # half of group 0's positives predicted positive
    p1[40:43] = 0.9
    return torch.stack([1 - p1, p1], 1), y, sens


def test_bootstrap_leaves_out_resamples_without_positives_and_counts_them() -> None:
    proba, y, sens = _three_positives()
    intervals = bootstrap_metrics(proba, y, sens, resamples=1000, seed=3)
    # The resamples are drawn for the nodes sorted by P(y=1): count those that drew none of group 1's positives.
    order = torch.argsort(proba[:, 1], stable=True)
    weights = resample_weights(50, 1000, seed=3, dtype=torch.float32)
    lost = int((weights[:, ((sens == 1) & (y == 1))[order]].sum(1) == 0).sum())
    assert 20 < lost < 80  # (1 − 3/50)^50 ≈ 4.5%
    assert intervals["delta_eo"].dropped == lost and intervals["gamma_eo"].dropped == lost
    assert intervals["delta_sp"].dropped == 0 and intervals["accuracy"].dropped == 0
    # Counted as 0, those resamples pinned the lower bound at 0; the true-positive rates are 1 and 0.5.
    assert intervals["delta_eo"].estimate == pytest.approx(0.5) and intervals["delta_eo"].low > 0.2
    assert encode(intervals["delta_eo"].record())["dropped"] == lost


def test_undefined_estimates_have_no_interval() -> None:
    proba, y, sens = _two_groups()
    intervals = bootstrap_metrics(proba, y, sens, resamples=50)
    assert encode(intervals["delta_eo"].record()) == {"estimate": None, "low": None, "high": None, "dropped": 50}
    assert encode(intervals["delta_sp"].record())["estimate"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_probabilities_are_refused(bad: float) -> None:
    proba, y, sens = _two_groups()
    proba[3, 1] = bad
    with pytest.raises(NonFiniteError, match=r"1 of 6 rows are not finite .* the first is row 3"):
        evaluate(proba, y, sens)
    with pytest.raises(NonFiniteError):
        bootstrap_metrics(proba, y, sens, resamples=10)


def test_a_model_predicting_nan_is_refused_not_read_as_class_0() -> None:
    graph = synthetic(120, seed=1)
    model = train(graph, TrainConfig(epochs=2, polish=False))
    with torch.no_grad():
        next(model.module.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="the model's predicted probabilities"):
        model.predict_proba(graph)
    problem = problem_for(NonFiniteError("x"), audit_id="a")
    assert problem["type"].endswith("/model-output-not-finite") and problem["status"] == 422


def test_command_line_reports_dropped_resamples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--synthetic --nodes 200`` with seed 10 has a group with 3 positive test nodes (of 50 test nodes)."""
    out = tmp_path / "audit.json"
    args = ["--synthetic", "--nodes", "200", "--epochs", "30", "--skip", "influence,debiasing,validation"]
    assert main([*args, "--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    ci = doc["metrics"]["intervals"]
    assert 10 < ci["delta_eo"]["dropped"] == ci["gamma_eo"]["dropped"] < 100 and ci["accuracy"]["dropped"] == 0
    assert "resamples used" in text and str(1000 - ci["delta_eo"]["dropped"]) in text
    used = 1000 - ci["delta_eo"]["dropped"]
    assert f"ΔEO's, Γ_EO's and Γ's intervals rest on {used} of 1000 bootstrap resamples" in "\n".join(doc["warnings"])
    html = render_report(doc)
    assert f"({ci['delta_eo']['dropped']} undefined)" in html


def _results_around(test: dict[str, Any]) -> dict[str, Any]:
    """The smallest whole results document (a metrics-only audit of six test nodes) around these test metrics."""
    graph = {
        "name": "six",
        "nodes": 6,
        "edges": 0,
        "features": 1,
        "classes": 2,
        "groups": 2,
        "group_sizes": [3, 3],
        "group_names": ["0", "1"],
        "class_sizes": [3, 3],
        "unlabeled": 0,
        "train": 0,
        "val": 0,
        "test": 6,
    }
    histograms = {"bin_edges": [0.0, 1.0], "all": {"0": [3], "1": [3]}, "positives": {"0": [2], "1": [0]}}
    metrics = {"test": dict(test, worst_pairs={}), "groups": [], "included_groups": [0, 1], "histograms": histograms}
    return {
        "metrics": metrics,
        **dict.fromkeys(("influence_summary", "top_harmful", "top_helpful", "debiasing", "validation", "stability",
                         "refinement")),
        "stationarity": {}, "training": {}, "model": {"parameters": 1}, "graph": graph, "timings": {}, "device": "cpu",
        "warnings": [], "sign_convention": "negative: harmful",
    }  # fmt: skip


def test_export_and_report_show_undefined_metrics() -> None:
    proba, y, sens = _two_groups()
    test = encode(evaluate(proba, y, sens).values())
    results = _results_around(test)
    card: Any = json_safe(model_card(results, audit_id="x").to_dict())
    entries = {e["type"]: e for e in card["quantitative_analysis"]["performance_metrics"]}
    assert entries["delta_eo"]["value"] is None and "has none" in entries["delta_eo"]["undefined"]
    assert "undefined" in render_report(results)
