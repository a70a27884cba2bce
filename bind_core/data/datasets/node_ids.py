"""The node-id column of a node table: exact 64-bit integer ids, or text ids."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bind_core.data.datasets.features import missing_mask
from bind_core.data.datasets.integers import parse_integers
from bind_core.data.datasets.offending import cell_error, table_rows


def node_id_index(series: pd.Series, column: str, *, file: str) -> tuple[pd.Index, np.ndarray | None]:
    """The index edges are matched against, and the int64 ``node_ids`` of the graph when every id is an integer.

    Ids that are all integers (``725731259612196864``, ``7``, ``7.0``, ``1.0e+02``; parsed exactly, never
    through float64) are int64 ids; otherwise every id is text, exactly as written: spaces are kept, so
    ``" user_3"`` and ``"user_3"`` are two ids (an edge list must write them the same way).

    Raises:
        GraphValidationError: a missing id, or an id that occurs twice (naming the rows).
    """
    missing = np.flatnonzero(missing_mask(series))
    if missing.size:
        raise cell_error(
            "nodes", "missing node ids", file=file, column=column, rows=table_rows(missing), values=[""] * missing.size
        )
    if pd.api.types.is_float_dtype(series.dtype):
        tokens = np.array([repr(float(v)) for v in series.tolist()], dtype=object)
    else:
        tokens = series.to_numpy(dtype=object)
    values, ok = parse_integers(tokens)
    index = pd.Index(values, dtype=np.int64) if ok.all() else pd.Index([str(t) for t in tokens], dtype=object)
    duplicated = np.flatnonzero(index.duplicated(keep=False))
    if duplicated.size:
        raise cell_error(
            "nodes",
            "node ids that occur more than once",
            file=file,
            column=column,
            rows=table_rows(duplicated),
            values=tokens[duplicated[:5]].tolist(),
            hint="node ids must be unique",
        )
    return index, (values if ok.all() else None)
