"""Edge debiasing in the audit: with ``edges``, ``debias_seeds`` and the debiasing stage the ``edges`` section gets
``debiasing`` (one row per edge budget, each checked against random edges), the same as calling
:func:`bind_core.debiasing.edge_debias.debias_edges` directly; otherwise a reason; typed, rendered, validated,
stoppable."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from planted_graphs import planted_cross_group_edges

from bind_core.cli import main
from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.edge_debias import debias_edges
from bind_core.errors import AuditCancelled, ConfigError
from bind_core.explain.summary import edge_lines
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.pipeline.budget import GraphSize, audit_cost
from bind_core.pipeline.results import AuditResults
from bind_core.pipeline.stages import EDGE_DEBIASING, metric_groups
from bind_core.reporting.report import render_report

torch.set_num_threads(1)

SEEDS = [1, 10, 100]
BASE: dict[str, Any] = {
    "training": {"epochs": 200, "seed": 0},
    "bootstrap": 0,
    "validation_sample": 0,
    "budgets": [1],
    "edges": True,
    "edge_budgets": [0.01, 0.05],
    "debias_random_sets": 2,
}


@pytest.fixture(scope="module")
def graph() -> Graph:
    return planted_cross_group_edges()[0]


@pytest.fixture(scope="module")
def audited(graph: Graph) -> AuditResult:
    return run_audit(graph, AuditConfig.from_dict({**BASE, "debias_seeds": SEEDS}))


def _stored(result: AuditResult) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    return doc


@pytest.mark.heavy  # 22 s here
def test_the_audit_debiases_the_edges_as_a_direct_call_does(graph: Graph, audited: AuditResult) -> None:
    section = _stored(audited)["edges"]
    assert section["computed"] and "debiasing_reason" not in section
    found = section["debiasing"]
    rows = found["budgets"]
    assert [r["budget"] for r in rows] == [0.01, 0.05]
    for row in rows:
        assert 0 <= row["deleted"] <= row["requested"] and row["verdict"]
        assert row["size"] == row["deleted"] and row["seeds"] == SEEDS
    assert rows[1]["deleted"] > 0 and rows[1]["selected"] is not None and len(rows[1]["random"]["sets"]) == 2
    assert audited.edge_estimate is not None
    direct = debias_edges(
        audited.model, graph, audited.edge_estimate, (0.01, 0.05), SEEDS, random_sets=2,
        groups=metric_groups(graph, 0), seed=0,
    )  # fmt: skip
    assert json.loads(json.dumps(encode(direct)["budgets"])) == rows
    assert found["pool"] == direct.pool and found["noise_floor"] == direct.noise_floor
    assert found["baselines"] == direct.baselines
    assert EDGE_DEBIASING in audited.timings


def test_the_section_round_trips_typed(audited: AuditResult) -> None:
    doc = _stored(audited)
    typed = AuditResults.from_dict(doc)
    assert typed.to_dict() == doc
    assert typed.edges is not None and typed.edges.debiasing is not None
    assert typed.edges.debiasing.budgets[1].cross_group == doc["edges"]["debiasing"]["budgets"][1]["cross_group"]


def test_without_seeds_or_the_debiasing_stage_there_is_a_reason(graph: Graph) -> None:
    fast = {**BASE, "training": {"epochs": 20, "seed": 0}}
    no_seeds = _stored(run_audit(graph, AuditConfig.from_dict(fast)))["edges"]
    assert "debiasing" not in no_seeds and "debias_seeds" in no_seeds["debiasing_reason"]
    skipped = AuditConfig.from_dict({**fast, "debias_seeds": SEEDS, "stages": ["training", "metrics", "influence"]})
    doc = _stored(run_audit(graph, skipped))
    section = doc["edges"]
    assert "debiasing" not in section and "debiasing stage" in section["debiasing_reason"]
    assert AuditResults.from_dict(doc).to_dict() == doc


@pytest.mark.heavy  # 5 s here
def test_edges_are_debiased_without_node_budgets(graph: Graph) -> None:
    config = AuditConfig.from_dict(
        {**BASE, "training": {"epochs": 20, "seed": 0}, "budgets": [], "edge_budgets": [0.01], "debias_seeds": SEEDS}
    )
    doc = _stored(run_audit(graph, config))
    assert not doc["debiasing"] and len(doc["edges"]["debiasing"]["budgets"]) == 1


@pytest.mark.heavy  # 4 s here
def test_the_audit_stops_between_retrainings(graph: Graph) -> None:
    seen: list[float] = []

    def progress(stage: str, fraction: float) -> bool:
        if stage == EDGE_DEBIASING:
            seen.append(fraction)
            return len(seen) < 3
        return True

    config = AuditConfig.from_dict({**BASE, "training": {"epochs": 20, "seed": 0}, "debias_seeds": SEEDS})
    with pytest.raises(AuditCancelled):
        run_audit(graph, config, progress=progress)
    assert len(seen) == 3 and seen[-1] < 1


def test_edge_budgets_are_validated_and_costed() -> None:
    for bad in ([0.0], [1.5], [-0.1]):
        with pytest.raises(ConfigError, match="edge_budgets"):
            AuditConfig.from_dict({"edge_budgets": bad})
    assert AuditConfig().edge_budgets == (0.0025, 0.01)
    config = AuditConfig.from_dict({"edges": True, "debias_seeds": SEEDS, "edge_budgets": [0.01]})
    assert AuditConfig.from_dict(config.to_dict()) == config
    size = GraphSize(nodes=300, edges=1000, features=10, classes=2, train=60)
    assert audit_cost(config, size).work["edge_debiasing"] > 0
    assert "edge_debiasing" not in audit_cost(AuditConfig.from_dict({"edges": True}), size).work


def test_the_report_draws_the_table(audited: AuditResult) -> None:
    doc = _stored(audited)
    page = render_report(doc)
    assert "Does deleting these edges help more than deleting any edges?" in page
    row = doc["edges"]["debiasing"]["budgets"][1]
    assert row["verdict"] in page
    assert f"{row['deleted']} / {row['requested']}" in page
    assert "In brackets after Γ" not in page  # no bootstrap: no interval, nothing said of one


def test_a_budgets_change_over_the_test_nodes_is_shown_with_its_interval(audited: AuditResult) -> None:
    """With the bootstrap, Γ after carries the interval of its mean change over resampled test nodes, in the report
    (with what the brackets are) and in the command line's line."""
    doc = _stored(audited)
    section = doc["edges"]
    band = {"estimate": -0.0123, "low": -0.0201, "high": -0.0045, "dropped": 0}
    change = {"level": 0.95, "resamples": 200, "gamma": band}
    rows = [{**r, "change": change if r["deleted"] else None} for r in section["debiasing"]["budgets"]]
    shown = {**doc, "edges": {**section, "debiasing": {**section["debiasing"], "budgets": rows}}}
    page = render_report(shown)
    assert f"{rows[1]['after']:.4f} [-0.0201, -0.0045]" in page
    assert "In brackets after Γ, the 95% interval of its change (the mean over the seeds) over 200 resamples" in page
    assert "within their sampling noise" not in page  # an interval clear of 0
    line = next(x for x in edge_lines(shown["edges"], []) if x.startswith("  edge debiasing 5%"))
    assert "(change -0.0123, 95% [-0.0201, -0.0045] over resampled test nodes)" in line
    wide = {**change, "gamma": {**band, "high": 0.002}}
    rows = [{**r, "change": wide if r["deleted"] else None} for r in rows]
    shown["edges"]["debiasing"] = {**section["debiasing"], "budgets": rows}
    line = next(x for x in edge_lines(shown["edges"], []) if x.startswith("  edge debiasing 5%"))
    assert "[-0.0201, +0.0020] over resampled test nodes: within their noise)" in line
    said = "; over the test nodes its change&#39;s interval reaches 0: within their sampling noise"
    verdict = rows[1]["verdict"] + said
    assert verdict in render_report(shown)  # the verdict, judged on the seeds' noise, says what the test nodes add


