"""The audit's node-level outputs speak the user's terms beside the graph's codes: an influence row's group and label by
the user's values (``group_name``, ``label_name``; the JSON, ``influence_rows()``, the CSV and the Parquet file), the
profile's labels by name, the worst pairs by the groups' names and the self-check's points by the user's node ids."""

from __future__ import annotations

import csv
import dataclasses
import io
import json

import pyarrow.parquet as pq
import pytest

from bind_core.codec import decode, encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.pipeline.audit import AuditConfig, AuditResult, run_audit
from bind_core.pipeline.results import AuditResults, InfluenceRow
from bind_core.reporting.exports import INFLUENCE_COLUMNS, edges_csv, edges_parquet, influence_csv, influence_parquet
from bind_core.training.fit import TrainConfig

GROUPS = ("north", "south")
CLASSES = ("approved", "denied")


def named_graph() -> Graph:
    """A synthetic graph in a user's terms: text ids, named groups and classes."""
    g = synthetic(200, seed=4)
    return dataclasses.replace(
        g,
        group_names=GROUPS,
        sensitive=("region",),
        class_names=CLASSES,
        label_name="decision",
        node_id_column="customer",
        node_keys=tuple(f"cust-{i:04d}-x" for i in range(g.num_nodes)),
    )


@pytest.fixture(scope="module")
def audit() -> AuditResult:
    config = AuditConfig(
        training=TrainConfig(epochs=60),
        bootstrap=0,
        validation_sample=3,
        stages=("training", "metrics", "influence", "validation"),
    )
    return run_audit(named_graph(), config)


def test_influence_rows_name_the_group_and_label_beside_the_codes(audit: AuditResult) -> None:
    g = audit.graph
    rows = audit.influence_rows()
    assert rows and all(isinstance(r, InfluenceRow) for r in rows)
    for r in rows:
        assert r.group == int(g.sens[r.node_index]) and r.group_name == GROUPS[r.group]
        assert r.label == int(g.y[r.node_index]) and r.label_name == CLASSES[r.label]
        assert r.node_id == g.node_keys[r.node_index]
    assert {r.group_name for r in rows} == set(GROUPS) and {r.label_name for r in rows} == set(CLASSES)


def test_the_top_lists_name_them_and_read_back(audit: AuditResult) -> None:
    doc = json.loads(json.dumps(audit.to_dict(), allow_nan=False))
    for key in ("top_harmful", "top_helpful"):
        assert doc[key]
        for row in doc[key]:
            assert row["group_name"] == GROUPS[row["group"]] and row["label_name"] == CLASSES[row["label"]]
    typed = AuditResults.from_dict(doc)
    assert typed.top_harmful is not None and typed.top_harmful[0].group_name in GROUPS
    assert typed.to_dict() == doc


def test_an_older_row_without_names_still_reads() -> None:
    old = {"position": 0, "node_index": 3, "node_id": 3, "group": 1, "label": 0, "delta": -0.1, "delta_sp": -0.1}
    old["delta_eo"] = -0.1
    typed = decode(InfluenceRow, old)
    assert typed.group_name is None and typed.label_name is None and encode(typed) == old


def test_the_exports_carry_the_names(audit: AuditResult) -> None:
    rows = audit.influence_rows()
    assert INFLUENCE_COLUMNS[-2:] == ("group_name", "label_name")
    read = list(csv.DictReader(io.StringIO(influence_csv(rows).decode())))
    assert [(c["group_name"], c["label_name"]) for c in read] == [(r.group_name, r.label_name) for r in rows]
    assert {c["group"] for c in read} == {"0", "1"}  # the codes stay, beside the names
    table = pq.read_table(io.BytesIO(influence_parquet(rows)))
    assert table.column("group_name").to_pylist() == [r.group_name for r in rows]
    assert table.column("label_name").to_pylist() == [r.label_name for r in rows]


def test_the_profile_names_its_labels(audit: AuditResult) -> None:
    assert audit.profile is not None
    labels = audit.to_dict()["profile"]["sets"]["harmful"]["labels"]
    assert [(s["label"], s["name"]) for s in labels] == [(0, "approved"), (1, "denied")]


def test_the_worst_pairs_name_their_groups(audit: AuditResult) -> None:
    pairs = audit.to_dict()["metrics"]["test"]["worst_pairs"]
    names = {g["group"]: g["name"] for g in audit.to_dict()["metrics"]["groups"]}
    assert pairs["delta_sp"]["groups"] == [0, 1]
    for pair in pairs.values():
        if pair is not None:
            assert pair["names"] == [names[g] for g in pair["groups"]] == ["region=north", "region=south"]


def test_the_self_checks_points_give_the_users_ids(audit: AuditResult) -> None:
    assert audit.validation is not None and audit.validation.points
    for point in audit.to_dict()["validation"]["points"]:
        assert point["node_ids"] == [audit.graph.node_keys[v] for v in point["nodes"]]
        assert all(isinstance(v, str) and v.startswith("cust-") for v in point["node_ids"])


def test_edge_rows_name_both_endpoints_groups() -> None:
    """Every edge's row, the section's lists and the exports give each endpoint's group as the user's data writes it,
    beside the code."""
    config = AuditConfig(training=TrainConfig(epochs=30), bootstrap=0, stages=("training", "metrics", "influence"))
    result = run_audit(named_graph(), dataclasses.replace(config, edges=True))
    rows = result.edge_rows()
    assert rows and all((r.u_group_name, r.v_group_name) == (GROUPS[r.u_group], GROUPS[r.v_group]) for r in rows)
    assert {r.u_group_name for r in rows} | {r.v_group_name for r in rows} == set(GROUPS)
    section = json.loads(json.dumps(result.to_dict(), allow_nan=False))["edges"]
    for listed in section["top_harmful"] + section["top_helpful"]:
        assert listed["u_group_name"] == GROUPS[listed["u_group"]]
        assert listed["v_group_name"] == GROUPS[listed["v_group"]]
    table = list(csv.DictReader(io.StringIO(edges_csv(rows).decode("utf-8"))))
    assert [(t["u_group_name"], t["v_group_name"]) for t in table] == [(r.u_group_name, r.v_group_name) for r in rows]
    assert pq.read_table(io.BytesIO(edges_parquet(rows))).to_pylist() == [encode(r) for r in rows]
