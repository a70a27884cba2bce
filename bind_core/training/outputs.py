"""A supplied model's outputs as its owner computed them, against the model as the audit reads it.

The audit describes the model it rebuilds from the weights and config, fed the graph's features. Whether that is the
model the owner deployed, fed what it is fed there, only the owner's own forward pass can say: a graph uploaded with
the default scaling while the model was trained on the table's values, feature columns in another order, a module of
the owner's own class whose forward is not the class's (:mod:`bind_core.models.pyg`, ``layer_names``) each give
another model, and an audit of it, however exact, is about that other model. So the owner may give their model's
outputs on the graph's nodes (:func:`read_outputs`: an ``.npy`` of every node in the graph's order, or a CSV of node
ids and outputs), and :func:`compare_outputs` reads them as logits (or log-probabilities, which a softmax reads the
same) or as probabilities, whichever is closer, and compares the probabilities they give with the model's own within
:data:`OUTPUTS_TOLERANCE`. Where they differ the model is refused (:class:`OutputsDifferError`, with what most likely
differs); where they agree the inputs are confirmed, and the fit check
(:func:`~bind_core.training.fit_check.check_training_fit`) no longer doubts them.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from bind_core.codec import key
from bind_core.data.graph import Graph
from bind_core.data.graph_inputs import ArrayLike
from bind_core.data.labels import user_ids
from bind_core.errors import ConfigError, GraphValidationError

__all__ = [
    "OUTPUTS_TOLERANCE",
    "GivenOutputs",
    "OutputsDifferError",
    "OutputsMatch",
    "compare_outputs",
    "outputs_problem",
    "read_outputs",
]

OUTPUTS_TOLERANCE = 1e-4
"""The largest difference of a predicted probability between the owner's outputs and the model as read that counts
as the same model (a float32 forward pass against the audit's float64 differs by ~1e-7)."""


@dataclass(frozen=True)
class GivenOutputs:
    """The owner's outputs on some of a graph's nodes (:func:`read_outputs`, :meth:`of`).

    Attributes:
        values: ``[k, c]`` float64: logits, log-probabilities or probabilities, as the owner's code gave them.
        rows: ``[k]`` the graph's node indices they are of.
        form: ``array`` (every node, in the graph's order) or ``table`` (rows named by their node ids).
    """

    values: Tensor
    rows: Tensor
    form: str

    @classmethod
    def of(cls, values: ArrayLike, graph: Graph, node_ids: ArrayLike | None = None) -> GivenOutputs:
        """Outputs computed in Python.

        Args:
            values: ``[k]`` or ``[k, c]``, a tensor or an array (e.g. ``model(data.x, data.edge_index)``).
            graph: the graph they were computed on.
            node_ids: the user's ids of the ``k`` nodes (:meth:`Graph.rows_of
                <bind_core.data.graph.Graph.rows_of>`); default: every node of ``graph``, in its order.

        Returns:
            The :class:`GivenOutputs`.

        Raises:
            ConfigError: the rows do not fit the graph or the ids, or a value is not a finite number.
        """
        array = values.detach().cpu().numpy() if isinstance(values, Tensor) else np.asarray(values)
        if array.dtype.kind not in "fiu" or array.ndim not in (1, 2):
            raise ConfigError(f"outputs: numbers [nodes] or [nodes, outputs] expected, got {array.dtype} of shape "
                              f"{list(array.shape)}")  # fmt: skip
        table = torch.from_numpy(np.asarray(array, dtype=np.float64)).reshape(array.shape[0], -1)
        if node_ids is None:
            if table.shape[0] != graph.num_nodes:
                raise ConfigError(
                    f"outputs: {table.shape[0]} rows where the graph has {graph.num_nodes} nodes: give every node, "
                    "in the graph's order, or name the nodes (a .csv of node ids and outputs)"
                )
            return cls(_finite(table), torch.arange(graph.num_nodes), "array")
        ids = node_ids.tolist() if isinstance(node_ids, Tensor | np.ndarray) else list(node_ids)
        try:
            rows = graph.rows_of(ids)
        except GraphValidationError as exc:
            raise ConfigError(f"outputs: {exc}") from exc
        if rows.numel() != table.shape[0]:
            raise ConfigError(f"outputs: {table.shape[0]} rows for {rows.numel()} node ids")
        seen: set[int] = set()
        for node, row in zip(ids, rows.tolist(), strict=True):
            if row in seen:
                raise ConfigError(f"outputs: node {node!r} is given twice")
            seen.add(row)
        return cls(_finite(table), rows, "table")


@dataclass(kw_only=True)
class OutputsMatch:
    """The owner's outputs against the model as read (:func:`compare_outputs`).

    Attributes:
        nodes: the nodes compared.
        reading: ``logits`` or ``probabilities``, whichever reading is closer.
        max_difference: the largest difference of a predicted probability.
        at_node: the user's id of the node where it is largest.
        differing: the nodes that differ by more than ``tolerance``.
        tolerance: :data:`OUTPUTS_TOLERANCE`.
        matches: every compared probability within it.
    """

    nodes: int = key("integer: the nodes whose outputs were given and compared")
    reading: str = key("string: how they were read, logits (through a softmax or sigmoid) or probabilities")
    max_difference: float = key("number: the largest difference of a predicted probability")
    at_node: int | str = key("the user's id of the node where it is largest")
    differing: int = key("integer: the nodes whose probabilities differ by more than the tolerance")
    reordered: bool | None = key(
        "boolean: where they differ, each output column holds the model's values, in another order of nodes (rows "
        "given for other nodes than the graph's order says); absent where they match",
        optional=True,
    )
    tolerance: float = key("number: the largest difference that counts as the same model")
    matches: bool = key("boolean: every compared probability within the tolerance: the audit reads the owner's model")


class OutputsDifferError(ConfigError):
    """The owner's outputs are not the model's as read.

    Args:
        message: what most likely differs (:func:`outputs_problem`).
        match: the comparison's figures.
    """

    def __init__(self, message: str, match: OutputsMatch) -> None:
        super().__init__(message)
        self.match = match


def read_outputs(data: bytes, filename: str, graph: Graph) -> GivenOutputs:
    """The owner's outputs from a file.

    Args:
        data: the file's bytes: an ``.npy`` (never a pickle) of shape ``[n]`` or ``[n, c]``, one row per node of
            ``graph`` in its order, or a ``.csv`` whose first column holds the user's node ids (the graph's id
            column's values, else the rows' positions from 0) and whose other columns the outputs, any subset of
            nodes in any order.
        filename: its name, whose suffix (``.npy``, ``.csv``) says which.
        graph: the graph they were computed on.

    Returns:
        The :class:`GivenOutputs`.

    Raises:
        ConfigError: the file is neither, or does not fit the graph (its rows, an unknown or repeated id, a value
            that is not a finite number), each said.
    """
    name = filename.lower()
    if name.endswith(".npy"):
        return _from_array(data, graph)
    if name.endswith(".csv"):
        return _from_table(data, graph)
    raise ConfigError(f"outputs: {filename!r} is neither .npy (every node, in the graph's order) nor .csv (node ids)")


def _from_array(data: bytes, graph: Graph) -> GivenOutputs:
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ConfigError(f"outputs: not a numpy .npy file of numbers ({exc})") from exc
    return GivenOutputs.of(array, graph)


def _from_table(data: bytes, graph: Graph) -> GivenOutputs:
    try:
        lines = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"outputs: not a UTF-8 CSV ({exc})") from exc
    lines = [line for line in lines if line]
    if len(lines) < 2 or len(lines[0]) < 2:
        raise ConfigError("outputs: a CSV needs a header, the node id column and at least one output column, and rows")
    width = len(lines[0])
    ids: list[int | str] = []
    rows: list[list[float]] = []
    for number, line in enumerate(lines[1:], start=2):
        if len(line) != width:
            raise ConfigError(f"outputs: line {number} has {len(line)} fields where the header has {width}")
        bad = next((v for v in line[1:] if not _number(v)), None)
        if bad is not None:
            raise ConfigError(f"outputs: line {number}: {bad!r} is not a number")
        rows.append([float(v) for v in line[1:]])
        ids.append(line[0] if graph.node_keys else _integer_id(line[0], number))
    return GivenOutputs.of(np.array(rows, dtype=np.float64), graph, node_ids=ids)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _integer_id(text: str, number: int) -> int:
    """A node id of a graph whose ids are integers, as a CSV may write one (``12``, or ``12.0`` from a float column)."""
    try:
        return int(text)  # exactly, whatever its size
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer():
        raise ConfigError(f"outputs: line {number}: the node id {text!r} is not one of this graph's integer ids")
    return int(value)