@pytest.mark.heavy  # 23 s here
def test_the_command_line_prints_a_verdict_per_edge_budget(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--synthetic", "--synthetic-nodes", "150", "--epochs", "20", "--bootstrap", "0", "--budgets", "1"]
    argv += ["--skip", "validation", "--quiet", "--threads", "1", "--edge-attribution", "--debias-seeds", "1,10,100"]
    argv += ["--edge-budgets", "0.01,0.05"]
    assert main(argv) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("  edge debiasing ")]
    assert [x.split(":")[0] for x in lines] == ["  edge debiasing 1%", "  edge debiasing 5%"]
    assert all(x.split(": ", 1)[1].strip() for x in lines)


def test_the_report_shows_a_caveat_and_why_edges_were_not_debiased(audited: AuditResult) -> None:
    doc = _stored(audited)
    section = doc["edges"]
    rows = [{**section["debiasing"]["budgets"][0], "caveat": "the summed estimates exceed Γ"}]
    caveated = {**doc, "edges": {**section, "debiasing": {**section["debiasing"], "budgets": rows}}}
    assert "Caveat, 1%: the summed estimates exceed Γ" in render_report(caveated)
    uncaveated = [{**r, "caveat": None} for r in section["debiasing"]["budgets"]]
    calm = [{**r, "backfired": []} for r in doc.get("debiasing") or []]  # the node budgets' own caveats aside
    plain = {
        **doc,
        "debiasing": calm,
        "edges": {**section, "debiasing": {**section["debiasing"], "budgets": uncaveated}},
    }
    assert "Caveat," not in render_report(plain)
    unchecked = {k: v for k, v in section.items() if k != "debiasing"} | {"debiasing_reason": "no seeds given"}
    page = render_report({**doc, "edges": unchecked})
    assert "Does deleting these edges help" in page and "Not checked: no seeds given." in page


@pytest.mark.heavy  # 5 s here
def test_a_two_layer_model_debiases_its_edges_too() -> None:
    """The damped edge estimate of a two-layer GCN feeds edge debiasing as the one-layer estimate does: every budget
    reaches a verdict against random edges, retrained with every seed (a small graph: this checks the plumbing, the
    benchmarks measure the effect)."""
    small = synthetic(100, seed=1, train_per_class=15)
    config = {
        **BASE, "training": {"epochs": 30, "seed": 0}, "model": {"layers": 2, "hidden": 4}, "budgets": [],
        "edge_budgets": [0.05], "debias_random_sets": 1, "debias_seeds": [1, 2, 3],
    }  # fmt: skip
    doc = _stored(run_audit(small, AuditConfig.from_dict(config)))
    section = doc["edges"]
    assert section["settled"] and "debiasing_reason" not in section
    (row,) = section["debiasing"]["budgets"]
    assert row["deleted"] > 0 and row["verdict"] and row["seeds"] == [1, 2, 3]
    assert AuditResults.from_dict(doc).to_dict() == doc
