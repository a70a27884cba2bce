"""A node whose deletion has no minimum near the given weights has no ΔΓ: its row's deltas are null with
``no_minimum: true``, and everything that reads the estimates leaves it out rather than read a number: the summary,
the top lists, the profile, the self-check's sample, the what-if's ranking and the debiasing's choice; the CSV and
Parquet files, the reports and the JSON say so. First on a model far from trained, where nearly every deletion has
none, through the whole audit; then node by node on an audit whose rows are marked so."""

from __future__ import annotations

import dataclasses
import io
import json

import pyarrow.parquet as pq
import pytest
import torch

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.debiasing.debias import _Choice
from bind_core.debiasing.validation import _deletions
from bind_core.debiasing.what_if import choose, estimate_set
from bind_core.errors import ConfigError
from bind_core.explain.profile import profile_nodes
from bind_core.influence.records import InfluenceRow
from bind_core.influence.result import InfluenceResult
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.reporting.exports import influence_csv, influence_parquet
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render
from bind_core.training.fit import TrainConfig


@pytest.fixture(scope="module")
def far_from_trained() -> AuditResult:
    """20 Adam epochs leave a two-layer GCN near its initialisation: its deletions' own losses outgrow the damping
    (tests/core/influence/test_finish.py); every stage runs."""
    config = AuditConfig(
        model=ModelConfig(layers=2, hidden=4),
        training=TrainConfig(epochs=20),
        bootstrap=0,
        budgets=(0.1,),
        validation_sample=5,
    )
    return run_audit(synthetic(100, seed=1, train_per_class=15), config)


@pytest.mark.heavy  # ~25 s here
def test_an_audit_of_a_model_far_from_trained_gives_reasons_not_numbers(far_from_trained: AuditResult) -> None:
    result = far_from_trained
    inf = result.influence
    assert inf is not None and inf.no_minimum is not None
    far = int(inf.no_minimum.sum())
    assert far == inf.solve.details["no_minimum"] >= 25  # measured: 30 of 30
    rows = result.influence_rows()
    for row in rows:
        assert (row.no_minimum is True) == (row.delta is None) == (row.delta_sp is None) == (row.delta_eo is None)
        assert row.no_minimum is None or row.settled is False
    document = result.to_dict()
    json.dumps(document, allow_nan=False)  # no NaN leaks into the JSON
    summary = document["influence_summary"]
    assert summary["undefined"] == far and summary["count"] == len(rows)
    warnings = " ".join(document["warnings"])
    assert f"{far} of {len(rows)} nodes' deletions have no minimum near the given weights" in warnings
    assert result.debiasing is not None
    gone = {row.node_id for row in rows if row.no_minimum}
    assert all(node not in gone for run in result.debiasing for node in run.nodes)  # never picked
    assert result.validation is not None
    assert all(point.estimated is not None for point in result.validation.points)  # sampled among the defined
    trust = document["summary"]["trust"]["text"]  # the verdict says so too
    assert f"{far} of the {len(rows)} training nodes have no estimate at all" in trust and "far from trained" in trust
    assert "have no ΔΓ" in render_report(json.loads(json.dumps(document)), rows)
    assert "have no ΔΓ" in render(result)


@pytest.fixture(scope="module")
def marked() -> tuple[AuditResult, torch.Tensor]:
    """A two-layer GCN's audit (the step estimate) whose five most harmful and two most helpful nodes are marked as
    having no minimum near the weights, as the estimate marks them: NaN deltas and ``no_minimum``."""
    stages = ("training", "metrics", "influence")
    config = AuditConfig(
        model=ModelConfig(arch="gcn", layers=2), training=TrainConfig(epochs=300), bootstrap=0, stages=stages
    )
    result = run_audit(synthetic(300, seed=3), config)
    inf = result.influence
    assert inf is not None
    order = torch.argsort(inf.delta)
    gone = torch.zeros(inf.delta.numel(), dtype=torch.bool)
    gone[order[:5]] = True
    gone[order[-2:]] = True
    nan = torch.full_like(inf.delta, float("nan"))
    changed = dataclasses.replace(
        inf,
        delta=torch.where(gone, nan, inf.delta),
        delta_sp=torch.where(gone, nan, inf.delta_sp),
        delta_eo=torch.where(gone, nan, inf.delta_eo),
        no_minimum=gone,
    )
    return dataclasses.replace(result, influence=changed), gone


