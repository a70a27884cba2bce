"""Uploaded graphs: validating an upload with bind_core, and storing, listing and deleting graphs."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.orm import Session

from app.core.db.tables import ACTIVE_STATES, Audit, Graph, Tenant
from app.core.errors import Conflict, NotFound, ValidationProblem, bind_error_problem, request_field
from app.core.pagination import newest_first
from app.core.settings import Settings
from app.graphs.uploads import TABLE_DEFAULTS, TABLE_OPTIONS, ReceivedUpload
from app.graphs.versions import add_version
from bind_core import BindError
from bind_core.codec import encode
from bind_core.data.datasets import ingest_files, load_npz, save_npz
from bind_core.pipeline.results import GraphSummary


@dataclass(frozen=True)
class ParsedGraph:
    name: str
    summary: GraphSummary
    """Stored as its JSON (``bind_core.codec.encode``); an upload of tables says what reading them did (``ingest``)."""
    data: bytes
    """The graph as ``bind_core.data.datasets.save_npz`` bytes."""


def _check_unpacked_size(path: Path, limit: int) -> None:
    """Refuse an archive whose members would unpack to more than ``limit`` bytes (a zip bomb).

    The sizes are the archive's own declarations; Python's zipfile never inflates a member past its
    declared size, so the sum bounds what loading can allocate. An unreadable archive is left to bind_core.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return
    if unpacked > limit:
        raise ValidationProblem(
            f"The npz archive unpacks to {unpacked} bytes, over the limit of {limit}.",
            slug="invalid-graph",
            title="Invalid graph",
            errors=[{"field": "npz", "message": f"unpacks to more than {limit} bytes"}],
        )


def parse_upload(upload: ReceivedUpload, settings: Settings) -> ParsedGraph:
    """Validate an upload with bind_core's rules (CPU-heavy: call it from a worker thread).

    Raises:
        ValidationProblem: missing or conflicting parts, or a graph bind_core rejects (naming the field).
    """
    files, fields = upload.files, upload.fields
    name = _graph_name(fields.get("name"), upload.client_names.get("npz") or upload.client_names.get("nodes"))
    try:
        if "npz" in files:
            clash = [k for k in ("nodes", "edges") if k in files] + [
                k for k in TABLE_OPTIONS if k in files or (k in fields and not _at_default(k, fields[k]))
            ]
            if clash:
                raise ValidationProblem(
                    "Send either one npz file, or a nodes table with an edges file.",
                    errors=[{"field": k, "message": "does not apply to an npz upload"} for k in clash],
                )
            _check_unpacked_size(files["npz"], settings.max_unpacked_bytes)
            graph = load_npz(
                files["npz"],
                name=name,
                max_nodes=settings.max_nodes,
                max_edges=settings.max_edges,
                max_columns=settings.max_columns,
            )
            summary = graph.summary()
        else:
            required = [k for k in ("nodes", "edges") if k not in files]
            required += [k for k in ("label", "sensitive") if not fields.get(k, "").strip()]
            if required:
                raise ValidationProblem(
                    "A graph upload is a nodes table, an edges file and the label and sensitive column names "
                    "(or one npz file).",
                    errors=[{"field": k, "message": "required"} for k in required],
                )
            ingested = ingest_files(
                files["nodes"],
                files["edges"],
                **table_options(fields),
                name=name,
                nodes_name=_shown(upload.client_names.get("nodes"), "nodes"),
                edges_name=_shown(upload.client_names.get("edges"), "edges"),
                max_nodes=settings.max_nodes,
                max_edges=settings.max_edges,
                max_columns=settings.max_columns,
                max_unpacked_bytes=settings.max_unpacked_bytes,
            )
            graph, summary = ingested.graph, ingested.summary(request_field)
    except BindError as exc:
        raise bind_error_problem(exc) from exc
    buffer = io.BytesIO()
    save_npz(graph, buffer)
    return ParsedGraph(name=graph.name, summary=summary, data=buffer.getvalue())


_FLAGS = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}


def _at_default(option: str, value: str) -> bool:
    """Whether a table option's form value is empty or its declared default (what a generated client sends)."""
    return not value.strip() or value.strip().lower() == TABLE_DEFAULTS.get(option)


