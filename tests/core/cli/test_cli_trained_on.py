"""``bind-audit run --trained-on``: a supplied model audited on a later node table of its graph, that table's
features carried to the columns, order and scale of the table the model was trained on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch_geometric.nn import models

from bind_core.cli import main
from bind_core.data.datasets import ingest_files, save_npz, synthetic

REGIONS = ("east", "north", "south")


def _table(seed: int, *, shift: float, west: int = 0) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    """A snapshot: numeric income and age (shifted, so that each snapshot's own range differs), a text region, a
    group and a label that follows income; ``west`` nodes of a region the first snapshot lacks. The edges of a
    synthetic graph."""
    graph = synthetic(240, seed=seed, train_per_class=40)
    rng = np.random.default_rng(seed)
    split = np.full(graph.num_nodes, "", dtype=object)
    for name, idx in (("train", graph.train_idx), ("val", graph.val_idx), ("test", graph.test_idx)):
        split[idx.numpy()] = name
    region = rng.choice(REGIONS, graph.num_nodes).astype(object)
    region[rng.choice(graph.num_nodes, west, replace=False)] = "west"
    income = rng.normal(shift, 1.0, graph.num_nodes)
    table = pd.DataFrame(
        {
            "income": 3 * income,
            "region": region,
            "age": rng.normal(40 + 5 * shift, 10, graph.num_nodes),
            "group": graph.sens.numpy(),
            "approved": np.where(income + 0.3 * rng.normal(size=graph.num_nodes) > shift, "yes", "no"),
            "part": split,
        }
    )
    return table, graph.edge_index.T.tolist()


def _write(tmp_path: Path, name: str, table: pd.DataFrame, edges: list[tuple[int, int]]) -> tuple[Path, Path]:
    table.to_csv(tmp_path / f"{name}.csv", index=False)
    (tmp_path / f"{name}-edges.txt").write_text("".join(f"{a} {b}\n" for a, b in edges))
    return tmp_path / f"{name}.csv", tmp_path / f"{name}-edges.txt"


READ = {"label": "approved", "sensitive": "group", "split": "part", "features": ["income", "region", "age"]}


@pytest.fixture
def trained(tmp_path: Path) -> tuple[Path, models.GCN, list[str], list[tuple[float, float]]]:
    """A PyG GCN trained on the first snapshot as ``--scale on`` reads it; its weights and config in ``tmp_path``."""
    nodes, edges = _write(tmp_path, "snap1", *_table(1, shift=0.0))
    first = ingest_files(nodes, edges, scale=True, **READ).graph  # type: ignore[arg-type]
    args = {"in_channels": first.num_features, "hidden_channels": 4, "num_layers": 1, "out_channels": 2}
    torch.manual_seed(0)
    pyg = models.GCN(**args)
    optimizer = torch.optim.Adam(pyg.parameters(), lr=0.05, weight_decay=1e-3)
    for _ in range(200):
        optimizer.zero_grad()
        F.cross_entropy(pyg(first.x, first.edge_index)[first.train_idx], first.y[first.train_idx]).backward()
        optimizer.step()
    save_file(pyg.state_dict(), tmp_path / "gcn.safetensors")
    training = {"loss": "cross_entropy", "weight_decay": 1e-3, "epochs": 200, "lr": 0.05}
    (tmp_path / "gcn.json").write_text(
        json.dumps({"format": "torch_geometric", "class": "GCN", "args": args, "training": training})
    )
    return tmp_path, pyg, list(first.feature_names), list(first.feature_ranges)


def _command(folder: Path, later: str, *more: str) -> list[str]:
    return [
        "--table", str(folder / f"{later}.csv"), "--edges", str(folder / f"{later}-edges.txt"), "--label", "approved",
        "--sensitive", "group", "--split", "part", "--features", "income,region,age", "--scale", "on",
        "--model-weights", str(folder / "gcn.safetensors"), "--model-config", str(folder / "gcn.json"),
        "--skip", "influence", "--bootstrap", "0", "--quiet", *more,
    ]  # fmt: skip


def test_a_later_table_is_read_as_the_model_reads_it(
    trained: tuple[Path, models.GCN, list[str], list[tuple[float, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Another snapshot with its own value ranges and a region the first lacks: refused without ``--trained-on``
    (another column count) and with it by default (the new region named, the way out said); with
    ``--unknown-categories ignore`` audited on the first snapshot's columns and scale, its accuracy the model's own
    on those inputs computed here by hand."""
    folder, pyg, names, ranges = trained
    table, edges = _table(2, shift=0.3, west=30)
    _write(folder, "snap2", table, edges)
    assert main(_command(folder, "snap2")) == 2
    assert "does not fit" in capsys.readouterr().err
    assert main(_command(folder, "snap2", "--trained-on", str(folder / "snap1.csv"))) == 2
    said = capsys.readouterr().err
    assert "this table has column(s) the model was not trained with ('snap1.csv' lacks them): 'region=west'" in said
    assert "--unknown-categories ignore" in said
    out = folder / "audit.json"
    more = ("--trained-on", str(folder / "snap1.csv"), "--unknown-categories", "ignore", "--json", str(out))
    assert main(_command(folder, "snap2", *more)) == 0
    printed = capsys.readouterr().out
    assert "trained on another table of this graph, 'snap1.csv'" in printed
    doc = json.loads(out.read_text())
    carried = doc["supplied_model"]["carried"]
    assert (carried["ignored"], carried["ignored_nodes"], carried["rescaled"]) == (["region=west"], 30, True)
    assert carried["trained_on"] == "snap1.csv"
    assert "unseen_categories" in doc["warning_codes"]
    # by hand: the second snapshot's raw values in the first's columns (west: no region), scaled by its ranges
    raw = np.stack(
        [
            table[name].to_numpy(float) if "=" not in name else (table["region"] == name.split("=")[1]).to_numpy(float)
            for name in names
        ],
        axis=1,
    )
    low, high = np.array(ranges).T
    x = torch.tensor(2 * (raw - low) / (high - low) - 1, dtype=torch.float32)
    test = np.flatnonzero(table["part"].to_numpy() == "test")
    y = (table["approved"] == "yes").to_numpy(int)[test]
    with torch.no_grad():
        predicted = pyg(x, torch.tensor(edges).T).argmax(1).numpy()[test]
    assert doc["metrics"]["test"]["accuracy"] == pytest.approx(float((predicted == y).mean()), abs=1e-12)


def test_trained_on_is_refused_where_it_cannot_apply(
    trained: tuple[Path, models.GCN, list[str], list[tuple[float, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = trained[0]
    assert main(["--synthetic", "--trained-on", str(folder / "snap1.csv"), "--quiet"]) == 2
    assert "--trained-on needs --table or --npz and --model-weights" in capsys.readouterr().err
    assert main(_command(folder, "snap1", "--unknown-categories", "ignore")) == 2
    assert "--unknown-categories applies only to --trained-on" in capsys.readouterr().err
    # a trained-on table with another label is refused, the label named
    table, _ = _table(1, shift=0.0)
    table.rename(columns={"approved": "granted"}).to_csv(folder / "other.csv", index=False)
    assert main(_command(folder, "snap1", "--trained-on", str(folder / "other.csv"))) == 2
    assert "--label: no column 'approved'" in capsys.readouterr().err


def test_archives_are_carried_as_tables_are(
    trained: tuple[Path, models.GCN, list[str], list[tuple[float, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The two snapshots saved as .npz archives (each scaled by its own ranges, which the archive keeps): ``--npz``
    with ``--trained-on`` an earlier archive audits the model as the tables did, to the last digit."""
    folder = trained[0]
    table, edges = _table(2, shift=0.3, west=30)
    _write(folder, "snap2", table, edges)
    for name in ("snap1", "snap2"):
        graph = ingest_files(folder / f"{name}.csv", folder / f"{name}-edges.txt", scale=True, **READ).graph  # type: ignore[arg-type]
        save_npz(graph, folder / f"{name}.npz")
    from_tables, from_archives = folder / "tables.json", folder / "archives.json"
    more = ("--trained-on", str(folder / "snap1.csv"), "--unknown-categories", "ignore", "--json", str(from_tables))
    assert main(_command(folder, "snap2", *more)) == 0
    model = ("--model-weights", str(folder / "gcn.safetensors"), "--model-config", str(folder / "gcn.json"))
    archive = ["--npz", str(folder / "snap2.npz"), *model, "--skip", "influence", "--bootstrap", "0", "--quiet"]
    ignore = ("--unknown-categories", "ignore")
    assert main([*archive, "--trained-on", str(folder / "snap1.npz"), *ignore, "--json", str(from_archives)]) == 0
    capsys.readouterr()
    tables, archives = json.loads(from_tables.read_text()), json.loads(from_archives.read_text())
    assert archives["metrics"]["test"] == tables["metrics"]["test"]
    carried = archives["supplied_model"]["carried"]
    assert (carried["ignored"], carried["ignored_nodes"], carried["trained_on"]) == (["region=west"], 30, "snap1.npz")
    # an archive is carried to an archive only
    assert main([*archive, "--trained-on", str(folder / "snap1.csv")]) == 2
    assert "--trained-on: with --npz, the model's earlier graph as an .npz, not snap1.csv" in capsys.readouterr().err


def test_the_deployed_models_outputs_on_a_later_table_confirm_the_carry_or_catch_a_refit_scaler(
    trained: tuple[Path, models.GCN, list[str], list[tuple[float, float]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--model-outputs`` with ``--trained-on``: the deployed model's outputs on the later table, as its pipeline
    feeds it (a scaler fitted once, on the first table), confirm what the audit carried; the same model behind a
    pipeline that fits its scaler again on each table gives other outputs, and the audit ends saying so."""
    folder, pyg, names, ranges = trained
    table, edges = _table(2, shift=0.3)
    _write(folder, "snap2", table, edges)
    raw = np.stack(
        [
            table[n].to_numpy(float) if "=" not in n else (table["region"] == n.split("=")[1]).to_numpy(float)
            for n in names
        ],
        axis=1,
    )

    def deployed(low: np.ndarray, high: np.ndarray) -> Path:
        x = torch.tensor(2 * (raw - low) / (high - low) - 1, dtype=torch.float32)
        with torch.no_grad():
            out = pyg(x, torch.tensor(edges).T).numpy()
        path = folder / f"outputs-{len(list(folder.glob('outputs-*')))}.npy"
        np.save(path, out)
        return path

    low, high = np.array(ranges).T
    once = deployed(low, high)  # the scaler fitted on the first table, as the audit carries it
    out = folder / "audit.json"
    more = ("--trained-on", str(folder / "snap1.csv"), "--model-outputs", str(once), "--json", str(out))
    assert main(_command(folder, "snap2", *more)) == 0
    assert "the outputs given for 240 nodes reproduced" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["supplied_model"]["outputs"]["matches"] is True and doc["supplied_model"]["carried"]["rescaled"]
    refit = deployed(raw.min(axis=0), np.where(raw.max(axis=0) > raw.min(axis=0), raw.max(axis=0), raw.min(axis=0) + 1))
    more = ("--trained-on", str(folder / "snap1.csv"), "--model-outputs", str(refit))
    assert main(_command(folder, "snap2", *more)) == 2
    said = capsys.readouterr().err
    assert "the model as read here does not give your outputs" in said
    assert "a scaler or encoder fitted again on this version" in said