def _result(marked: tuple[AuditResult, torch.Tensor]) -> tuple[AuditResult, InfluenceResult, torch.Tensor]:
    result, gone = marked
    assert result.influence is not None
    return result, result.influence, gone


@pytest.mark.heavy  # ~10 s here (the fixture)
def test_marked_rows_are_null_and_left_out_of_the_figures(marked: tuple[AuditResult, torch.Tensor]) -> None:
    result, inf, gone = _result(marked)
    rows = result.influence_rows()
    assert [r.no_minimum is True for r in rows] == gone.tolist()
    assert all((r.delta is None) == bool(r.no_minimum) for r in rows)
    encoded = [encode(r) for r in rows]
    assert all(e["delta"] is None and e["no_minimum"] is True for e, g in zip(encoded, gone.tolist(), strict=True) if g)
    assert all("no_minimum" not in e for e, g in zip(encoded, gone.tolist(), strict=True) if not g)
    summary = inf.summary()
    defined = inf.delta[~gone].double()
    assert summary.undefined == int(gone.sum()) and summary.count == inf.delta.numel()
    assert summary.min == pytest.approx(float(defined.min())) and summary.sum == pytest.approx(float(defined.sum()))
    typed = result.typed()
    positions = set(torch.nonzero(gone).flatten().tolist())
    harmful = [r.position for r in typed.top_harmful or []]
    helpful = [r.position for r in typed.top_helpful or []]
    assert harmful and helpful and not (set(harmful) | set(helpful)) & positions


@pytest.mark.heavy  # the fixture
def test_marked_rows_reach_the_files_as_empty_cells(marked: tuple[AuditResult, torch.Tensor]) -> None:
    result, _, gone = _result(marked)
    rows = result.influence_rows()
    lines = influence_csv(rows).decode().split("\r\n")
    assert lines[0].endswith(",delta,delta_sp,delta_eo,settled,no_minimum,group_name,label_name")
    for line, g in zip(lines[1:], gone.tolist(), strict=False):
        cells = line.split(",")
        assert (cells[-7:-4] == ["", "", ""]) == g and (cells[-3] == "true") == g
    table = pq.read_table(io.BytesIO(influence_parquet(rows)))
    assert [d is None for d in table.column("delta").to_pylist()] == gone.tolist()
    assert [n is True for n in table.column("no_minimum").to_pylist()] == gone.tolist()


@pytest.mark.heavy  # the fixture
def test_nothing_ranks_selects_or_profiles_a_marked_node(marked: tuple[AuditResult, torch.Tensor]) -> None:
    result, inf, gone = _result(marked)
    positions = set(torch.nonzero(gone).flatten().tolist())
    rows = result.influence_rows()
    chosen = choose(rows, nodes=None, top=10)
    assert len(chosen) == 10 and not set(chosen) & positions
    with_one = estimate_set(rows, [*chosen[:2], min(positions)], method="step")
    assert with_one.delta is None and "no ΔΓ" in with_one.note
    choice = _Choice.of(inf.delta, None, None, result.graph, 2)
    picked = choice.nodes(result.graph, 20)
    assert picked.numel() > 0
    picked_positions = set((choice.position[picked]).tolist())
    assert not picked_positions & positions
    for protocol in ("sample", "sets"):
        for deletion in _deletions(inf.delta, protocol, 60, 0, 4, 0.1):
            assert not set(deletion) & positions
    profile = profile_nodes(result.graph, inf.delta.numpy(), seed=0)
    assert all(not set(members) & positions for members in profile.members)
    assert "left out" in profile.document.definition


def test_a_what_if_top_without_any_value_says_why() -> None:
    graph = synthetic(60, seed=1)
    rows = [
        dataclasses.replace(row, delta=None, delta_sp=None, delta_eo=None, no_minimum=True)
        for row in _plain_rows(graph.train_idx.numel())
    ]
    with pytest.raises(ConfigError, match="no training node has a ΔΓ"):
        choose(rows, nodes=None, top=3)


def _plain_rows(m: int) -> list[InfluenceRow]:
    return [
        InfluenceRow(position=i, node_index=i, node_id=i, group=0, label=0, delta=0.1, delta_sp=0.1, delta_eo=0.1)
        for i in range(m)
    ]
