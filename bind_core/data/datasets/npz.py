"""A Graph as one ``.npz`` archive (the format the service stores uploaded graphs in)."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from bind_core.data.datasets.limits import check_limit
from bind_core.data.datasets.split import PAPER_SPLIT_SEED, paper_split
from bind_core.data.graph import ArrayLike, Graph
from bind_core.data.naming import Naming
from bind_core.errors import BindError, GraphValidationError

REQUIRED_KEYS = ("x", "edge_index", "y", "sens")
SPLIT_KEYS = ("train_idx", "val_idx", "test_idx")
NAME_KEYS = ("sensitive", "group_meanings", "node_id_column", "node_keys", "label_name", "class_names")
"""The graph in the user's terms (:class:`~bind_core.data.graph.Graph`): text, optional."""
OPTIONAL_KEYS = (*SPLIT_KEYS, "node_ids", "feature_names", "feature_ranges", "name", "group_names", *NAME_KEYS)
TEXT_KEYS = ("feature_names", "name", "group_names", *NAME_KEYS)
MAX_TEXT_CHARS = 4096
"""The longest feature name, group name or graph name an archive may hold (its strings' declared width)."""
_NUMERIC_KINDS = "biuf"


def save_npz(graph: Graph, file: str | Path | BinaryIO) -> None:
    """Write ``graph`` as a compressed ``.npz`` that :func:`load_npz` reads back exactly.

    Keys: ``x`` (float32), ``edge_index`` (int64 ``[2, E]``), ``y``, ``sens``, ``train_idx``, ``val_idx``,
    ``test_idx``, ``node_ids`` (int64), ``feature_names`` and ``group_names`` (unicode), ``name`` (0-d unicode),
    ``feature_ranges`` (float64 ``[d, 2]``, empty when the features are as given) and the naming keys. No pickled
    objects, so it loads with ``allow_pickle=False``.

    Args:
        graph: the graph.
        file: a path or a writable binary file object.
    """
    np.savez_compressed(
        file,
        x=graph.x.numpy(),
        edge_index=graph.edge_index.numpy(),
        y=graph.y.numpy(),
        sens=graph.sens.numpy(),
        train_idx=graph.train_idx.numpy(),
        val_idx=graph.val_idx.numpy(),
        test_idx=graph.test_idx.numpy(),
        node_ids=graph.node_ids.numpy(),
        feature_names=np.array(graph.feature_names, dtype=np.str_),
        feature_ranges=np.array(graph.feature_ranges, dtype=np.float64).reshape(-1, 2),
        name=np.array(graph.name, dtype=np.str_),
        group_names=np.array(graph.group_names, dtype="U"),
        sensitive=np.array(graph.sensitive, dtype="U"),
        group_meanings=np.array(graph.group_meanings, dtype="U"),
        node_id_column=np.array([] if graph.node_id_column is None else [graph.node_id_column], dtype="U"),
        node_keys=np.array(graph.node_keys, dtype="U"),
        label_name=np.array([graph.label_name], dtype="U"),
        class_names=np.array(graph.class_names, dtype="U"),
    )


