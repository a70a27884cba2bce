"""Compressed node tables and edge lists (``.gz``, ``.zst``): unpacked to a temporary file, within a size cap."""

from __future__ import annotations

import gzip
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, cast

from bind_core.errors import GraphValidationError

COMPRESSED_SUFFIXES = (".gz", ".zst")
_CHUNK = 1 << 20


def inner_suffix(path: Path) -> str:
    """The suffix that says how to read the file: ``people.csv.gz`` -> ``.csv``, ``edges.txt`` -> ``.txt``."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED_SUFFIXES:
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


@contextmanager
def unpacked(path: Path, *, field: str, shown: str, max_bytes: int | None = None) -> Iterator[Path]:
    """Yield a plain file holding the content of ``path``: ``path`` itself, or its decompressed copy.

    Args:
        path: the file; ``.gz`` (gzip) or ``.zst`` (Zstandard, needs the ``zstandard`` package) are unpacked.
        field: the field named in errors.
        shown: the file name errors show.
        max_bytes: the most bytes the unpacked content may hold, ``None`` for no cap (a decompression bomb
            is refused as it unpacks, not after).

    Raises:
        GraphValidationError: corrupt compressed data, a missing codec, or content over ``max_bytes``.
    """
    suffix = path.suffix.lower()
    if not path.is_file():
        raise GraphValidationError(field, f"no such file: {shown}", file=shown)
    if suffix not in COMPRESSED_SUFFIXES:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bind-unpack-") as folder:
        target = Path(folder) / ("content" + inner_suffix(path))
        try:
            with _open(path, suffix, field, shown) as source, target.open("wb") as out:
                _copy_capped(source, out, max_bytes=max_bytes, field=field, shown=shown)
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            if isinstance(exc, GraphValidationError):
                raise
            raise GraphValidationError(
                field, f"{shown} is not valid {suffix} compressed data ({exc})", file=shown
            ) from exc
        yield target


def _open(path: Path, suffix: str, field: str, shown: str) -> IO[bytes]:
    if suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    try:
        import zstandard  # optional (not among the dependencies): only .zst uploads need it
    except ImportError as exc:
        raise GraphValidationError(
            field,
            f"{shown}: reading .zst files needs the zstandard package; send it uncompressed or as .gz",
            file=shown,
        ) from exc
    return cast(IO[bytes], zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True))


def _copy_capped(source: IO[bytes], out: IO[bytes], *, max_bytes: int | None, field: str, shown: str) -> None:
    if max_bytes is None:
        shutil.copyfileobj(source, out, _CHUNK)
        return
    written = 0
    while chunk := source.read(_CHUNK):
        written += len(chunk)
        if written > max_bytes:
            raise GraphValidationError(
                field, f"{shown} unpacks to more than the limit of {max_bytes} bytes", file=shown
            )
        out.write(chunk)
