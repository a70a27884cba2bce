"""Errors and notes of ``bind-audit run`` in its own terms: bind_core's parameters said as the command's flags."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from bind_core.errors import GraphValidationError, Option

FLAGS = {
    "nodes": "--table",
    "edges": "--edges",
    "npz": "--npz",
    "label": "--label",
    "sensitive": "--sensitive",
    "features": "--features",
    "split": "--split",
    "node_id": "--node-id",
    "unlabeled": "--unlabeled",
    "on_unknown_nodes": "--on-unknown-nodes",
    "allow_no_edges": "--allow-no-edges",
    "impute_missing": "--impute-missing",
    "max_categories": "--max-categories",
    "sensitive_bins": "--sensitive-bins",
    "name": "--name",
    "split_seed": "--split-seed",
    "scale": "--scale",
}
"""The flag of each parameter of :func:`~bind_core.data.datasets.ingest_files` the command takes."""


def flag(option: Option) -> str:
    """``option`` as the command line takes it: ``--on-unknown-nodes drop``, ``--impute-missing``, ``--scale off``,
    ``--features``
    (a value that starts with ``-`` after ``=``, quoted for the shell where it needs it); a parameter the
    command has no flag for keeps bind_core's name."""
    name = FLAGS.get(option.name)
    if name is None:
        return option.python()
    if option.value is None or option.value is True:
        return name
    if option.value is False:
        return f"{name} off"
    value = shlex.quote(str(option.value))
    return f"{name}={value}" if value.startswith("-") else f"{name} {value}"


def cli_text(exc: BaseException) -> str:
    """The message of ``exc`` for the command line: a graph error led by the flag at fault and its advice in
    flags (``--label: no column 'aproved' ...; did you mean 'approved'?``); any other error as it is."""
    if isinstance(exc, GraphValidationError) and hasattr(exc, "message"):
        return f"{FLAGS.get(exc.field, exc.field)}: {exc.text(flag)}"
    return str(exc)  # a subclass with a constructor of its own may set neither


def unwritable(path: str | os.PathLike[str]) -> str | None:
    """Why no file can be written at ``path``, checked before the work whose output it is (a missing folder, a
    folder where the file should be, no permission), or ``None`` where it can."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        return f"{target} is a folder"
    if not folder.exists():
        return f"the folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if target.exists() and not os.access(target, os.W_OK):
        return f"{target} is not writable"
    if not target.exists() and not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None