def _finite(values: Tensor) -> Tensor:
    if not bool(torch.isfinite(values).all()):
        raise ConfigError("outputs: some value is not a finite number")
    return values


def compare_outputs(proba: Tensor, given: GivenOutputs, graph: Graph) -> OutputsMatch:
    """The owner's outputs against the model's probabilities ``proba`` (``[n, C]``, in the model's own output order),
    read as logits or as probabilities, whichever is closer.

    Raises:
        ConfigError: the outputs have another number of columns than the model has outputs (one logit counts for
            two classes).
    """
    ours = proba.double()[given.rows]
    values = given.values
    classes = ours.shape[1]
    if values.shape[1] == 1 and classes == 2:
        ours = ours[:, 1:]
        candidates = {"logits": torch.sigmoid(values), "probabilities": values}
    elif values.shape[1] == classes:
        candidates = {"logits": torch.softmax(values, dim=1), "probabilities": values}
    else:
        raise ConfigError(
            f"outputs: {values.shape[1]} columns where the model has {classes} outputs (one per class, output 0 first;"
            " or one logit for two classes)"
        )
    gaps = {reading: (theirs - ours).abs().amax(dim=1) for reading, theirs in candidates.items()}
    reading = min(gaps, key=lambda r: float(gaps[r].max()))  # the closer reading
    reordered = None
    if float(gaps[reading].max()) > OUTPUTS_TOLERANCE:  # a reading whose values are the model's, for other nodes?
        permuted = [r for r in candidates if _same_values(candidates[r], ours)]
        reading, reordered = (permuted[0], True) if permuted else (reading, False)
    gap = gaps[reading]
    worst = float(gap.max())
    at = int(given.rows[int(gap.argmax())])
    return OutputsMatch(
        nodes=int(given.rows.numel()),
        reading=reading,
        max_difference=worst,
        at_node=user_ids(graph, [at])[0],
        differing=int((gap > OUTPUTS_TOLERANCE).sum()),
        reordered=reordered,
        tolerance=OUTPUTS_TOLERANCE,
        matches=worst <= OUTPUTS_TOLERANCE,
    )


