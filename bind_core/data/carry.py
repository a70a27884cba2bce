"""A supplied model on another version of its graph: the inputs it was registered with, checked against the
version's and re-expressed as the model reads them.

A model is registered for one graph (``POST /v1/models``), and a deployed model meets each new version of that graph
(a scheduled audit). The model reads its inputs by position, so the version must give it what the registration gave
it: the same feature columns, in the same order, on the same scale, and the same label with the same classes in the
same order. :func:`carry_inputs` checks that against an :class:`InputSchema` read from the registration's graph and
hands back the version with its features as the model reads them:

- columns named alike on both sides but in another order are put in the registration's order; a one-hot column
  (``column=value``) of a category no node of the version has is a column of zeros, as the registration's encoding
  makes it; a category the registration never saw (a one-hot column of the version the model has no input for) is
  refused, unless the registration says its encoder ignores unknown values (``InputSchema.unknown_categories``
  ``"ignore"``): that column is then left out, and its nodes read as none of the model's categories of that column;
- features min-max scaled to ``[-1, 1]`` when a version was read (``Graph.feature_ranges``) were scaled by that
  version's own minima and maxima, so the same raw value reads differently in two versions: the version's raw values
  are recovered from its ranges and scaled by the registration's (values outside the registration's range then fall
  outside ``[-1, 1]``, as they would reach a deployed model whose scaler was fitted once); a version scaled where the
  registration was not is unscaled, and the other way round scaled by the registration's ranges;
- other columns, another label or other classes are refused (:class:`~bind_core.errors.ModelDoesNotFitError`, each
  difference named), never guessed.

What is carried is said in a :class:`~bind_core.data.records.CarriedInputs` record (the results'
``supplied_model.carried``), with the sentence an audit's attribution finding adds: the version's training nodes are
not the ones the model was trained on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from bind_core.data.carry_words import CarryWords
from bind_core.data.datasets.scaling import scale_by, unscale_by
from bind_core.data.graph import Graph
from bind_core.data.records import CarriedInputs
from bind_core.errors import ModelDoesNotFitError

__all__ = ["InputSchema", "UnknownCategories", "carry_inputs"]

UnknownCategories = Literal["refuse", "ignore"]
"""What a version's category the model was registered without becomes: ``"refuse"`` (the audit fails, the column
named) or ``"ignore"`` (its nodes read as none of the model's categories of that column)."""


@dataclass(frozen=True)
class InputSchema:
    """What a supplied model was registered to read: its graph's feature columns (names, when the graph has them, in
    order, and each column's ``(min, max)`` where they were min-max scaled), label and classes.

    Attributes:
        features: the number of feature columns.
        feature_names: their names, in order; empty where the graph names none.
        feature_ranges: each column's ``(min, max)`` before it was scaled to ``[-1, 1]``; empty: not scaled.
        label: the label's name.
        class_names: each class's value, output 0 first; empty where the graph names none (the codes).
        unknown_categories: what a later version's category the registration never saw becomes (a one-hot column
            ``column=value`` of a column the registration one-hot encodes too): ``"refuse"`` (the default: the audit
            fails naming it) or ``"ignore"`` (left out; its nodes read as none of the model's categories of that
            column, as an encoder fitted once and set to ignore unknown values gives them to the deployed model).
        trained_on: empty (the default) for a model registered with the service; else the name of the data the
            model was trained on (the command line's ``--trained-on`` table, ``'snap1.csv'``): the refusals and the
            record's sentence then speak of that table and of "this table", not of a registration and a version.
    """

    features: int
    feature_names: tuple[str, ...] = ()
    feature_ranges: tuple[tuple[float, float], ...] = ()
    label: str = "y"
    class_names: tuple[str, ...] = ()
    unknown_categories: UnknownCategories = "refuse"
    trained_on: str = ""

    @classmethod
    def of(cls, graph: Graph, *, unknown_categories: UnknownCategories = "refuse", trained_on: str = "") -> InputSchema:
        """The schema a model registered for ``graph`` reads.

        Args:
            graph: the graph the model was registered for.
            unknown_categories: how the model's encoder treats a category it never saw (:class:`InputSchema`).
            trained_on: the name of the data ``graph`` was read from, where the model was trained on it rather than
                registered for it (:class:`InputSchema`).

        Returns:
            The :class:`InputSchema` of ``graph``'s columns, scaling, label and classes.
        """
        if unknown_categories not in ("refuse", "ignore"):
            raise ValueError(f"unknown_categories must be 'refuse' or 'ignore', not {unknown_categories!r}")
        return cls(
            features=graph.num_features,
            feature_names=graph.feature_names,
            feature_ranges=graph.feature_ranges,
            label=graph.label_name,
            class_names=graph.class_names,
            unknown_categories=unknown_categories,
            trained_on=trained_on,
        )


def carry_inputs(graph: Graph, schema: InputSchema) -> tuple[Graph, CarriedInputs]:
    """``graph`` with its features as a model registered with ``schema`` reads them (see the module docstring).

    Args:
        graph: the version to audit the model on.
        schema: what the model was registered to read (:meth:`InputSchema.of` of its registration's graph).

    Returns:
        ``(graph, record)``: the version with its feature columns in the schema's order and on its scale (``graph``
        itself where nothing changes), and the :class:`~bind_core.data.records.CarriedInputs` record of what was done.

    Raises:
        ModelDoesNotFitError: the version's feature columns (their number or names), label or classes are not the
            schema's (a category the schema never saw included, unless it ignores them); every difference is named.
    """
    columns, ignored, problems = _column_order(graph, schema)
    problems += _label_problems(graph, schema)
    if problems:
        raise ModelDoesNotFitError(problems)
    present = [] if columns is None else [j for j in columns if j is not None]
    reordered = present != sorted(present)
    filled = [] if columns is None else [n for n, j in zip(schema.feature_names, columns, strict=True) if j is None]
    ranges = graph.feature_ranges
    if columns is not None and ranges:
        ranges = tuple((0.0, 0.0) if j is None else ranges[j] for j in columns)  # a filled column: raw 0 everywhere
    rescaled = ranges != schema.feature_ranges and bool(ranges or schema.feature_ranges)
    ignored_nodes = _nodes_with(graph, ignored)
    record = CarriedInputs(
        columns_named=bool(graph.feature_names) and bool(schema.feature_names),
        columns_reordered=reordered,
        rescaled=rescaled,
        scaled_as_registered=bool(schema.feature_ranges),
        filled=filled or None,
        ignored=ignored or None,
        ignored_nodes=ignored_nodes if ignored else None,
        trained_on=schema.trained_on or None,
        text=_text(reordered, rescaled, filled, (ignored, ignored_nodes), schema),
    )
    if not reordered and not rescaled and not filled and not ignored:
        return graph, record
    if rescaled:
        x = _rescaled(graph.x, graph.feature_ranges, columns, schema.feature_ranges)
    else:  # the same scale: the values themselves, exactly, in the schema's order
        x = _placed(graph.x, columns)
    names = schema.feature_names if columns is not None else graph.feature_names
    carried = dataclasses.replace(graph, x=x, feature_names=names, feature_ranges=schema.feature_ranges)
    return carried, record


def _column_order(
    graph: Graph, schema: InputSchema
) -> tuple[list[int | None] | None, list[str], list[tuple[str, str]]]:
    """The version's column for each of the schema's, in the schema's order (``None`` for a one-hot category this
    version has no node of: filled with zeros; the whole order ``None``: compared by count alone, one side names
    none), the version's columns of categories the schema never saw that it ignores (left out), and the problems that
    stop it."""
    words = CarryWords.of(schema.trained_on)
    if graph.num_features != schema.features and not (graph.feature_names and schema.feature_names):
        why = f"{words.model_was} {schema.features} feature columns; {words.here} has {graph.num_features}"
        return None, [], [("in_dim", why)]
    if not (graph.feature_names and schema.feature_names):
        return None, [], []
    where = {name: j for j, name in enumerate(graph.feature_names)}
    encoded = _encoded(graph.feature_names)  # one-hot columns here
    missing = [n for n in schema.feature_names if n not in where and not _absent_category(n, encoded)]
    registered, registered_encoded = set(schema.feature_names), _encoded(schema.feature_names)
    extra = [n for n in graph.feature_names if n not in registered]
    unseen = [n for n in extra if "=" in n and n.split("=", 1)[0] in registered_encoded]
    ignored = unseen if schema.unknown_categories == "ignore" else []
    extra = sorted(set(extra) - set(ignored))
    problems = []
    if missing:
        problems.append(("feature_names", f"{words.here} lacks the model's column(s) {_listed(missing)}"))
    if extra:
        why = f"{words.here} has column(s) {words.model_was_not}: {_listed(extra)}"
        if set(unseen) & set(extra):
            why += (
                f" (a category the model never saw is refused: {words.ignore_advice} to read such nodes as none of "
                "its categories, as an encoder set to ignore unknown values does)"
            )
        problems.append(("feature_names", why))
    if problems:
        return None, [], problems
    return [where.get(name) for name in schema.feature_names], ignored, []


def _encoded(names: tuple[str, ...]) -> set[str]:
    """The columns one-hot encoded among ``names`` (``column`` of each ``column=value``)."""
    return {name.split("=", 1)[0] for name in names if "=" in name}


def _nodes_with(graph: Graph, columns: list[str]) -> int:
    """The nodes with a 1 in any of the one-hot ``columns`` (the version's, by name; raw values, read above one
    half, so that a scaled column's rounding does not count): those of a category left out."""
    if not columns:
        return 0
    at = [graph.feature_names.index(name) for name in columns]
    values = graph.x[:, at].detach().cpu().numpy().astype(np.float64)
    if graph.feature_ranges:
        values = unscale_by(values, *np.array([graph.feature_ranges[j] for j in at], dtype=np.float64).T)
    return int(np.count_nonzero(np.any(values > 0.5, axis=1)))


def _absent_category(name: str, encoded: set[str]) -> bool:
    """Whether ``name`` is a one-hot column (``column=value``) of a column this version one-hot encodes too, without
    a node of that value: the column is zero on every node, as the registration's encoding would make it."""
    return "=" in name and name.split("=", 1)[0] in encoded


def _placed(x: torch.Tensor, columns: list[int | None] | None) -> torch.Tensor:
    """``x``'s columns in the schema's order, zeros for the filled ones."""
    if columns is None:
        return x
    zeros = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    return torch.stack([zeros if j is None else x[:, j] for j in columns], dim=1)


def _label_problems(graph: Graph, schema: InputSchema) -> list[tuple[str, str]]:
    problems, words = [], CarryWords.of(schema.trained_on)
    if graph.label_name != schema.label:
        why = f"{words.model_was} the label {schema.label!r}; {words.here}'s is {graph.label_name!r}"
        problems.append(("label", why))
    if graph.class_names != schema.class_names:
        registered = _listed(schema.class_names) if schema.class_names else "codes"
        now = _listed(graph.class_names) if graph.class_names else f"{graph.num_classes} codes"
        problems.append(("classes", f"{words.model_was} the classes {registered}; {words.here} has {now}"))
    return problems


def _rescaled(
    x: torch.Tensor,
    ranges: tuple[tuple[float, float], ...],
    columns: list[int | None] | None,
    registered: tuple[tuple[float, float], ...],
) -> torch.Tensor:
    """``x`` (scaled by ``ranges``, or raw where empty) as raw values in the schema's order (``columns``; zeros for a
    filled column), scaled by ``registered`` (or raw where empty), in float64 before it is stored as float32. A
    zero-width range maps every value to 0 (as :func:`~bind_core.data.datasets.scaling.minmax_scale` does)."""
    values = x.detach().cpu().numpy().astype(np.float64)
    if ranges:
        values = unscale_by(values, *np.array(ranges, dtype=np.float64).T)
    if columns is not None:
        zeros = np.zeros(values.shape[0])
        values = np.stack([zeros if j is None else values[:, j] for j in columns], axis=1)
    if registered:
        values = scale_by(values, *np.array(registered, dtype=np.float64).T)
    return torch.from_numpy(values).to(dtype=x.dtype, device=x.device)


def _text(
    reordered: bool, rescaled: bool, filled: list[str], ignored: tuple[list[str], int], schema: InputSchema
) -> str:
    done, words = [], CarryWords.of(schema.trained_on)
    if reordered:
        done.append(f"its feature columns put in the order the model was {words.done} with")
    if filled:
        done.append(f"the categories no node of it has, {_listed(filled)}, given as zero columns")
    if ignored[0]:
        nodes = f"{ignored[1]} node{'s' if ignored[1] != 1 else ''}"
        done.append(
            f"the categories the model was never {words.done} with, {_listed(ignored[0])}, left out as "
            f"{words.ignoring} ({nodes} of them read as none of its categories of that column)"
        )
    if rescaled:
        scale = f"scaled by {words.source}'s minima and maxima" if schema.feature_ranges else "unscaled"
        done.append(f"its features {scale}, as the model was {words.done} to read them")
    carried = "; ".join(done) or f"its feature columns, label and classes are {words.source}'s"
    return (
        f"The model was {words.on_another} ({carried}). Its training nodes here are {words.here}'s, not necessarily "
        f"those it was trained on: the attribution says which of them would move the model if it were refit on "
        f"{words.here} from its weights."
    )


def _listed(names: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(repr(n) for n in names[:8])
    return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")