def table_options(fields: dict[str, str]) -> dict[str, Any]:
    """The ``ingest_files`` options the form fields give (empty fields are absent).

    Raises:
        ValidationProblem: a flag that is not true/false, an ``on_unknown_nodes`` other than error/drop, a
            ``max_categories`` that is not a positive integer.
    """
    given = {k: v.strip() for k, v in fields.items() if k in TABLE_OPTIONS and v.strip()}
    errors = []
    options: dict[str, Any] = {"label": given.get("label"), "sensitive": given.get("sensitive")}
    options |= {k: given.get(k) for k in ("split", "node_id", "unlabeled", "sensitive_bins")}
    options["features"] = _columns(given.get("features"))
    for flag, default in (("allow_no_edges", "false"), ("impute_missing", "false"), ("scale", "true")):
        value = _FLAGS.get(given.get(flag, default).lower())
        if value is None:
            errors.append(
                {"field": flag, "value": given[flag], "message": f"must be true or false, got {given[flag]!r}"}
            )
        options[flag] = bool(value)
    options["on_unknown_nodes"] = given.get("on_unknown_nodes", "error").lower()
    if options["on_unknown_nodes"] not in ("error", "drop"):
        bad = given["on_unknown_nodes"]
        errors.append({"field": "on_unknown_nodes", "value": bad, "message": f"must be error or drop, got {bad!r}"})
    if "max_categories" in given:
        cap = given["max_categories"]
        if not cap.isdigit() or int(cap) < 1:
            errors.append(
                {"field": "max_categories", "value": cap, "message": f"must be a positive integer, got {cap!r}"}
            )
        else:
            options["max_categories"] = int(cap)
    if errors:
        raise ValidationProblem("; ".join(f"{e['field']}: {e['message']}" for e in errors), errors=errors)
    return options


def _shown(client_name: str | None, part: str) -> str:
    """The client's file name (its last path component, printable, at most 200 characters), or the part."""
    name = PureWindowsPath(client_name or "").name
    return "".join(ch for ch in name if ch.isprintable())[:200] or part


def _columns(value: str | None) -> list[str] | None:
    """The ``features`` field: comma-separated column names, or a JSON array of them (which a name holding a comma
    needs, and which clients that send lists write)."""
    if value is None or not value.strip():
        return None
    if value.lstrip().startswith("["):
        try:
            listed = json.loads(value)
        except ValueError:
            listed = None
        if isinstance(listed, list) and all(isinstance(c, str) for c in listed):
            return [c.strip() for c in listed if c.strip()]
    return [c.strip() for c in value.split(",") if c.strip()]


def _graph_name(given: str | None, client_file: str | None) -> str:
    # PureWindowsPath splits on both "/" and "\\": "..\\x\\g.npz" and "../x/g.npz" both give "g".
    file = PureWindowsPath(client_file or "")
    if file.suffix.lower() in (".gz", ".zst"):
        file = file.with_suffix("")
    name = (given or "").strip() or file.stem.strip() or "graph"
    return "".join(ch for ch in name if ch.isprintable())[:200] or "graph"


def create_graph(session: Session, tenant: Tenant, parsed: ParsedGraph) -> Graph:
    """Store a graph as the next version of its name (version 1 for a new name; old versions are kept)."""
    return add_version(session, tenant, parsed.name, summary=encode(parsed.summary), data=parsed.data)


def get_graph(session: Session, tenant: Tenant, graph_id: uuid.UUID, *, lock: bool = False) -> Graph:
    """The tenant's graph, or 404 (also for another tenant's graph); ``lock`` takes a row lock."""
    stmt = select(Graph).where(Graph.id == graph_id, Graph.tenant_id == tenant.id)
    graph = session.scalar(stmt.with_for_update() if lock else stmt)
    if graph is None:
        raise NotFound("graph", graph_id)
    return graph


def list_graphs(
    session: Session, tenant: Tenant, *, limit: int, page_token: str | None, name: str | None = None
) -> tuple[list[Graph], str | None]:
    stmt = select(Graph).where(Graph.tenant_id == tenant.id)
    if name is not None:
        stmt = stmt.where(Graph.name == name)
    return newest_first(session, stmt, Graph, kind="graphs", limit=limit, token=page_token)


def delete_graph(session: Session, tenant: Tenant, graph_id: uuid.UUID) -> None:
    """Delete a graph; finished audits keep their results (their ``graph_id`` becomes null).

    Raises:
        NotFound: no such graph for this tenant.
        Conflict: a queued or running audit still needs the graph.
    """
    # The row lock orders this against an audit being created for the graph (which takes a share lock).
    graph = get_graph(session, tenant, graph_id, lock=True)
    busy = session.scalar(select(exists().where(Audit.graph_id == graph.id, Audit.state.in_(ACTIVE_STATES))))
    if busy:
        raise Conflict(
            "A queued or running audit uses this graph; cancel it or wait for it to finish.", slug="graph-in-use"
        )
    session.execute(delete(Graph).where(Graph.id == graph.id))
    session.expunge(graph)
