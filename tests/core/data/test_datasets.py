"""The paper's datasets (Income, Recidivism, Pokec-z/n), the registry and the paper's split rule."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bind_core.data.datasets import DATASET_NAMES, available, canonical_name, load, paper_split
from bind_core.errors import BindError, DatasetNotFoundError


# ---------------------------------------------------------------------- paper_split
def _reference_split(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BIND's loader code, verbatim in behaviour (global ``random``, numpy arrays shuffled in place)."""
    state = random.getstate()
    try:
        random.seed(20)
        label_idx_0 = np.where(labels == 0)[0]
        label_idx_1 = np.where(labels == 1)[0]
        random.shuffle(label_idx_0)
        random.shuffle(label_idx_1)
        n0, n1 = len(label_idx_0), len(label_idx_1)
        train = np.append(label_idx_0[: min(int(0.5 * n0), 500)], label_idx_1[: min(int(0.5 * n1), 500)])
        val = np.append(label_idx_0[int(0.5 * n0) : int(0.75 * n0)], label_idx_1[int(0.5 * n1) : int(0.75 * n1)])
        test = np.append(label_idx_0[int(0.75 * n0) :], label_idx_1[int(0.75 * n1) :])
    finally:
        random.setstate(state)
    return train, val, test


@pytest.mark.parametrize("n", [10, 999, 3000])
def test_paper_split_matches_reference_code(n: int) -> None:
    labels = np.random.default_rng(n).integers(0, 2, size=n)
    ours = paper_split(torch.from_numpy(labels))
    for mine, ref in zip(ours, _reference_split(labels), strict=True):
        assert mine.dtype == torch.long
        assert np.array_equal(mine.numpy(), ref)


def test_paper_split_leaves_global_random_alone() -> None:
    random.seed(5)
    expected = random.random()
    random.seed(5)
    paper_split(torch.tensor([0, 1] * 20))
    assert random.random() == expected


def test_paper_split_multiclass_and_cap() -> None:
    y = torch.tensor([0] * 40 + [1] * 20 + [2] * 8)
    train, val, test = paper_split(y, train_per_class=5, seed=3)
    assert torch.bincount(y[train]).tolist() == [5, 5, 4]
    assert torch.bincount(y[val]).tolist() == [10, 5, 2]
    assert torch.bincount(y[test]).tolist() == [10, 5, 2]
    everything = torch.cat([train, val, test])
    assert everything.unique().numel() == everything.numel()
    uncapped = paper_split(y, train_per_class=None, seed=3)[0]
    assert uncapped.numel() == 20 + 10 + 4
    assert not torch.equal(paper_split(y, seed=4)[2], paper_split(y, seed=3)[2])


def test_paper_split_rejects_bad_labels() -> None:
    with pytest.raises(BindError):
        paper_split(torch.tensor([[0, 1]]))
    with pytest.raises(BindError):
        paper_split(np.array([0.5, 1.0]))


# ---------------------------------------------------------------------- registry
def test_unknown_name_lists_valid_names(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as info:
        load("cora", tmp_path)
    for name in (*DATASET_NAMES, "bail", "pokec1", "pokec2"):
        assert name in str(info.value)


def test_aliases() -> None:
    assert canonical_name("bail") == "recidivism"
    assert canonical_name("Pokec-Z") == "pokec_z"
    assert canonical_name("pokec2") == "pokec_n"


def test_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"income\.csv"):
        load("income", tmp_path)
    infos = {info.name: info for info in available(tmp_path)}
    assert list(infos) == list(DATASET_NAMES)
    assert not any(info.present for info in infos.values())
    assert infos["recidivism"].aliases == ("bail",)
    assert infos["recidivism"].missing == ("bail/bail.csv", "bail/bail_edges.txt")
    assert "pokec1/region_job_1_features.npy" in infos["pokec_z"].missing


# ---------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def income(data_root: Path):
    return load("income", data_root)


@pytest.fixture(scope="module")
def recidivism(data_root: Path):
    return load("bail", data_root)


def test_income_counts_and_split(income, data_root: Path) -> None:
    g = income
    assert g.name == "income"
    assert (g.num_nodes, g.num_features) == (14821, 14)
    assert g.num_edges == 42831
    assert 2 * g.num_edges + g.num_nodes == 100483  # the paper's Table 1 count: nnz(A + I)
    assert g.feature_names[8] == "race" and "income" not in g.feature_names
    assert torch.bincount(g.y).tolist() == [11611, 3210]
    assert torch.bincount(g.sens).tolist() == [10136, 4685]
    assert torch.bincount(g.y[g.train_idx]).tolist() == [500, 500]
    # val/test: positions int(0.5k):int(0.75k) and int(0.75k): of each label's shuffled list
    assert torch.bincount(g.y[g.val_idx]).tolist() == [8708 - 5805, 2407 - 1605]
    assert torch.bincount(g.y[g.test_idx]).tolist() == [11611 - 8708, 3210 - 2407]
    assert float(g.x.min()) == -1.0 and float(g.x.max()) == 1.0
    labels = pd.read_csv(data_root / "income" / "income.csv")["income"].to_numpy()
    for mine, ref in zip((g.train_idx, g.val_idx, g.test_idx), _reference_split(labels), strict=True):
        assert np.array_equal(mine.numpy(), ref)


