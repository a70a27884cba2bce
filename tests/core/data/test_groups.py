"""Intersectional groups, the minimum group size and the worst pair (issue 8)."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bind_core.codec import encode
from bind_core.data.datasets import from_files, load_npz, save_npz, synthetic
from bind_core.data.groups import exclusion_reasons, included_groups
from bind_core.data.groups import test_group_positives as positives_in_test
from bind_core.data.groups import test_group_sizes as sizes_in_test
from bind_core.errors import ConfigError, GraphValidationError
from bind_core.fairness.metrics import evaluate, worst_pairs
from bind_core.fairness.records import WorstPair
from bind_core.pipeline import check_measurable_groups
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.reporting.report import render_report
from bind_core.training.fit import TrainConfig

COMBOS = [("F", "A", "old"), ("F", "B", "young"), ("M", "A", "old"), ("M", "A", "young"), ("M", "B", "old")]


def _table(path: Path) -> Path:
    rows: list[dict[str, object]] = []
    for gender, race, age in reversed(COMBOS):  # order of rows must not matter
        for label, split in ((0, "train"), (1, "train"), (1, "test"), (0, "test"), (1, "val")):
            rows.append({"gender": gender, "race": race, "age": age, "income": label, "split": split, "f": len(rows)})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_three_columns_become_their_combinations(tmp_path: Path) -> None:
    g = from_files(_table(tmp_path / "people.csv"), label="income", sensitive="gender, race,age", split="split")
    assert g.num_groups == 5
    assert g.group_names == (
        "gender=F & race=A & age=old",
        "gender=F & race=B & age=young",
        "gender=M & race=A & age=old",
        "gender=M & race=A & age=young",
        "gender=M & race=B & age=old",
    )
    # Rows come in reversed combination order, five rows each.
    assert g.sens.tolist() == [c for c in (4, 3, 2, 1, 0) for _ in range(5)]
    # The sensitive columns stay features, as their codes (text columns).
    assert {"gender", "race", "age", "f"} <= set(g.feature_names)
    assert g.summary().group_names == list(g.group_names)
    buffer = io.BytesIO()
    save_npz(g, buffer)
    with np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False) as archive:
        assert archive["group_names"].dtype.kind == "U"
    back = load_npz(buffer.getvalue())
    assert back.group_names == g.group_names and torch.equal(back.sens, g.sens)
    assert g.without_nodes([0])[0].group_names == g.group_names
    # One column: its values are the names; a list works like the comma-separated string.
    one = from_files(tmp_path / "people.csv", label="income", sensitive="gender", split="split", features=["f"])
    assert one.group_names == ("F", "M")
    listed = from_files(tmp_path / "people.csv", label="income", sensitive=["gender", "race", "age"], split="split")
    assert torch.equal(listed.sens, g.sens)
    with pytest.raises(GraphValidationError, match="nope"):
        from_files(tmp_path / "people.csv", label="income", sensitive="gender,nope", split="split")


def test_worst_pair_on_a_hand_case() -> None:
    p1 = torch.tensor([0.9, 0.8, 0.7, 0.2, 0.1, 0.3], dtype=torch.float64)
    proba = torch.stack([1 - p1, p1], 1)
    y = torch.tensor([1, 1, 1, 1, 1, 0])
    sens = torch.tensor([0, 0, 1, 1, 2, 2])
    worst = worst_pairs(proba, y, sens)
    # Positive-prediction rates 1, 0.5, 0: ΔSP pairs 0.5, 1, 0.5 (mean 2/3).
    assert worst["delta_sp"] == WorstPair(value=1.0, groups=[0, 2])
    assert evaluate(proba, y, sens).delta_sp == pytest.approx(2 / 3)
    # W1 of P(y=1): (0,1) 0.4, (0,2) 0.65, (1,2) 0.25.
    gamma_sp, gamma_eo = worst["gamma_sp"], worst["gamma_eo"]
    assert gamma_sp is not None and gamma_eo is not None
    assert gamma_sp.value == pytest.approx(0.65) and gamma_sp.groups == [0, 2]
    # Among positives group 2 holds only 0.1: TPR 1, 0.5, 0; W1 (0,2) = 0.75.
    assert worst["delta_eo"] == WorstPair(value=1.0, groups=[0, 2])
    assert gamma_eo.value == pytest.approx(0.75)
    only = worst_pairs(proba, y, sens, groups=[1, 2])
    assert only["delta_sp"] == WorstPair(value=0.5, groups=[1, 2])


def _with_small_group(size: int = 6) -> tuple:
    g = synthetic(160, seed=3)
    sens = g.sens.clone()
    test = g.test_idx
    major = g.sens[test] == 0  # taken from the majority group, so groups 0 and 1 keep their positives
    pos = test[major & (g.y[test] == 1)][: size // 2]
    neg = test[major & (g.y[test] == 0)][: size - pos.numel()]
    sens[torch.cat([pos, neg])] = 2
    sens[g.train_idx[:4]] = 2
    small = replace(g, sens=sens, group_names=("a", "b", "tiny"))
    return small, int((sens[test] == 2).sum())


def test_a_group_below_the_minimum_is_reported_but_kept_out() -> None:
    g, tiny = _with_small_group()
    assert included_groups(g, tiny + 1) == [0, 1]
    with pytest.raises(ConfigError):
        included_groups(g, 10_000)
    config = AuditConfig(
        training=TrainConfig(epochs=30),
        stages=("training", "metrics", "influence"),
        bootstrap=50,
        min_group_size=tiny + 1,
    )
    result = run_audit(g, config)
    d = result.to_dict()
    rows = d["metrics"]["groups"]
    assert [r["name"] for r in rows] == ["sens=a", "sens=b", "sens=tiny"]  # the user's terms: attribute=value
    assert [r["included"] for r in rows] == [True, True, False] and rows[2]["size"] == tiny
    assert any("tiny" in w and "min_group_size" in w for w in d["warnings"])
    assert d["metrics"]["included_groups"] == [0, 1]
    # By hand: the test nodes of groups 0 and 1 only, as a two-group problem.
    test = g.test_idx
    proba = result.model.predict_proba(g, test).double()
    keep = g.sens[test] < 2
    hand = encode(evaluate(proba[keep], g.y[test][keep], g.sens[test][keep]).values())
    everyone = encode(evaluate(proba, g.y[test], g.sens[test]).values())
    t = d["metrics"]["test"]
    for name in ("delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma"):
        assert t[name] == pytest.approx(hand[name], abs=1e-12), name
        assert d["metrics"]["intervals"][name if name != "gamma" else "gamma_sp"]["estimate"] == pytest.approx(
            hand[name if name != "gamma" else "gamma_sp"], abs=1e-12
        )
    assert t["gamma"] != pytest.approx(everyone["gamma"], abs=1e-9)  # the exclusion matters here
    assert t["accuracy"] == pytest.approx(everyone["accuracy"])  # utility stays over every test node
    assert d["influence_summary"]["gamma"]["total"] == pytest.approx(hand["gamma"], abs=1e-9)
    assert t["worst_pairs"]["delta_sp"]["groups"] == [0, 1]
    assert d["summary"]["bias"][0]["pairs"] == 1 and "pairs of groups" not in d["summary"]["verdict"]  # tiny in none
    html = render_report(d)
    assert "Worst pair of groups" in html and f"no: {tiny} test node(s), fewer than min_group_size {tiny + 1}" in html
    (figure,) = [svg for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S) if 'id="probabilities-' in svg]
    drawn = re.findall(r"<text[^>]*>([^<]*)</text>", figure)
    legend = [t for t in drawn if "(n=" in t]
    assert legend and all(t.split(" (n=")[0] in {"sens=a", "sens=b", "sens=tiny"} for t in legend)  # by name
    assert "predicted P(y=1)" in drawn and "truly y=1 (Γ_EO)" in drawn  # the label and its positive class


def _table_with_unmeasurable_groups(path: Path) -> Path:
    """Five combinations measured as above, one with members only in train/val, one without a positive test node."""
    rows: list[dict[str, object]] = []
    for gender, race, age in COMBOS:
        for label, split in ((0, "train"), (1, "train"), (1, "test"), (0, "test"), (1, "test"), (0, "val")):
            rows.append({"gender": gender, "race": race, "age": age, "income": label, "split": split})
    for label, split in ((0, "train"), (1, "train"), (1, "val")):  # F, A, young: never a test node
        rows.append({"gender": "F", "race": "A", "age": "young", "income": label, "split": split})
    for label, split in ((1, "train"), (0, "test"), (0, "test")):  # M, B, young: test nodes, no positive one
        rows.append({"gender": "M", "race": "B", "age": "young", "income": label, "split": split})
    frame = pd.DataFrame(rows)
    frame["f"] = np.arange(len(frame)) % 7
    frame.to_csv(path, index=False)
    return path


def test_groups_absent_from_the_test_split_are_reported_not_refused(tmp_path: Path) -> None:
    g = from_files(
        _table_with_unmeasurable_groups(tmp_path / "people.csv"),
        label="income",
        sensitive="gender,race,age",
        split="split",
    )
    names = list(g.group_names)
    absent, no_positive = names.index("gender=F & race=A & age=young"), names.index("gender=M & race=B & age=young")
    assert len(names) == 7 and (absent, no_positive) == (1, 6)
    assert sizes_in_test(g)[absent] == 0 and positives_in_test(g)[no_positive] == 0
    reasons = exclusion_reasons(g)
    assert set(reasons) == {absent, no_positive}
    assert "absent from the test split" in reasons[absent] and "3 node(s) in the graph" in reasons[absent]
    assert "no positive" in reasons[no_positive]
    assert included_groups(g) == [0, 2, 3, 4, 5]
    assert set(exclusion_reasons(g, 4)) == {0, 1, 2, 3, 4, 5, 6}  # every group has 3 test nodes or fewer
    with pytest.raises(ConfigError, match="at least two"):
        included_groups(g, 4)

    config = AuditConfig(training=TrainConfig(epochs=20), stages=("training", "metrics"), bootstrap=40)
    result = run_audit(g, config)
    d = result.to_dict()
    rows = d["metrics"]["groups"]
    assert [r["included"] for r in rows] == [True, False, True, True, True, True, False]
    assert rows[absent]["size"] == 0 and rows[absent]["positive_rate"] is None
    assert rows[absent]["excluded_reason"] == reasons[absent] and rows[0]["excluded_reason"] is None
    assert d["metrics"]["included_groups"] == [0, 2, 3, 4, 5]
    for grp in (absent, no_positive):
        assert sum(names[grp] in w and reasons[grp] in w for w in d["warnings"]) == 1
    # The metrics are those of the measurable groups' test nodes, as a five-group problem.
    test = g.test_idx
    proba = result.model.predict_proba(g, test).double()
    keep = torch.isin(g.sens[test], torch.tensor([0, 2, 3, 4, 5]))
    hand = encode(evaluate(proba[keep], g.y[test][keep], g.sens[test][keep]).values())
    for name in ("delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma"):
        assert d["metrics"]["test"][name] == pytest.approx(hand[name], abs=1e-12), name
    assert d["metrics"]["intervals"]["delta_eo"]["estimate"] == pytest.approx(hand["delta_eo"], abs=1e-12)
    assert d["metrics"]["test"]["worst_pairs"]["delta_eo"]["groups"][0] in (0, 2, 3, 4, 5)
    html = render_report(d)
    assert f"no: {reasons[absent]}" in html and f"no: {reasons[no_positive]}" in html


def test_the_graph_still_needs_two_measurable_groups() -> None:
    g = synthetic(120, seed=2)
    test = g.test_idx
    sens = g.sens.clone()
    sens[test] = 0  # every test node in group 0
    with pytest.raises(GraphValidationError, match=r"group\(s\) \[1\] missing from the test split"):
        replace(g, sens=sens)
    sens = g.sens.clone()
    sens[test[g.y[test] == 1]] = 0  # every positive test node in group 0
    with pytest.raises(GraphValidationError, match="no positive"):
        replace(g, sens=sens)


def test_a_text_sensitive_column_with_more_than_two_values_is_one_hot_not_ordered_codes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 60
    table = pd.DataFrame(
        {
            "region": rng.choice(["south", "east", "north"], n),
            "gender": rng.choice(["F", "M"], n),
            "f": rng.normal(size=n),
            "y": rng.integers(0, 2, n),
        }
    )
    table.to_csv(tmp_path / "t.csv", index=False)
    three = from_files(tmp_path / "t.csv", label="y", sensitive="region", features=["f", "region"], scale=False)
    assert three.feature_names == ("f", "region=east", "region=north", "region=south")
    codes = three.sens.numpy()
    onehot = three.x[:, 1:].numpy()
    assert (onehot.sum(axis=1) == 1).all() and (onehot.argmax(axis=1) == codes).all()  # the group's own column
    two = from_files(tmp_path / "t.csv", label="y", sensitive="gender", features=["f", "gender"], scale=False)
    assert two.feature_names == ("f", "gender")  # two values: one column of codes, as in the paper
    assert torch.equal(two.x[:, 1], two.sens.to(two.x.dtype))


def test_the_stored_summary_answers_min_group_size_as_the_audit_would() -> None:
    """``check_measurable_groups`` reads a stored summary (which may hold more keys, as a table upload's ``ingest``)
    with the audit's own rule; a summary from before it held the test nodes per group is left to the audit."""
    g, tiny = _with_small_group()
    doc = {**encode(g.summary()), "ingest": {"encoded": {}}, "size_bytes": 1}
    assert doc["test_group_sizes"][2] == tiny
    check_measurable_groups(doc, tiny + 1)  # two groups left: accepted
    too_big = max(doc["test_group_sizes"]) + 1
    with pytest.raises(ConfigError, match=rf"min_group_size: {too_big} leaves 0 group\(s\)") as raised:
        check_measurable_groups(doc, too_big)
    with pytest.raises(ConfigError) as direct:
        included_groups(g, too_big)
    assert str(raised.value) == str(direct.value)  # the same rule, the same words
    old = {k: v for k, v in doc.items() if not k.startswith("test_group")}
    check_measurable_groups(old, too_big)  # nothing to check it against: the audit will