def _header_shapes(zf: zipfile.ZipFile) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of each ``.npy`` member, read from headers only (nothing is decompressed in bulk)."""
    shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy"):
            continue
        with zf.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        declared = int(np.prod(shape, dtype=np.float64) * dtype.itemsize) if dtype.itemsize else 0
        if declared > info.file_size:
            key = info.filename[: -len(".npy")]
            raise GraphValidationError(key, f"array header declares {declared} bytes but the member holds fewer")
        shapes[info.filename[: -len(".npy")]] = (tuple(shape), dtype)
    return shapes


def check_headers(
    shapes: dict[str, tuple[tuple[int, ...], np.dtype]],
    *,
    max_nodes: int | None = None,
    max_edges: int | None = None,
    max_columns: int | None = None,
) -> None:
    """Refuse an archive from its ``.npy`` headers alone: every array that will be read is checked for its
    dtype, its shape against ``x``'s node and column counts, and those counts against the limits.

    So an archive whose arrays could not form a graph (a 500,000 × 128 ``x`` beside a 2-element ``y``) is
    refused before any array is inflated, and the arrays then read are no larger than the graph they form.

    Args:
        shapes: ``{key: (shape, dtype)}`` of the archive's members (``_header_shapes``).
        max_nodes: the most nodes accepted (``None``: unlimited).
        max_edges: the most ``edge_index`` pairs accepted.
        max_columns: the most feature columns accepted.

    Raises:
        GraphValidationError: naming the key at fault.
    """
    missing = [key for key in REQUIRED_KEYS if key not in shapes]
    if missing:
        raise GraphValidationError(missing[0], f"key {missing[0]!r} missing from the .npz archive")
    for key, (shape, dtype) in shapes.items():
        if key in TEXT_KEYS:
            _check_text(key, shape, dtype)
        elif key in (*REQUIRED_KEYS, *OPTIONAL_KEYS) and dtype.kind not in _NUMERIC_KINDS:
            raise GraphValidationError(key, f"expected a numeric array, got dtype {dtype}")
    x_shape = shapes["x"][0]
    if len(x_shape) != 2:
        raise GraphValidationError("x", f"expected a 2-D [nodes, features] matrix, got {list(x_shape)}")
    n, d = int(x_shape[0]), int(x_shape[1])
    check_limit("x", "nodes", n, max_nodes)
    check_limit("x", "feature columns", d, max_columns)
    for key in ("y", "sens", "node_ids"):
        shape = shapes[key][0] if key in shapes else (n,)
        if shape != (n,) and not (key == "node_ids" and shape == (0,)):
            raise GraphValidationError(key, f"expected shape [{n}] (one per node), got {list(shape)}")
    _check_edge_header(shapes["edge_index"][0], max_edges)
    present_splits = [key for key in SPLIT_KEYS if key in shapes]
    if present_splits and len(present_splits) != len(SPLIT_KEYS):
        absent = sorted(set(SPLIT_KEYS) - set(present_splits))
        raise GraphValidationError(absent[0], "give train_idx, val_idx and test_idx together, or none")
    for key in present_splits:
        shape = shapes[key][0]
        if len(shape) != 1 or shape[0] > n:
            raise GraphValidationError(key, f"expected a 1-D index of at most {n} nodes, got shape {list(shape)}")
    limits = {"feature_names": d, "group_names": n, "name": 1, "sensitive": d + 1, "group_meanings": n}
    singles = (("node_id_column", 1), ("label_name", 1), ("class_names", n), ("node_keys", n))
    if "feature_ranges" in shapes and shapes["feature_ranges"][0] not in ((0, 2), (d, 2)):
        got = list(shapes["feature_ranges"][0])
        raise GraphValidationError("feature_ranges", f"expected shape [{d}, 2] (one (min, max) per column), got {got}")
    for key, most in (*limits.items(), *singles):
        size = _size(shapes[key][0]) if key in shapes else 0
        if size > most:
            raise GraphValidationError(key, f"{size} entries, more than the {most} expected")


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.float64)) if shape else 1


def _check_text(key: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """A text member must be unicode (or empty) of strings at most ``MAX_TEXT_CHARS`` long."""
    if dtype.kind != "U" and _size(shape):
        raise GraphValidationError(key, f"expected unicode strings, got dtype {dtype}")
    if dtype.kind == "U" and dtype.itemsize // 4 > MAX_TEXT_CHARS:
        chars = dtype.itemsize // 4
        raise GraphValidationError(key, f"strings of {chars} characters, more than the {MAX_TEXT_CHARS} accepted")


def _check_edge_header(shape: tuple[int, ...], max_edges: int | None) -> None:
    """``edge_index`` is ``[2, E]``, ``[E, 2]`` or empty, with ``E`` within ``max_edges``."""
    if len(shape) == 1 and shape[0] == 0:
        return
    if len(shape) != 2 or 2 not in shape:
        raise GraphValidationError("edge_index", f"expected shape [2, E] or [E, 2], got {list(shape)}")
    pairs = shape[1] if shape[0] == 2 else shape[0]
    check_limit("edge_index", "edges", int(pairs), max_edges)


def load_npz(
    file: str | Path | bytes | BinaryIO,
    *,
    split_seed: int = PAPER_SPLIT_SEED,
    max_nodes: int | None = None,
    max_edges: int | None = None,
    max_columns: int | None = None,
    name: str | None = None,
) -> Graph:
    """Read a graph from an ``.npz`` archive (``allow_pickle=False``).

    Required keys: ``x`` ``[n, d]``, ``edge_index`` (``[2, E]`` or ``[E, 2]``, either or both directions),
    ``y``, ``sens``. Optional: ``feature_ranges`` (``[d, 2]``: the features were min-max scaled from these),
    ``train_idx``, ``val_idx``, ``test_idx`` (all three or none; without them
    :func:`paper_split` with ``split_seed`` is used), ``node_ids``, ``feature_names``, ``name``,
    ``group_names``. Edges are cleaned by :meth:`Graph.build` (self-loops dropped, duplicates merged), so a
    file written by :func:`save_npz` round-trips exactly.

    Args:
        file: a path, the archive's bytes, or a readable binary file object.
        split_seed: seed of the paper split when the archive holds none.
        max_nodes: the most nodes accepted (``None``: unlimited), checked from the array headers.
        max_edges: the most ``edge_index`` pairs accepted.
        max_columns: the most feature columns accepted.
        name: the graph's name, overriding the archive's ``name``.

    Raises:
        GraphValidationError: not a readable ``.npz``, a key missing, object arrays, a limit exceeded,
            or the arrays do not form a valid graph.
    """
    arrays = _read_arrays(file, max_nodes=max_nodes, max_edges=max_edges, max_columns=max_columns)
    _check_arrays(arrays)
    train: ArrayLike
    val: ArrayLike
    test: ArrayLike
    if "train_idx" in arrays:
        train, val, test = (arrays[key] for key in SPLIT_KEYS)
    else:
        train, val, test = paper_split(arrays["y"].reshape(-1), seed=split_seed)
    feature_names = tuple(str(s) for s in arrays["feature_names"].reshape(-1)) if "feature_names" in arrays else ()
    if feature_names and len(feature_names) != arrays["x"].shape[1]:
        raise GraphValidationError(
            "feature_names", f"{len(feature_names)} names for {arrays['x'].shape[1]} feature columns"
        )
    group_names = tuple(str(s) for s in arrays["group_names"].reshape(-1)) if "group_names" in arrays else ()
    stored_name = str(arrays["name"].reshape(-1)[0]) if "name" in arrays and arrays["name"].size else "graph"
    naming = _names(arrays)
    naming["feature_names"], naming["group_names"] = feature_names, group_names
    naming["name"] = name if name is not None else stored_name
    ranges = arrays.get("feature_ranges")
    feature_ranges = [] if ranges is None else [(float(lo), float(hi)) for lo, hi in ranges.reshape(-1, 2).tolist()]
    return Graph.build(
        arrays["x"],
        arrays["edge_index"],
        arrays["y"],
        arrays["sens"],
        train,
        val,
        test,
        node_ids=arrays.get("node_ids"),
        feature_ranges=feature_ranges,
        **naming,
    )


_READ_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    TypeError,
    RuntimeError,
    NotImplementedError,
    SyntaxError,
    struct.error,
    zlib.error,
)
"""What numpy and zipfile raise on a damaged archive."""


def _read_arrays(
    file: str | Path | bytes | BinaryIO, *, max_nodes: int | None, max_edges: int | None, max_columns: int | None
) -> dict[str, np.ndarray]:
    """The archive's known arrays, once its headers pass the limits (nothing is decompressed before)."""
    source: str | Path | BinaryIO = io.BytesIO(file) if isinstance(file, bytes | bytearray) else file
    try:
        with zipfile.ZipFile(source) as zf:
            shapes = _header_shapes(zf)
        if hasattr(source, "seek"):
            source.seek(0)
        check_headers(shapes, max_nodes=max_nodes, max_edges=max_edges, max_columns=max_columns)
        with np.load(source, allow_pickle=False) as archive:
            return {key: archive[key] for key in (*REQUIRED_KEYS, *OPTIONAL_KEYS) if key in shapes}
    except BindError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise GraphValidationError("npz", f"not a valid .npz (zip) archive ({exc})") from exc
    except _READ_ERRORS as exc:
        raise GraphValidationError("npz", f"cannot read the .npz archive ({type(exc).__name__}: {exc})") from exc


