"""Hostile uploads refused from their headers, before the data is read: a CSV header hiding its columns
behind a quoted newline, and ``.npz`` archives whose arrays cannot form a graph (issue 16)."""

from __future__ import annotations

import io
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hostile_files import zeros_npz

from bind_core.data.datasets import load_npz, synthetic
from bind_core.data.datasets.tables import header_columns, read_node_table
from bind_core.errors import GraphValidationError

MiB = 2**20


def _measured(call: Callable[[], Any]) -> tuple[GraphValidationError, float, float]:
    """``call``'s refusal, the seconds it took and the peak of Python allocations (MiB) meanwhile."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(GraphValidationError) as caught:
            call()
        return caught.value, time.perf_counter() - start, tracemalloc.get_traced_memory()[1] / MiB
    finally:
        tracemalloc.stop()


HEADERS = [
    b"a,b\n1,2\n",
    b'"a\nb",c\n1,2\n',  # a quoted newline: one column name on two lines
    b'"a,b\n",c,d\n1,2,3\n',  # a quoted separator and newline
    b'"a""b",c\n1,2\n',  # a doubled quote inside quotes
    b'a"b,c\n1,2\n',  # a quote inside an unquoted field is a character
    b'"a"x"y,c\n1,2\n',  # text after the closing quote belongs to the field
    b"\n\n a,b\n1,2\n",  # blank lines before the header are skipped
    b"  \r\n\r\r\n\t\na,b,c\n",  # lines of spaces and tabs too
    b",,\na,b\n",  # a line of separators is the header
    b"a,b\r1,2\r",
    b"a,b\r\n1,2\r\n",
    b"\xef\xbb\xbfa,b\n1,2\n",
    b'"",""\n1,2\n',
    b"a,b,\n1,2,3\n",
]


@pytest.mark.parametrize("sep", [",", "\t"])
@pytest.mark.parametrize("content", HEADERS)
def test_header_columns_agree_with_pandas(tmp_path: Path, content: bytes, sep: str) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(content.replace(b",", sep.encode()))
    assert header_columns(path, sep) == len(pd.read_csv(path, sep=sep, nrows=0).columns)


def test_header_columns_stop_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b",".join(b"c%d" % i for i in range(1000)) + b"\n")
    assert header_columns(path, ",") == 1000
    assert header_columns(path, ",", stop_after=10) == 11
    path.write_bytes(b"")
    assert header_columns(path, ",") == 0


def test_quoted_newline_header_is_refused_before_pandas(tmp_path: Path) -> None:
    """``"a\\nb",c0,…,c99999`` (0.9 MB): the raw first line has one column, the parsed header 100,001."""
    path = tmp_path / "wide.csv"
    header = b'"a\nb",' + b",".join(b"c%d" % i for i in range(100_000)) + b"\n"
    path.write_bytes(header + b"1," + b",".join(b"0" for _ in range(100_000)) + b"\n")
    error, seconds, peak = _measured(lambda: read_node_table(path, max_columns=10_000))
    assert error.field == "nodes" and str(error) == "nodes: 10001 columns exceed the limit of 10000"
    # pandas took ~8 s and ~270 MiB on this header; the scan takes milliseconds and allocates nothing.
    assert seconds < 2 and peak < 5, (seconds, peak)


def _archive(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def test_inflating_npz_is_refused_from_its_headers() -> None:
    """100,000 × 128 float64 zeros (100 kB compressed, 98 MiB inflated) beside a ``y`` of two nodes.

    The API test (tests/security/test_upload_attacks.py) sends the issue's 500,000 × 128."""
    data = zeros_npz(100_000, 128, edge_index=np.array([[0], [1]]), y=np.array([0, 1]), sens=np.array([0, 1]))
    assert len(data) < 1 * MiB
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # it inflates to what it says
        assert archive.getinfo("x.npy").file_size > 100_000 * 128 * 8
    error, seconds, peak = _measured(lambda: load_npz(data, max_nodes=2_000_000, max_columns=10_000))
    assert error.field == "y" and "expected shape [100000] (one per node), got [2]" in str(error)
    assert peak < 20 and seconds < 2, (seconds, peak)  # x was read first: its 98 MiB (490 MiB and 4.6 s at 500,000)


@pytest.fixture(scope="module")
def arrays() -> dict[str, np.ndarray]:
    g = synthetic(num_nodes=100)
    return {"x": g.x.numpy(), "edge_index": g.edge_index.numpy(), "y": g.y.numpy(), "sens": g.sens.numpy()}


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"sens": np.zeros((100, 2), dtype=np.int64)}, "sens", "expected shape [100] (one per node), got [100, 2]"),
        ({"node_ids": np.arange(101)}, "node_ids", "expected shape [100]"),
        ({"edge_index": np.zeros((3, 5), dtype=np.int64)}, "edge_index", "expected shape [2, E] or [E, 2]"),
        ({"edge_index": np.zeros((2, 2, 2), dtype=np.int64)}, "edge_index", "expected shape [2, E] or [E, 2]"),
        (
            {"train_idx": np.arange(101), "val_idx": np.arange(1), "test_idx": np.arange(1)},
            "train_idx",
            "at most 100 nodes",
        ),
        ({"feature_names": np.array([f"f{i}" for i in range(500)])}, "feature_names", "500 entries"),
        ({"group_names": np.array(["g"] * 101)}, "group_names", "101 entries"),
        ({"name": np.array(["a", "b"])}, "name", "2 entries"),
        ({"name": np.array(["n" * 5000])}, "name", "strings of 5000 characters"),
        ({"y": np.array(["a"] * 100)}, "y", "expected a numeric array, got dtype <U1"),
        ({"x": np.ones(100)}, "x", "expected a 2-D [nodes, features] matrix"),
    ],
)
def test_npz_headers_are_checked_against_x(
    arrays: dict[str, np.ndarray], changes: dict[str, np.ndarray], field: str, message: str
) -> None:
    with pytest.raises(GraphValidationError) as caught:
        load_npz(_archive(**(arrays | changes)))
    assert caught.value.field == field and message in str(caught.value), caught.value


def test_npz_header_limits(arrays: dict[str, np.ndarray]) -> None:
    data = _archive(**arrays)
    assert load_npz(data, max_nodes=100, max_columns=arrays["x"].shape[1]).num_nodes == 100
    with pytest.raises(GraphValidationError, match="100 nodes exceed the limit of 99"):
        load_npz(data, max_nodes=99)
    with pytest.raises(GraphValidationError, match="feature columns exceed"):
        load_npz(data, max_columns=arrays["x"].shape[1] - 1)
