"""Loaders of the BIND paper's CSV datasets: Income and Recidivism (``bail``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bind_core.data.datasets.edgelist import read_edges
from bind_core.data.datasets.scaling import minmax_scale
from bind_core.data.datasets.split import paper_split
from bind_core.data.datasets.tables import encode_codes, numeric_matrix, read_node_table, require_columns
from bind_core.data.graph import Graph
from bind_core.errors import DatasetNotFoundError


def load_paper_csv(
    name: str,
    folder: Path,
    *,
    table: str,
    edge_file: str,
    label: str,
    sensitive: str,
    split_seed: int,
    meanings: tuple[str, ...] = (),
) -> Graph:
    """Load a node CSV and a 0-based edge list the way BIND's ``load_income``/``load_bail`` do.

    Features are all CSV columns except the label (the sensitive column stays a feature), each min-max
    scaled to ``[-1, 1]`` (constant columns become 0). The directed edge rows are symmetrised; no
    self-loops are added (``Graph`` stores none). The split is :func:`paper_split` with ``split_seed``.

    Args:
        name: the graph's name.
        folder: the dataset folder.
        table: the node CSV's file name.
        edge_file: the edge list's file name.
        label: the label column.
        sensitive: the sensitive column.
        split_seed: seed of the paper split.
        meanings: what each of the sensitive column's values (in sorted order) stands for, where the dataset's
            provenance documents it (``Graph.group_meanings``).

    Raises:
        DatasetNotFoundError: a file is missing.
    """
    for file in (table, edge_file):
        if not (folder / file).is_file():
            raise DatasetNotFoundError(f"{name}: missing file {folder / file}")
    frame: pd.DataFrame = read_node_table(folder / table)
    require_columns(frame, [label, sensitive])
    columns = [c for c in frame.columns if c != label]
    y, classes = encode_codes(frame[label], label)
    sens, group_names = encode_codes(frame[sensitive], sensitive)
    x = minmax_scale(numeric_matrix(frame, columns)).astype(np.float32)
    edges = read_edges(folder / edge_file)
    train, val, test = paper_split(y, seed=split_seed)
    return Graph.build(
        x,
        edges,
        y,
        sens,
        train,
        val,
        test,
        feature_names=columns,
        name=name,
        group_names=group_names,
        sensitive=(sensitive,),
        group_meanings=meanings,
        label_name=label,
        class_names=classes,
    )