def _check_arrays(arrays: dict[str, np.ndarray]) -> None:
    """Text arrays hold unicode, the others numbers; ``x`` is a matrix."""
    for key, arr in arrays.items():
        if key in TEXT_KEYS:
            if arr.dtype.kind not in "U" and arr.size:
                raise GraphValidationError(key, f"expected unicode strings, got dtype {arr.dtype}")
        elif arr.dtype.kind not in "biuf":
            raise GraphValidationError(key, f"expected a numeric array, got dtype {arr.dtype}")
    if arrays["x"].ndim != 2:
        raise GraphValidationError("x", f"expected a 2-D [nodes, features] matrix, got {list(arrays['x'].shape)}")


def _names(arrays: dict[str, np.ndarray]) -> Naming:
    """``Graph.build``'s arguments that say the graph in the user's terms, from the archive's optional keys."""

    def text(key: str) -> tuple[str, ...]:
        return tuple(str(s) for s in arrays[key].reshape(-1)) if key in arrays else ()

    column, label = text("node_id_column"), text("label_name")
    return {
        "label_name": label[0] if label else "y",
        "class_names": text("class_names"),
        "sensitive": text("sensitive") or ("sens",),
        "group_meanings": text("group_meanings"),
        "node_id_column": column[0] if column else None,
        "node_keys": text("node_keys"),
    }
