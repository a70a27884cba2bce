"""Which built-in dataset an audit or a schedule names, checked against the server's data root (``BIND_DATA_ROOT``)."""

from __future__ import annotations

from app.core.errors import ValidationProblem
from app.core.settings import Settings
from bind_core import BindError
from bind_core.data.datasets import available, canonical_name


def present_dataset(name: str, settings: Settings) -> str:
    """The canonical name of the built-in dataset ``name`` when the server's data root holds its files.

    Args:
        name: the dataset as the request gives it (a name or an alias, e.g. ``"bail"``).
        settings: the server's settings; ``settings.data_root`` is ``BIND_DATA_ROOT``.

    Returns:
        The canonical name (e.g. ``"recidivism"``).

    Raises:
        ValidationProblem: a 422 on the field ``dataset``: the server has no data root or the dataset's files are
            not under it (both name ``BIND_DATA_ROOT``), or the name is unknown (the valid names listed).
    """
    see = "GET /v1/datasets lists those present"
    if settings.data_root is None:
        why = "this server has no data root: start the API and its workers with BIND_DATA_ROOT set to the folder"
        raise _problem(name, f"{why} holding the datasets' files; {see}")
    try:
        canonical = canonical_name(name)
    except BindError as exc:
        raise _problem(name, f"{exc}; {see}") from exc
    if not any(info.name == canonical and info.present for info in available(settings.data_root)):
        raise _problem(name, f"its files are not under the server's data root (BIND_DATA_ROOT); {see}")
    return canonical


def _problem(name: str, why: str) -> ValidationProblem:
    return ValidationProblem(f"dataset {name!r}: {why}.", errors=[{"field": "dataset", "message": why}])