def _same_values(theirs: Tensor, ours: Tensor) -> bool:
    """Whether each column holds the same values in some order of its rows (outputs given for other nodes)."""
    return float((theirs.sort(dim=0).values - ours.sort(dim=0).values).abs().max()) <= OUTPUTS_TOLERANCE


ROUNDING_SIZED = 1e-2
"""Outputs that differ by less than this (a probability) most likely come from inputs that differ a little (a table
written with fewer digits) rather than from another scaling or columns, which move them by far more."""


def outputs_problem(
    match: OutputsMatch, graph: Graph, *, layer_names: bool = False, form: str = "table", carried: bool = False
) -> str:
    """Why the owner's outputs differ from the model as read, in what most likely differs (``carried``: on another
    version of the graph the model was registered for, its inputs carried over to the registration's)."""
    if match.reordered:
        where = (
            "the .npy's rows are not in the graph's order of nodes (the node table's row order): give them so, or a "
            ".csv that names each row's node id"
            if form == "array"
            else "the .csv names other nodes than the rows are of: check its node id column"
        )
        return (
            f"the outputs given are the model's own, but for other nodes: {match.differing} of {match.nodes} nodes "
            f"differ by more than {match.tolerance:g} in a predicted probability (read as {match.reading}), yet each "
            f"output's values are the model's in another order; {where}"
        )
    causes = []
    if match.max_difference < ROUNDING_SIZED:
        causes.append(
            f"inputs that differ only a little (the largest difference is {match.max_difference:.2g}): the node "
            "table's values rounded (written with fewer digits than your code fed the model), or the model run in "
            "another precision; compute the outputs from the table as uploaded"
        )
    if carried:
        causes.append(
            "this version is fed to the deployed model otherwise than the audit carries it over (each column by name, "
            "scaled as at registration): a scaler or encoder fitted again on this version, or another column order "
            "or encoding than the registration's"
        )
    elif graph.feature_ranges:
        causes.append(
            "the graph's features were min-max scaled to [-1, 1] when it was read: if the model is fed the table's "
            "own values, read it again without scaling (the API's scale=false, bind-audit run --scale off)"
        )
    causes.append("other feature columns, or another order of them, than the model is fed")
    if layer_names:
        causes.append("a forward of your module that is not its class's (a skip connection, another activation)")
    if form == "array":
        causes.append("the .npy's rows in another order than the graph's nodes (a .csv names them by id)")
    return (
        f"the model as read here does not give your outputs: {match.differing} of {match.nodes} nodes differ by more "
        f"than {match.tolerance:g} in a predicted probability (read as {match.reading}; the largest difference "
        f"{match.max_difference:.3g}, at node {match.at_node}), so an audit would describe another model than yours. "
        "Most likely: " + "; or ".join(causes)
    )
