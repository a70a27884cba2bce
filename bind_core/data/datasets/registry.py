"""The named datasets of the BIND paper: ``load`` by name and ``available`` for listings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bind_core.data.datasets.paper_csv import load_paper_csv
from bind_core.data.datasets.pokec import PokecFiles, find_csv_folder, load_pokec, missing_npy
from bind_core.data.datasets.split import PAPER_SPLIT_SEED
from bind_core.data.graph import Graph
from bind_core.errors import DatasetNotFoundError


@dataclass(frozen=True)
class DatasetInfo:
    """What a listing of the datasets shows.

    Attributes:
        name: the canonical name ``load`` accepts (and ``Graph.name``).
        title: the name in the paper.
        aliases: other accepted names (BIND's CLI names).
        present: whether the files needed to load it are under the data root.
        missing: the missing files, relative to the data root (POSIX style); empty when present.
    """

    name: str
    title: str
    aliases: tuple[str, ...]
    present: bool
    missing: tuple[str, ...]


@dataclass(frozen=True)
class _Spec:
    name: str
    title: str
    aliases: tuple[str, ...]
    loader: Callable[[Path, int], Graph]
    missing: Callable[[Path], list[Path]]


def _csv_spec(
    name: str, title: str, aliases: tuple[str, ...], folder: str, meanings: tuple[str, ...] = (), **kw: str
) -> _Spec:
    def loader(root: Path, seed: int) -> Graph:
        return load_paper_csv(name, root / folder, split_seed=seed, meanings=meanings, **kw)

    def missing(root: Path) -> list[Path]:
        files = (kw["table"], kw["edge_file"])
        return [root / folder / f for f in files if not (root / folder / f).is_file()]

    return _Spec(name, title, aliases, loader, missing)


def _pokec_spec(name: str, title: str, aliases: tuple[str, ...], files: PokecFiles) -> _Spec:
    def loader(root: Path, seed: int) -> Graph:
        return load_pokec(name, root, files, split_seed=seed)

    def missing(root: Path) -> list[Path]:
        return [] if find_csv_folder(root, files) is not None else missing_npy(root, files)

    return _Spec(name, title, aliases, loader, missing)


_SPECS: tuple[_Spec, ...] = (
    _csv_spec(
        "income",
        "Income",
        (),
        "income",
        table="income.csv",
        edge_file="income_edges.txt",
        label="income",
        sensitive="race",  # which group 1.0 stands for is not documented (datasets README)
    ),
    _csv_spec(
        "recidivism",
        "Recidivism",
        ("bail",),
        "bail",
        table="bail.csv",
        edge_file="bail_edges.txt",
        label="RECID",
        sensitive="WHITE",
        meanings=("not white", "white"),  # the column's name; the provenance (datasets README) gives no more
    ),
    _pokec_spec("pokec_z", "Pokec-z", ("pokec1",), PokecFiles("pokec1", "region_job_1", "region_job")),
    _pokec_spec("pokec_n", "Pokec-n", ("pokec2",), PokecFiles("pokec2", "region_job_2_2", "region_job_2")),
)

DATASET_NAMES: tuple[str, ...] = tuple(spec.name for spec in _SPECS)
"""Canonical dataset names, in the paper's order."""


def _resolve(name: str) -> _Spec:
    key = name.strip().lower().replace("-", "_")
    for spec in _SPECS:
        if key == spec.name or key in spec.aliases:
            return spec
    valid = ", ".join(f"{s.name} ({', '.join(s.aliases)})" if s.aliases else s.name for s in _SPECS)
    raise DatasetNotFoundError(f"unknown dataset {name!r}; valid names: {valid}")


def canonical_name(name: str) -> str:
    """The canonical name of ``name`` or of its alias (``"bail"`` -> ``"recidivism"``).

    Raises:
        DatasetNotFoundError: unknown name; the message lists the valid names.
    """
    return _resolve(name).name


def load(name: str, root: str | Path, *, split_seed: int = PAPER_SPLIT_SEED) -> Graph:
    """Load a dataset of the BIND paper, preprocessed and split as the paper's code does.

    Args:
        name: ``income``, ``recidivism`` (alias ``bail``), ``pokec_z`` (alias ``pokec1``) or ``pokec_n``
            (alias ``pokec2``); case-insensitive, ``-`` accepted for ``_``.
        root: the data root holding the ``income/``, ``bail/``, ``pokec1/``, ``pokec2/`` folders.
        split_seed: seed of :func:`paper_split` (the paper uses 20).

    Returns:
        The graph, named by its canonical name, with ``feature_names`` set.

    Raises:
        DatasetNotFoundError: unknown name (listing the valid ones) or a file missing (naming its path).
    """
    spec = _resolve(name)
    return spec.loader(Path(root), split_seed)


def available(root: str | Path) -> list[DatasetInfo]:
    """Every named dataset and whether its files are under ``root`` (nothing is loaded).

    A Pokec graph counts as present when either its four ``.npy`` files or FairGNN's CSV pair are there;
    ``missing`` then lists the absent ``.npy`` files.
    """
    base = Path(root)
    infos = []
    for spec in _SPECS:
        missing = tuple(p.relative_to(base).as_posix() for p in spec.missing(base))
        infos.append(DatasetInfo(spec.name, spec.title, spec.aliases, not missing, missing))
    return infos
