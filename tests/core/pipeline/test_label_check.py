"""A label of many classes with few nodes each (a continuous column chosen as the label): the audit runs, but its
warnings and its verdict say that the fairness figures then describe single values."""

from __future__ import annotations

import dataclasses

import torch

from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.label_check import many_classes

torch.set_num_threads(1)


def test_many_classes_with_few_nodes_each_is_said_and_a_few_classes_are_not() -> None:
    found = many_classes("income", [f"{20 + i / 4:g}" for i in range(40)], [3] * 40)
    assert found is not None and "40 classes with a median of 3 labelled node(s)" in found
    assert "look continuous" in found and "income=29.75" in found
    assert "look continuous" not in (many_classes("job", [f"job{i}" for i in range(12)], [5] * 12) or "")
    assert many_classes("approved", ["0", "1"], [3, 4]) is None  # two classes: an outcome
    assert many_classes("grade", [str(i) for i in range(12)], [500] * 12) is None  # many nodes per class


def test_the_audit_of_a_continuous_label_warns_and_gives_no_verdict() -> None:
    base = synthetic(240, seed=2)
    y = torch.arange(base.num_nodes) % 12  # 12 "values", 20 nodes each
    names = tuple(f"{30 + 1.25 * c:g}" for c in range(12))
    graph = dataclasses.replace(base, y=y, label_name="income", class_names=names)
    config = AuditConfig.from_dict({"training": {"epochs": 5}, "stages": ["training", "metrics"], "bootstrap": 0})
    doc = run_audit(graph, config).to_dict()
    assert any(w.startswith("the label 'income' has 12 classes with a median of") for w in doc["warnings"])
    verdict = doc["summary"]["verdict"]
    assert verdict.startswith("No verdict: the label 'income' has 12 classes"), verdict
    assert "look continuous" in verdict and "As measured: " in verdict and not verdict.startswith("Biased")
