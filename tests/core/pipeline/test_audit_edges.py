"""Edge attribution in the audit (issue 19): ``AuditConfig.edges`` adds the result's ``edges`` section (every
undirected edge attributed with the node estimate's own solve, the top harmful and helpful edges, the cross-group
summary), typed and round-tripped; a model the estimator does not cover gets the section with nulls and a reason;
the report draws it, the exports carry it and the command line prints it."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from typing import Any

import pyarrow.parquet as pq
import pytest
import torch

from bind_core.cli import main
from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import AuditCancelled
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.edge_rows import iter_edge_rows
from bind_core.influence.edges import estimate_edges, undirected_edges
from bind_core.pipeline import stages
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.pipeline.edge_section import EDGE_TOP
from bind_core.pipeline.results import AuditResults
from bind_core.reporting.exports import EDGE_COLUMNS, edges_csv, edges_parquet, model_card
from bind_core.reporting.report import render_report

torch.set_num_threads(1)

FAST: dict[str, Any] = {"training": {"epochs": 20}, "bootstrap": 0, "validation_sample": 0, "budgets": []}


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(100, seed=1, train_per_class=15)


@pytest.fixture(scope="module")
def audited(graph: Graph) -> AuditResult:
    return run_audit(graph, AuditConfig.from_dict({**FAST, "edges": True}))


def _stored(result: AuditResult) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    return doc


def test_the_section_attributes_every_edge_with_the_estimators_values(graph: Graph, audited: AuditResult) -> None:
    section = _stored(audited)["edges"]
    edges = undirected_edges(graph)
    assert section["computed"] and section["reason"] is None and section["shared_solve"] is True
    assert section["edges"] == edges.shape[0] == graph.num_edges
    # the same estimate made afresh (its own solve) gives the same numbers, edge for edge
    fresh = estimate_edges(audited.model, graph, lam=audited.config.lam)
    assert torch.equal(fresh.edges, edges)
    rows = audited.edge_rows()
    assert [r.position for r in rows] == list(range(edges.shape[0]))
    assert [[r.u_index, r.v_index] for r in rows] == edges.tolist()
    got = torch.tensor([r.delta for r in rows], dtype=torch.float64)
    assert torch.allclose(got, fresh.delta.double(), rtol=1e-6, atol=1e-9)
    assert section["affecting"] == int(fresh.affects.sum())
    assert section["harmful"] == int((got < 0).sum()) and section["helpful"] == int((got > 0).sum())
    sens = graph.sens
    for r in rows:
        assert r.within_group == (int(sens[r.u_index]) == int(sens[r.v_index]))
        assert (r.u_group, r.v_group) == (int(sens[r.u_index]), int(sens[r.v_index]))


def test_the_stage_in_small_parts_gives_the_same_estimates(
    graph: Graph, audited: AuditResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of 7 edges (progress and cancellation between them) join into the one-call estimate; a step estimate,
    which makes no plan, gets one linear plan for every part."""
    monkeypatch.setattr(stages, "EDGE_PART", 7)
    ticks: list[float] = []
    found = stages.edges_stage(
        audited.model, graph, audited.config, None, None, progress=lambda stage, f: ticks.append(f)
    )
    assert audited.edge_estimate is not None and found.estimate is not None
    assert torch.equal(found.estimate.edges, audited.edge_estimate.edges)
    assert torch.allclose(found.estimate.delta, audited.edge_estimate.delta, rtol=1e-9, atol=1e-12)
    assert torch.equal(found.estimate.affects, audited.edge_estimate.affects)
    assert len(ticks) == 1 + -(-graph.num_edges // 7) and ticks[-1] == 1.0 and ticks == sorted(ticks)
    assert found.section.shared_solve is False and found.section.edges == graph.num_edges


def test_the_audit_stops_between_parts(graph: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stages, "EDGE_PART", 7)
    calls: list[float] = []

    def progress(stage: str, fraction: float) -> bool:
        if stage == "edges":
            calls.append(fraction)
        return not (stage == "edges" and 0 < fraction < 1)

    with pytest.raises(AuditCancelled) as caught:
        run_audit(graph, AuditConfig.from_dict({**FAST, "edges": True}), progress=progress)
    assert caught.value.stage == "edges" and calls == [0.0, 7 / graph.num_edges]


def test_a_two_layer_audit_stops_during_the_first_order_pass(graph: Graph) -> None:
    """The damped edge estimate reports progress after every batch of edges (0.1 to 0.5 of the stage), so a
    cancelled audit stops there rather than after the whole pass."""
    calls: list[float] = []

    def progress(stage: str, fraction: float) -> bool:
        if stage == "edges":
            calls.append(fraction)
        return not (stage == "edges" and 0.1 < fraction < 0.5)

    training = {"epochs": 20, "polish": True}  # a stationary model: the top edges settle there
    config = AuditConfig.from_dict({**FAST, "training": training, "model": {"layers": 2, "hidden": 4}, "edges": True})
    with pytest.raises(AuditCancelled) as caught:
        run_audit(graph, config, progress=progress)
    assert caught.value.stage == "edges" and calls[:2] == [0.0, 0.1] and 0.1 < calls[-1] < 0.5


def test_a_graph_without_edges_has_null_shares_with_reasons(graph: Graph) -> None:
    bare = graph.without_edges(undirected_edges(graph))
    result = run_audit(bare, AuditConfig.from_dict({**FAST, "edges": True}))
    section = _stored(result)["edges"]
    assert section["computed"] and section["edges"] == 0 and section["top_harmful"] == []
    cross = section["cross_group"]
    assert cross["edge_share"] is None and cross["harm_share"] is None and set(cross["undefined"]) >= {
        "edge_share", "harm_share"
    }  # fmt: skip


def test_rows_made_in_batches_are_the_same_rows(graph: Graph, audited: AuditResult) -> None:
    assert audited.edge_estimate is not None
    rows = audited.edge_rows()
    assert list(iter_edge_rows(graph, audited.edge_estimate, batch=7)) == rows == list(audited.iter_edge_rows())


def test_the_top_edges_are_the_most_harmful_and_helpful_in_order(audited: AuditResult) -> None:
    section = _stored(audited)["edges"]
    rows = audited.edge_rows()
    harmful, helpful = section["top_harmful"], section["top_helpful"]
    assert 0 < len(harmful) <= 10 and 0 < len(helpful) <= 10
    deltas = [r["delta"] for r in harmful]
    assert deltas == sorted(deltas) and all(d < 0 for d in deltas)
    assert deltas[0] == min(r.delta for r in rows)
    assert [r["delta"] for r in helpful] == sorted((r["delta"] for r in helpful), reverse=True)
    assert helpful[0]["delta"] == max(r.delta for r in rows)
    by_position = {r.position: r for r in rows}
    for listed in harmful + helpful:
        assert listed == {k: v for k, v in encode(by_position[listed["position"]]).items() if k != "affects"}


def test_the_cross_group_summary_is_the_share_of_harm_on_cross_group_edges(audited: AuditResult) -> None:
    cross = _stored(audited)["edges"]["cross_group"]
    rows = audited.edge_rows()
    across = [r for r in rows if not r.within_group]
    harm = sum(-r.delta for r in rows if r.delta < 0)
    assert cross["edges"] == len(across)
    assert cross["edge_share"] == pytest.approx(len(across) / len(rows))
    affecting = [r for r in rows if r.affects]
    assert cross["affecting_share"] == pytest.approx(sum(not r.within_group for r in affecting) / len(affecting))
    assert cross["harm_share"] == pytest.approx(sum(-r.delta for r in across if r.delta < 0) / harm)
    assert cross["harm_ratio"] == pytest.approx(cross["harm_share"] / cross["affecting_share"])


def test_the_section_round_trips_typed(audited: AuditResult) -> None:
    doc = _stored(audited)
    typed = AuditResults.from_dict(doc)
    assert typed.to_dict() == doc and typed.edges is not None and typed.edges.edges == audited.graph.num_edges


@pytest.mark.heavy  # 5 s here
def test_a_two_layer_model_is_attributed_by_damped_steps(graph: Graph) -> None:
    """Multi-layer models get the damped estimate (bind_core.influence.deep_edges): every edge attributed, the
    top at each end settled (and flagged), the values those of a direct call, the section typed."""
    training = {"epochs": 20, "polish": True}  # a stationary model: the top edges settle there
    config = AuditConfig.from_dict({**FAST, "training": training, "model": {"layers": 2, "hidden": 4}, "edges": True})
    result = run_audit(graph, config)
    doc = _stored(result)
    section = doc["edges"]
    assert section["computed"] is True and section["reason"] is None
    assert section["edges"] == graph.num_edges and section["shared_solve"] is True
    assert section["estimator"].startswith("damped steps") and section["settled"] >= 2 * EDGE_TOP
    assert all(row["settled"] for row in section["top_harmful"] + section["top_helpful"])
    direct = estimate_edges_deep(result.model, graph, lam=config.lam)
    rows = result.edge_rows()
    assert len(rows) == graph.num_edges
    assert [r.delta for r in rows] == pytest.approx(direct.delta.tolist(), rel=1e-6, abs=1e-12)
    assert AuditResults.from_dict(doc).to_dict() == doc
    assert "Estimate: damped steps" in render_report(doc)


def test_without_influence_or_unasked_there_is_no_estimate(graph: Graph) -> None:
    metrics_only = run_audit(graph, AuditConfig.from_dict({**FAST, "stages": ["training", "metrics"], "edges": True}))
    section = _stored(metrics_only)["edges"]
    assert section["computed"] is False and "influence stage" in section["reason"]
    unasked = run_audit(graph, AuditConfig.from_dict(FAST))
    assert "edges" not in _stored(unasked) and unasked.edge_rows() == []


def test_the_report_draws_the_section(audited: AuditResult, graph: Graph) -> None:
    page = render_report(_stored(audited))
    assert "Which connections carry the bias" in page and "Most harmful connections" in page
    first = _stored(audited)["edges"]["top_harmful"][0]
    assert f"{first['u_id']} – {first['v_id']}" in page
    metrics_only = run_audit(graph, AuditConfig.from_dict({**FAST, "stages": ["training", "metrics"], "edges": True}))
    page = render_report(_stored(metrics_only))
    assert "Which connections carry the bias" in page and "Not computed: the influence stage did not run" in page
    assert "Which connections" not in render_report({k: v for k, v in _stored(audited).items() if k != "edges"})


def test_the_exports_carry_every_edge(audited: AuditResult) -> None:
    rows = audited.edge_rows()
    table = list(csv.DictReader(io.StringIO(edges_csv(rows).decode("utf-8"))))
    assert len(table) == len(rows) and tuple(table[0]) == EDGE_COLUMNS
    assert float(table[5]["delta"]) == rows[5].delta and table[5]["within_group"] in ("true", "false")
    parquet = pq.read_table(io.BytesIO(edges_parquet(rows))).to_pylist()
    assert parquet == [encode(r) for r in rows]
    card = model_card(_stored(audited))
    assert card.edges is not None and card.edges.edges == len(rows) and card.edges.top_harmful


def test_the_command_line_prints_the_top_edges(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--synthetic", "--synthetic-nodes", "150", "--epochs", "20", "--bootstrap", "0", "--budgets", ""]
    argv += ["--skip", "debiasing,validation", "--quiet", "--threads", "1", "--edge-attribution", "--top", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "edges (ΔΓ if the edge were deleted" in out and "cross-group edges:" in out
    line = next(x for x in out.splitlines() if x.startswith("  most harmful: ") and "–" in x)
    assert line.count("–") == 3
    shown = re.findall(r"\((within|across) ([^,]+), ", line)  # the endpoints' groups by name, not by code
    assert len(shown) == 3 and all(set(groups.split("/")) <= {"sens=0", "sens=1"} for _, groups in shown)


def test_text_ids_stay_as_the_user_wrote_them(graph: Graph) -> None:
    """A node table whose id column holds text: every edge's row, the section's lists, the JSON and the exports name
    the endpoints by those ids, as written (``"007"`` stays text, ``"user-3"`` does not crash)."""
    keys = tuple(f"00{i}" if i % 2 else f"user-{i}" for i in range(graph.num_nodes))
    keyed = dataclasses.replace(graph, node_keys=keys, node_id_column="uid")
    result = run_audit(keyed, AuditConfig.from_dict({**FAST, "edges": True}))
    rows = result.edge_rows()
    assert rows and all((r.u_id, r.v_id) == (keys[r.u_index], keys[r.v_index]) for r in rows)
    assert list(result.iter_edge_rows()) == rows
    section = _stored(result)["edges"]
    for listed in section["top_harmful"] + section["top_helpful"]:
        assert (listed["u_id"], listed["v_id"]) == (keys[listed["u_index"]], keys[listed["v_index"]])
    table = list(csv.DictReader(io.StringIO(edges_csv(rows).decode("utf-8"))))
    assert [(t["u_id"], t["v_id"]) for t in table] == [(r.u_id, r.v_id) for r in rows]
    assert pq.read_table(io.BytesIO(edges_parquet(rows))).to_pylist() == [encode(r) for r in rows]
    nodes = result.influence_rows()
    assert [n.node_id for n in nodes] == [keys[i] for i in keyed.train_idx.tolist()]
