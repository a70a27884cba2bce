"""``bind-audit run --trained-on``: a supplied model audited on a later table of its graph, with that table's
features read as the model reads them (the columns, order and scale of the table it was trained on), as the
service carries a registered model to a new version (:func:`bind_core.pipeline.carry_inputs`; docs/cli.md, "A
model on a later table")."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from bind_core.data.carry import InputSchema, carry_inputs
from bind_core.data.graph import Graph
from bind_core.data.records import CarriedInputs
from bind_core.errors import ConfigError

ReadTable = Callable[[Path], Graph]
"""Reads a node table with the audited table's options (``--label``, ``--features``, ``--scale``, ...), no edges;
or, with ``--npz``, an archive as ``--npz`` is read."""


def add_carry_options(group: argparse._ArgumentGroup) -> None:
    """``--trained-on`` and ``--unknown-categories``, in the ``--table`` group."""
    group.add_argument(
        "--trained-on",
        type=Path,
        metavar="TABLE",
        help="with --model-weights: the node table (or .npz, with --npz) the model was trained on, when --table "
        "(--npz) is a later one; it is read with the same options (a table's edges are not needed) and the later "
        "one's features are carried to its columns, order and scale, as the model reads them",
    )
    group.add_argument(
        "--unknown-categories",
        choices=("refuse", "ignore"),
        default=None,
        help="with --trained-on: a category --table has and the trained-on table lacks (a one-hot column the model "
        "has no input for): refuse (default) or ignore (its nodes read as none of the model's categories of that "
        "column, as an encoder set to ignore unknown values gives them to a deployed model)",
    )


def check_carry_options(args: argparse.Namespace) -> None:
    """Refuse ``--trained-on`` without ``--table`` (or ``--npz``, then with an ``.npz``) and ``--model-weights``,
    and ``--unknown-categories`` without ``--trained-on`` (:class:`ConfigError`), before any graph is read."""
    if args.trained_on is None:
        if args.unknown_categories is not None:
            raise ConfigError("--unknown-categories applies only to --trained-on")
        return
    later = args.table if args.table is not None else args.npz
    missing = [o for o, v in (("--table or --npz", later), ("--model-weights", args.model_weights)) if v is None]
    if missing:
        raise ConfigError(f"--trained-on needs {' and '.join(missing)}: it reads a supplied model's later table")
    if args.npz is not None and args.trained_on.suffix.lower() != ".npz":
        raise ConfigError(f"--trained-on: with --npz, the model's earlier graph as an .npz, not {args.trained_on.name}")


def carry_to_trained(args: argparse.Namespace, graph: Graph, read: ReadTable) -> tuple[Graph, CarriedInputs | None]:
    """``graph`` as the model of ``--model-weights`` reads it (carried to the ``--trained-on`` table's reading) and
    the record of what was carried; ``graph`` itself and ``None`` without ``--trained-on``
    (:func:`check_carry_options` first).

    Raises:
        ModelDoesNotFitError: ``--table``'s columns, label or classes are not the trained-on table's (each named).
    """
    if args.trained_on is None:
        return graph, None
    schema = InputSchema.of(
        read(args.trained_on),
        unknown_categories=args.unknown_categories or "refuse",
        trained_on=args.trained_on.name,
    )
    return carry_inputs(graph, schema)
