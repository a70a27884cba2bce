"""Receiving a multipart upload into a private temp folder, within a size limit, while it streams.

The body is counted as it arrives and refused with 413 the moment it passes ``max_bytes`` (or at once,
when ``Content-Length`` already says so), so a huge upload is never read in full. Files are stored under
names the server chooses; the client's file name is used only for its suffix, from a fixed list.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import BinaryIO

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from python_multipart.multipart import parse_options_header
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from app.core.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType, ValidationProblem

FILE_PARTS = ("nodes", "edges", "npz")
TABLE_OPTIONS = (
    "label",
    "sensitive",
    "features",
    "split",
    "node_id",
    "unlabeled",
    "on_unknown_nodes",
    "allow_no_edges",
    "impute_missing",
    "max_categories",
    "sensitive_bins",
    "scale",
)
"""Form fields that describe a node table and edge list (``bind_core.data.datasets.ingest_files`` options)."""
TABLE_DEFAULTS = {
    "on_unknown_nodes": "error",
    "allow_no_edges": "false",
    "impute_missing": "false",
    "max_categories": "20",
    "scale": "true",
}
"""The table options' declared defaults (the OpenAPI request body): a client generated from the document sends
them, so a field left at its default is not a table option given to an npz upload."""
FIELD_PARTS = (*TABLE_OPTIONS, "name")
_PARQUET_MAGIC = b"PAR1"
_COMPRESSED_MAGIC = {b"\x1f\x8b": ".gz", b"\x28\xb5\x2f\xfd": ".zst"}


@dataclass
class ReceivedUpload:
    """The form fields, and the files saved in ``folder`` (by part name)."""

    folder: Path
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    client_names: dict[str, str] = field(default_factory=dict)


def _too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"The upload is larger than the limit of {max_bytes} bytes.")


async def _limited(request: Request, max_bytes: int, tail: bytearray) -> AsyncGenerator[bytes, None]:
    """The body, refused past ``max_bytes``; its last :data:`TAIL` bytes kept in ``tail``."""
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > max_bytes:
            raise _too_large(max_bytes)
        tail.extend(chunk)
        del tail[:-TAIL]
        yield chunk


TAIL = 2048
"""Bytes kept from the end of a multipart body to find its closing delimiter in (a boundary is at most 70 bytes; the
rest leaves room for an epilogue)."""


def _unclosed(content_type: str, tail: bytes | bytearray) -> bool:
    """Whether a multipart body ends without its closing delimiter (``--boundary--``): cut off in transit, which
    the parser would take as a complete body with its last part dropped."""
    boundary = parse_options_header(content_type)[1].get(b"boundary", b"")
    return bool(boundary) and b"--" + boundary + b"--" not in tail


async def receive_upload(
    request: Request,
    folder: Path,
    max_bytes: int,
    *,
    file_parts: tuple[str, ...] = FILE_PARTS,
    field_parts: tuple[str, ...] = FIELD_PARTS,
    what: str = "graph",
) -> ReceivedUpload:
    """Parse ``request``'s multipart body, saving its files under ``folder``.

    ``file_parts`` and ``field_parts`` name the parts accepted as files and as plain fields (a name in both
    may come either way); ``what`` names the upload in the error for a body that is not multipart.

    Raises:
        PayloadTooLarge: the body is over ``max_bytes``.
        UnsupportedMediaType: not ``multipart/form-data``.
        BadRequest: a malformed multipart body.
        ValidationProblem: an unknown or repeated part.
    """
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise UnsupportedMediaType(f"Send the {what} as multipart/form-data.")
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise _too_large(max_bytes)
    tail = bytearray()
    parser = MultiPartParser(request.headers, _limited(request, max_bytes, tail), max_files=4, max_fields=24)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise BadRequest(f"Malformed multipart body: {exc.message}", slug="malformed-multipart") from exc
    if _unclosed(request.headers["content-type"], tail):
        await form.close()
        detail = "Malformed multipart body: it ends before its closing boundary (cut off?)."
        raise BadRequest(detail, slug="malformed-multipart")
    upload = ReceivedUpload(folder)
    try:
        errors = []
        for key, value in form.multi_items():
            if key in upload.fields or key in upload.files:
                errors.append({"field": key, "message": "given more than once"})
            elif isinstance(value, UploadFile) and key in file_parts:
                upload.files[key] = await _save(value, folder, key)
                upload.client_names[key] = value.filename or ""
            elif isinstance(value, str) and key in field_parts:
                upload.fields[key] = value
            else:
                kind = "file" if isinstance(value, UploadFile) else "field"
                expected = file_parts if kind == "file" else field_parts
                errors.append({"field": key, "message": f"unexpected {kind}; expected one of {list(expected)}"})
        if errors:
            raise ValidationProblem("The upload has unexpected parts.", errors=errors)
    finally:
        await form.close()
    return upload


async def _save(upload: UploadFile, folder: Path, part: str) -> Path:
    """Copy a part to ``folder/<part><suffix>``; the suffix tells bind_core how to read it."""
    return await run_in_threadpool(_copy, upload.file, folder, part, upload.filename)


def _copy(source: BinaryIO, folder: Path, part: str, client_name: str | None) -> Path:
    source.seek(0)
    head = source.read(4)
    source.seek(0)
    path = folder / (part + _suffix(part, head, client_name))
    with path.open("wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)
    return path


def _suffix(part: str, head: bytes, client_name: str | None) -> str:
    """The suffix bind_core reads the part by: from its first bytes (Parquet, gzip, Zstandard) and, for a text
    table, ``.tsv`` when the client's name says so; a compressed file gets ``.gz``/``.zst`` after that."""
    if part == "npz":
        return ".npz"
    packed = next((suffix for magic, suffix in _COMPRESSED_MAGIC.items() if head.startswith(magic)), "")
    if part == "edges":
        return ".txt" + packed
    if part != "nodes":
        return ".bin"
    if head == _PARQUET_MAGIC:
        return ".parquet"
    name = PurePath(client_name or "")
    inner = name.with_suffix("") if name.suffix.lower() in (".gz", ".zst") else name
    return (".tsv" if inner.suffix.lower() == ".tsv" else ".csv") + packed


def remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
