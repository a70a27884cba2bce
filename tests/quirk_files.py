"""Small node tables and edge lists with the quirks real published graphs have, written as files.

Shared by the library tests (``from_files``), the command line tests and the HTTP upload tests, so that each
quirk is checked the same way through all three. Every table has ``N`` nodes, ids ``100 + i`` unless a quirk
changes them, a label ``good`` (0/1) and a sensitive ``gender`` (``F``/``M``) balanced so that the paper
split puts every (group, class) pair in the test split.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

N = 40
PURPOSES = ["business", "car", "education", "furniture", "holiday", "others", "radio", "repairs", "retrain", "tv"]
BIG = 725731259612196864
"""A 64-bit id above 2^53 (float64 cannot hold it and its neighbours apart)."""


def people(n: int = N) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame(
        {
            "id": 100 + i,
            "amount": 1000.0 + 37.0 * ((i * 7) % 13),
            "purpose": [PURPOSES[k % len(PURPOSES)] for k in i],
            "married": i % 3 == 0,
            "gender": np.where(i % 2 == 0, "F", "M"),
            "good": np.where(i % 4 < 2, 1, 0),
        }
    )


def ring(ids: list[str] | np.ndarray, *, header: str | None = "src,dst", sep: str = ",") -> str:
    lines = [header] if header else []
    lines += [f"{ids[k]}{sep}{ids[(k + 1) % len(ids)]}" for k in range(len(ids))]
    return "\n".join(lines) + "\n"


def write(folder: Path, table: pd.DataFrame, edges: str, *, nodes: str = "people.csv", edge_file: str = "edges.csv"):
    nodes_path, edges_path = folder / nodes, folder / edge_file
    csv = table.to_csv(index=False).encode()
    nodes_path.write_bytes(gzip.compress(csv) if nodes.endswith(".gz") else csv)
    edges_path.write_bytes(gzip.compress(edges.encode()) if edge_file.endswith(".gz") else edges.encode())
    return nodes_path, edges_path


def text_feature(folder: Path) -> tuple[Path, Path]:
    """A loan purpose with ten values among numeric columns, and a boolean column."""
    table = people()
    return write(folder, table, ring(table["id"].astype(str).tolist()))


def big_ids(folder: Path) -> tuple[Path, Path]:
    """Social-network ids above 2^53; the edge list writes one of them as ``725731259612196871.0``."""
    table = people()
    table["id"] = BIG + 7 * np.arange(N)
    ids = [str(v) for v in table["id"]]
    ids[1] = f"{ids[1]}.0"
    return write(folder, table, ring(ids, header=None, sep="\t"), edge_file="edges.txt")


def float_ids(folder: Path) -> tuple[Path, Path]:
    """Ids written as whole floats in both files (``1.0e+02``), the way numpy.savetxt writes them."""
    table = people()
    frame = table.astype({"id": object})
    frame["id"] = [f"{v / 100:g}e+02" for v in table["id"]]
    ids = [f"{float(v):.18e}" for v in table["id"]]
    return write(folder, frame, ring(ids, header=None, sep=" "), edge_file="edges.txt")


def sentinel_label(folder: Path) -> tuple[Path, Path]:
    """A label of -1 (unlabeled) beside 0/1, on every fifth node."""
    table = people()
    table.loc[table.index % 5 == 4, "good"] = -1
    return write(folder, table, ring(table["id"].astype(str).tolist()))


def dangling_edges(folder: Path) -> tuple[Path, Path]:
    """An edge list that also names ids 9999 and 8888, absent from the node table (lines 3 and 5)."""
    table = people()
    text = ring(table["id"].astype(str).tolist()).splitlines()
    text.insert(2, "100,9999")
    text.insert(4, "8888,101")
    return write(folder, table, "\n".join(text) + "\n")


def extra_edge_columns(folder: Path) -> tuple[Path, Path]:
    """An edge list with weight and timestamp columns."""
    table = people()
    ids = table["id"].astype(str).tolist()
    lines = ["src,dst,weight,timestamp"] + [f"{ids[k]},{ids[(k + 1) % N]},0.5,2021-01-0{k % 9 + 1}" for k in range(N)]
    return write(folder, table, "\n".join(lines) + "\n")


def gzipped(folder: Path) -> tuple[Path, Path]:
    """Both files gzip-compressed."""
    table = people()
    return write(folder, table, ring(table["id"].astype(str).tolist()), nodes="people.csv.gz", edge_file="edges.csv.gz")


def empty_edges(folder: Path) -> tuple[Path, Path]:
    """A zero-byte edge file."""
    return write(folder, people(), "")


def continuous_sensitive(folder: Path) -> tuple[Path, Path]:
    """An age in years (40 distinct values) to be used as the sensitive column."""
    table = people()
    table["age"] = 20 + np.arange(N)
    return write(folder, table, ring(table["id"].astype(str).tolist()))


def near_duplicate_groups(folder: Path) -> tuple[Path, Path]:
    """Groups ``F``, ``F `` (a trailing space) and ``M``; and a numeric ``branch`` of 1234567 / 1234568."""
    table = people()
    table["gender"] = np.where(np.arange(N) % 4 == 0, "F ", table["gender"])
    table["branch"] = np.where(np.arange(N) % 2 == 0, 1234567, 1234568)
    return write(folder, table, ring(table["id"].astype(str).tolist()))


def stray_text(folder: Path, *, stray: bool = True, column: str = "income") -> tuple[Path, Path]:
    """A numeric column (40 distinct values) with missing-value tokens in data rows 3, 7 and 20 (``unknown``,
    ``n/a``, ``?``; pandas itself reads ``n/a`` as missing) and, with ``stray``, stray text (``12,5``) in row 30."""
    table = people()
    cells = [str(20000 + 250 * k) for k in range(N)]
    cells[3], cells[7], cells[20] = "unknown", "n/a", "?"
    if stray:
        cells[30] = "12,5"
    table[column] = cells
    return write(folder, table, ring(table["id"].astype(str).tolist()))
