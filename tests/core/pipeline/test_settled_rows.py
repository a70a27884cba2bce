"""Each node's row says whether its step estimate settled (``InfluenceRow.settled``): the step estimate's rows carry
the flag, as many false as ``solver_details.unsettled`` counts, through the JSON, the CSV, the Parquet file and the
report's † mark; the linear estimate's rows leave it out (nothing to settle), never false."""

from __future__ import annotations

import dataclasses
import io
import json

import pyarrow.parquet as pq
import pytest

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.influence.records import InfluenceRow
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.reporting.exports import influence_csv, influence_parquet
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render
from bind_core.training.fit import TrainConfig

STAGES = ("training", "metrics", "influence")


@pytest.fixture(scope="module")
def stepped() -> AuditResult:
    """A two-layer GCN as Adam leaves it (the step estimate), 300 epochs: a few deletions do not settle."""
    config = AuditConfig(
        model=ModelConfig(arch="gcn", layers=2),
        training=TrainConfig(epochs=300),
        bootstrap=0,
        stages=STAGES,
    )
    return run_audit(synthetic(300, seed=3), config)


def test_the_step_estimates_rows_say_which_nodes_settled(stepped: AuditResult) -> None:
    rows = stepped.influence_rows()
    assert stepped.influence is not None and stepped.influence.settled is not None
    details = stepped.influence.solve.details
    assert all(isinstance(r.settled, bool) for r in rows)
    assert sum(not r.settled for r in rows) == details["unsettled"]
    assert 0 < details["unsettled"] < len(rows)  # both kinds, so the flag is not constant
    top = stepped.to_dict()["top_harmful"]
    assert all(isinstance(r["settled"], bool) for r in top)


def test_the_flag_reaches_the_csv_and_the_parquet_file(stepped: AuditResult) -> None:
    rows = stepped.influence_rows()
    lines = influence_csv(rows).decode().split("\r\n")
    assert lines[0].endswith(",delta_eo,settled,no_minimum,group_name,label_name")
    cells = [line.split(",")[-4] for line in lines[1:] if line]
    assert cells == ["true" if r.settled else "false" for r in rows]
    table = pq.read_table(io.BytesIO(influence_parquet(rows)))
    assert table.column("settled").to_pylist() == [r.settled for r in rows]


def test_the_report_marks_a_top_node_that_did_not_settle(stepped: AuditResult) -> None:
    results = json.loads(json.dumps(stepped.to_dict()))
    rows = [dataclasses.replace(r, settled=True) for r in stepped.influence_rows()]
    worst = min(rows, key=lambda r: r.delta)
    mark = '<abbr title="its steps did not settle: approximate">†</abbr>'
    footnote = "† The node's steps did not settle at the proximal optimum"
    page = render_report(results, rows)
    assert mark not in page and footnote not in page
    rows[worst.position] = dataclasses.replace(worst, settled=False)
    page = render_report(results, rows)
    assert page.count(mark) == 1 and footnote in page


def test_the_linear_estimates_rows_leave_the_flag_out() -> None:
    result = run_audit(synthetic(150, seed=1), AuditConfig(training=TrainConfig(epochs=30), bootstrap=0, stages=STAGES))
    rows = result.influence_rows()
    assert result.influence is not None and result.influence.settled is None
    assert all(r.settled is None for r in rows)
    assert "settled" not in encode(rows[0]) and "settled" in [f.name for f in dataclasses.fields(InfluenceRow)]
    lines = influence_csv(rows).decode().split("\r\n")[1:]
    assert all(line.split(",")[-4:-2] == ["", ""] for line in lines if line)  # settled, no_minimum: empty


def test_the_text_report_marks_a_listed_node_that_did_not_settle(stepped: AuditResult) -> None:
    text = render(stepped)
    listed = (stepped.to_dict()["top_harmful"] or [])[:10] + (stepped.to_dict()["top_helpful"] or [])[:10]
    unsettled = [row for row in listed if row["settled"] is False]
    assert ("† its steps did not settle" in text) == bool(unsettled)
    for row in unsettled:
        assert f"ΔΓ {row['delta']:+.2e}†)" in text