def test_recidivism_counts_and_split(recidivism) -> None:
    g = recidivism
    assert g.name == "recidivism"
    assert (g.num_nodes, g.num_features) == (18876, 18)
    assert g.num_edges == 311870
    assert (2 * g.num_edges + g.num_nodes) // 2 == 321308  # the paper's Table 1 count: nnz(A + I) / 2
    assert g.feature_names[0] == "WHITE" and "RECID" not in g.feature_names
    assert torch.bincount(g.y[g.train_idx]).tolist() == [500, 500]
    assert g.val_idx.numel() == (8829 - 5886) + (5328 - 3552)
    assert g.test_idx.numel() == (11772 - 8829) + (7104 - 5328)


def test_split_seed_changes_the_split(data_root: Path, income) -> None:
    other = load("income", data_root, split_seed=21)
    assert torch.equal(other.x, income.x)
    assert not torch.equal(other.train_idx, income.train_idx)


def test_staged_pokec_lacks_features(data_root: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"region_job_1_features\.npy"):
        load("pokec_z", data_root)
    with pytest.raises(DatasetNotFoundError, match=r"region_job_2_2_features\.npy"):
        load("pokec2", data_root)
    present = {info.name: info.present for info in available(data_root)}
    assert present == {"income": True, "recidivism": True, "pokec_z": False, "pokec_n": False}


# ---------------------------------------------------------------------- Pokec layouts
def _ring_edges(n: int) -> np.ndarray:
    src = np.arange(n)
    dst = (src + 1) % n
    return np.concatenate([np.stack([src, dst]), np.stack([dst, src])], axis=1)


@pytest.mark.parametrize("orientation", ["2xE", "Ex2"])
def test_pokec_npy_layout(tmp_path: Path, orientation: str) -> None:
    n, rng = 60, np.random.default_rng(0)
    folder = tmp_path / "pokec1"
    folder.mkdir()
    edges = _ring_edges(n)
    np.save(folder / "region_job_1_edges.npy", edges if orientation == "2xE" else edges.T.copy())
    np.save(folder / "region_job_1_features.npy", rng.uniform(-1, 1, size=(n, 5)).astype(np.float32))
    np.save(folder / "region_job_1_labels.npy", np.arange(n) % 2)
    np.save(folder / "region_job_1_sens.npy", (np.arange(n) // 2) % 2)
    g = load("pokec1", tmp_path)
    assert g.name == "pokec_z"
    assert (g.num_nodes, g.num_edges, g.num_features) == (n, n, 5)
    assert len(g.feature_names) == 5
    assert torch.bincount(g.y[g.train_idx]).tolist() == [15, 15]
    assert next(i for i in available(tmp_path) if i.name == "pokec_z").present


def test_pokec_csv_layout(tmp_path: Path) -> None:
    folder = tmp_path / "pokec"  # FairGNN's folder name; also searched: tmp_path / "pokec2"
    folder.mkdir()
    n = 48
    users = 1000 + np.arange(n) * 7
    table = pd.DataFrame(
        {
            "user_id": users,
            "public": 1,  # zero variance: dropped
            "completion_percentage": np.arange(n) * 2,
            "region": np.where(np.arange(n) % 3 == 0, 0, 1 + np.arange(n) % 2),
            "AGE": 20 + np.arange(n) % 9,
            "I_am_working_in_field": np.arange(n) % 4,
        }
    )
    table.loc[5, "I_am_working_in_field"] = -1  # dropped: no label
    table.loc[6, "region"] = -1  # dropped: no region
    table.to_csv(folder / "region_job_2.csv", index=False)
    ring = [(users[i], users[(i + 1) % 40]) for i in range(40)]  # users 0..39 in one component
    island = [(users[44], users[45]), (users[45], users[46])]  # a smaller component
    dangling = [(users[1], 99999)]  # unknown user id: ignored
    lines = [f"{a} {b}" for a, b in ring + island + dangling]
    (folder / "region_job_2_relationship.txt").write_text("\n".join(lines) + "\n")
    g = load("pokec_n", tmp_path)
    assert g.name == "pokec_n"
    kept = [i for i in range(40) if i not in (5, 6)]  # the ring breaks at 5 and 6 but stays connected
    assert g.num_nodes == len(kept)
    assert g.node_ids.tolist() == users[kept].tolist()
    assert set(g.y.tolist()) == {0, 1}  # min(label, 1)
    assert g.sens.tolist() == [int(i % 3 != 0) for i in kept]
    assert g.feature_names == ("completion_percentage", "region", "AGE")
    assert float(g.x.min()) == -1.0 and float(g.x.max()) == 1.0
    assert g.num_edges == 40 - 3  # (4,5), (5,6), (6,7) are gone with users 5 and 6
    assert next(i for i in available(tmp_path) if i.name == "pokec_n").present
