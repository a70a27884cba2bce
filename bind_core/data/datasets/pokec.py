"""Loaders of Pokec-z and Pokec-n: BIND's ``.npy`` arrays or FairGNN's original CSV layout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from bind_core.data.datasets.edgelist import read_edges
from bind_core.data.datasets.scaling import minmax_scale, nonconstant_columns
from bind_core.data.datasets.split import paper_split
from bind_core.data.datasets.tables import numeric_matrix, read_node_table, require_columns
from bind_core.data.graph import Graph
from bind_core.errors import DatasetNotFoundError, GraphValidationError

USER_ID = "user_id"
REGION = "region"
FIELD = "I_am_working_in_field"
CSV_FALLBACK_FOLDER = "pokec"
"""FairGNN keeps both Pokec CSVs in ``dataset/pokec/``; that folder name is searched too."""


@dataclass(frozen=True)
class PokecFiles:
    """The file names of one Pokec graph in both layouts."""

    folder: str
    npy_prefix: str
    csv_stem: str

    @property
    def npy(self) -> tuple[str, ...]:
        """The four ``.npy`` files (edges, features, labels, sens), relative to the dataset folder."""
        return tuple(f"{self.npy_prefix}_{part}.npy" for part in ("edges", "features", "labels", "sens"))

    @property
    def csv(self) -> tuple[str, str]:
        """FairGNN's node CSV and relationship file."""
        return f"{self.csv_stem}.csv", f"{self.csv_stem}_relationship.txt"


def find_csv_folder(root: Path, files: PokecFiles) -> Path | None:
    """The first of ``root/<folder>``, ``root/pokec`` holding both FairGNN files, or ``None``."""
    for folder in (root / files.folder, root / CSV_FALLBACK_FOLDER):
        if all((folder / f).is_file() for f in files.csv):
            return folder
    return None


def missing_npy(root: Path, files: PokecFiles) -> list[Path]:
    """The ``.npy`` files of the array layout that are absent."""
    return [root / files.folder / f for f in files.npy if not (root / files.folder / f).is_file()]


def load_pokec(name: str, root: Path, files: PokecFiles, *, split_seed: int) -> Graph:
    """Load a Pokec graph: the ``.npy`` layout when complete, else FairGNN's CSV layout.

    Raises:
        DatasetNotFoundError: neither layout is complete; names the first missing ``.npy`` file.
    """
    missing = missing_npy(root, files)
    if not missing:
        return _load_npy(name, root / files.folder, files, split_seed=split_seed)
    csv_folder = find_csv_folder(root, files)
    if csv_folder is not None:
        return load_pokec_csv(name, csv_folder, files, split_seed=split_seed)
    listed = ", ".join(str(p) for p in missing)
    raise DatasetNotFoundError(
        f"{name}: missing file {missing[0]} (missing: {listed}); alternatively place FairGNN's "
        f"{files.csv[0]} and {files.csv[1]} in {root / files.folder} or {root / CSV_FALLBACK_FOLDER}"
    )


def _load_npy(name: str, folder: Path, files: PokecFiles, *, split_seed: int) -> Graph:
    """BIND's ``load_pokec_renewed``, with the edge orientation fixed: features are used as stored."""
    arrays = {}
    for part, file in zip(("edges", "features", "labels", "sens"), files.npy, strict=True):
        try:
            arrays[part] = np.load(folder / file, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise GraphValidationError(part, f"cannot read {file} ({exc})") from exc
    edges = arrays["edges"]
    if edges.ndim == 2 and edges.shape[0] != 2 and edges.shape[1] == 2:
        edges = edges.T  # the paper's loader expects (E, 2); the staged files are (2, E)
    labels = arrays["labels"].reshape(-1)
    x = np.asarray(arrays["features"], dtype=np.float32)
    train, val, test = paper_split(labels, seed=split_seed)
    return Graph.build(
        x,
        edges,
        labels,
        arrays["sens"].reshape(-1),
        train,
        val,
        test,
        feature_names=[f"feature_{i}" for i in range(x.shape[1] if x.ndim == 2 else 0)],
        sensitive=("region",),
        name=name,
    )


def load_pokec_csv(name: str, folder: Path, files: PokecFiles, *, split_seed: int) -> Graph:
    """Build a Pokec graph from FairGNN's ``region_job*.csv`` and ``*_relationship.txt``.

    Following FairGNN's ``load_pokec`` and the generator of BIND's arrays: keep users with
    ``I_am_working_in_field >= 0`` and ``region >= 0`` and the friendships among them, take the largest
    connected component (CSV row order is kept; the generator's ``random.seed(19)`` node shuffle is not
    reproduced), ``label = min(label, 1)``, ``sens = region > 0``; features are all columns except
    ``user_id`` and the label, zero-variance columns dropped, min-max scaled to ``[-1, 1]``.
    ``node_ids`` are the ``user_id`` values.
    """
    table_file, edge_file = files.csv
    frame = read_node_table(folder / table_file)
    require_columns(frame, [USER_ID, REGION, FIELD])
    frame = frame.loc[(frame[FIELD] >= 0) & (frame[REGION] >= 0)].reset_index(drop=True)
    ids = pd.Index(frame[USER_ID].to_numpy(dtype=np.int64))
    if not ids.is_unique:
        raise GraphValidationError(USER_ID, "user ids must be unique")
    edges = _friendships(folder / edge_file, ids)
    n = len(frame)
    adj = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    _, component = connected_components(adj, directed=False)
    largest = int(np.bincount(component).argmax())
    keep = np.flatnonzero(component == largest)
    mapping = np.full(n, -1, dtype=np.int64)
    mapping[keep] = np.arange(keep.size)
    edges = mapping[edges]
    edges = edges[(edges >= 0).all(axis=1)]
    frame = frame.iloc[keep].reset_index(drop=True)
    columns = [c for c in frame.columns if c not in (USER_ID, FIELD)]
    x = numeric_matrix(frame, columns)
    kept = nonconstant_columns(x)
    x = minmax_scale(x[:, kept]).astype(np.float32)
    y = np.minimum(frame[FIELD].to_numpy(dtype=np.int64), 1)
    sens = (frame[REGION].to_numpy() > 0).astype(np.int64)
    train, val, test = paper_split(y, seed=split_seed)
    return Graph.build(
        x,
        edges,
        y,
        sens,
        train,
        val,
        test,
        feature_names=[columns[i] for i in kept],
        node_ids=ids.to_numpy()[keep],
        name=name,
        sensitive=("region",),
        node_id_column=USER_ID,
    )


def _friendships(path: Path, ids: pd.Index) -> np.ndarray:
    """Whitespace-separated user-id pairs mapped to row positions; pairs with an unknown id are dropped."""
    raw = read_edges(path)  # ids are parsed as integers, then matched here
    positions = ids.get_indexer(pd.Index(raw.reshape(-1))).reshape(-1, 2)
    return positions[(positions >= 0).all(axis=1)]
