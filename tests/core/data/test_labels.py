"""The graph in the user's terms: groups as attribute=value, nodes by the user's ids, kept through every copy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bind_core import load_dataset, synthetic
from bind_core.data.datasets.npz import load_npz, save_npz
from bind_core.data.labels import group_label, group_labels, id_legend, user_ids
from bind_core.errors import GraphValidationError

DATA_ROOT = Path(__file__).resolve().parents[4] / "shared" / "datasets"


def test_group_labels_name_the_attribute_once_and_keep_bins_and_combinations() -> None:
    g = synthetic(120, seed=1)
    assert group_labels(g) == ["sens=0", "sens=1"]  # arrays: the array's name and the codes
    named = replace(g, sensitive=("gender",), group_names=("F", "M"))
    assert group_labels(named) == ["gender=F", "gender=M"]
    binned = replace(g, sensitive=("age",), group_names=("age<25", "age>=25"))
    assert group_labels(binned) == ["age<25", "age>=25"]  # a bin names its column already
    both = replace(g, sensitive=("gender", "age"), group_names=("gender=F & age=old", "gender=M & age=old"))
    assert group_labels(both) == ["gender=F & age=old", "gender=M & age=old"]
    meant = replace(named, group_meanings=("", "the majority"))
    assert group_label(meant, 0) == "gender=F" and group_label(meant, 1) == "gender=M (the majority)"


def test_user_ids_are_the_id_column_text_or_row_positions_and_survive_node_removal() -> None:
    g = synthetic(120, seed=1)
    assert user_ids(g, [0, 5]) == [0, 5] and "counted from 0" in id_legend(g)
    ids = replace(g, node_ids=torch.arange(g.num_nodes) * 7 + 100, node_id_column="user_id")
    assert user_ids(ids, [0, 5]) == [100, 135] and "'user_id'" in id_legend(ids)
    keyed = replace(g, node_keys=tuple(f"n{i}" for i in range(g.num_nodes)), node_id_column="uid")
    assert user_ids(keyed, [3]) == ["n3"]
    reduced, mapping = keyed.without_nodes([0, 1, 2])
    assert user_ids(reduced, [int(mapping[3])]) == ["n3"] and reduced.sensitive == keyed.sensitive
    with pytest.raises(GraphValidationError, match="one text id per node"):
        replace(g, node_keys=("a", "b"))
    with pytest.raises(GraphValidationError, match="sensitive attribute"):
        replace(g, sensitive=())


def test_the_names_round_trip_through_npz(tmp_path: Path) -> None:
    g = replace(
        synthetic(120, seed=1),
        sensitive=("gender",),
        group_names=("F", "M"),
        group_meanings=("women", "men"),
        node_id_column="uid",
        node_keys=tuple(f"u{i}" for i in range(120)),
        label_name="approved",
        class_names=("no", "yes"),
    )
    save_npz(g, tmp_path / "g.npz")
    back = load_npz(tmp_path / "g.npz")
    assert back.summary() == g.summary()
    assert back.node_keys == g.node_keys and back.group_meanings == g.group_meanings
    summary = back.summary()
    assert summary.label == "approved" and summary.class_names == ["no", "yes"]
    assert summary.group_labels == ["gender=F (women)", "gender=M (men)"]


@pytest.mark.skipif(not (DATA_ROOT / "bail").is_dir(), reason="needs ../shared/datasets beside the project")
def test_built_in_datasets_carry_their_attribute_names_and_documented_meanings() -> None:
    income = load_dataset("income", DATA_ROOT).summary()
    assert income.sensitive == ["race"] and income.group_labels == ["race=0", "race=1"]
    assert income.label == "income"
    bail = load_dataset("recidivism", DATA_ROOT).summary()
    assert bail.sensitive == ["WHITE"] and bail.group_labels == ["WHITE=0 (not white)", "WHITE=1 (white)"]
    assert bail.label == "RECID" and bail.group_names and bail.sensitive
