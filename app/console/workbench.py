"""The console's workbench: upload a graph from the browser, read its page, and start an audit of it, with the
audit's cost estimated before anything is queued.

Uploads go through the API's own parsing (``app.graphs.uploads``, ``app.graphs.service``), so the browser gets the
same validation and the same messages; an audit is created by the API's service (``app.audits.service``), so the
same limits apply. Errors are shown on the form, with the fields at fault; every form carries the session's CSRF
token, and uploading and queueing need the ``auditor`` role and leave an entry in the audit trail.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.audits import service as audits
from app.audits.budget import cost_of
from app.audits.schemas import AuditCreate
from app.console.deps import ConsoleAuditorDep, ConsoleUserDep, check_csrf
from app.console.form_errors import form_refusal
from app.console.pages import page, refused
from app.console.uploads import filled, graph_form
from app.console.views import audit_row, graph_row
from app.console.what_if_form import form_choice, what_if_page
from app.core.db.tables import Graph, SuppliedModel
from app.core.deps import BrokerDep, SessionDep, SettingsDep
from app.core.errors import ProblemError, ValidationProblem
from app.graphs import service as graphs
from app.graphs.uploads import FIELD_PARTS, FILE_PARTS, ReceivedUpload, receive_upload, remove_folder
from app.supplied import service as supplied
from app.supplied import version_outputs
from app.supplied.loading import matched
from app.trail.record import trailed
from app.what_ifs.choice import choose
from bind_core import AuditConfig, BindError
from bind_core.codec import encode
from bind_core.pipeline import AUTO_CHANCE_SEEDS

router = APIRouter(prefix="/console", include_in_schema=False)

ARCHS = ("gcn", "gin", "sage", "gat")
FormText = Annotated[str, Form(max_length=200)]
AUDITS_SHOWN = 20
EVERY = {"hour": 3600, "day": 86400, "week": 7 * 86400}
"""The schedule form's choices of interval (``app/console/schedule_form.py``)."""
MODELS_SHOWN = 50


@router.get("/graphs/new")
def upload_form(user: ConsoleAuditorDep) -> Response:
    """The upload form: a node table with an edge list, or one ``.npz``."""
    return page("upload.html", user, title="Upload a graph · bind-audit", errors=[], detail=None)


@router.post("/graphs/new", status_code=303, dependencies=[trailed("graph.upload")])
async def upload(
    request: Request, response: Response, session: SessionDep, user: ConsoleAuditorDep, settings: SettingsDep
) -> Response:
    """Parse the upload as the API does; on success, the new graph's page, else the form with the errors."""
    await run_in_threadpool(session.rollback)  # hold no connection while the body streams
    folder = Path(await run_in_threadpool(tempfile.mkdtemp, prefix="bind-console-upload-"))
    try:
        received = await receive_upload(
            request,
            folder,
            settings.max_upload_bytes,
            file_parts=FILE_PARTS,
            field_parts=(*FIELD_PARTS, *FILE_PARTS, "csrf"),
        )
        check_csrf(user, received.fields.pop("csrf", None))
        parsed = await run_in_threadpool(graphs.parse_upload, filled(received), settings)
    except ProblemError as exc:
        if exc.status == 403:
            raise
        refused(response, exc.status)
        return page(
            "upload.html",
            user,
            status_code=exc.status,
            title="Upload a graph · bind-audit",
            errors=exc.errors,
            detail=exc.detail or exc.title,
        )
    finally:
        await run_in_threadpool(remove_folder, folder)
    graph = await run_in_threadpool(graphs.create_graph, session, user.tenant, parsed)
    return RedirectResponse(f"/console/graphs/{graph.id}", status_code=303)


@router.get("/graphs/{graph_id}")
def graph_page(
    graph_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleUserDep,
    registered: uuid.UUID | None = None,
    outputs: uuid.UUID | None = None,
) -> Response:
    """A graph in the user's terms, what reading it did, its audits, and (auditor) the form that starts one;
    ``registered``: a model just registered from an audit's retrained model, chosen in the form and announced;
    ``outputs``: a model whose outputs on this version were just given, what comparing them found."""
    form = {"model_id": str(registered)} if registered else None
    return graph_view(session, user, graph_id, form=form, outputs_given=outputs)


MODEL_FILES = ("weights", "config", "outputs")
"""The parts of the console's form that registers a model: what ``POST /v1/models`` takes as files."""


@router.post("/graphs/{graph_id}/models", status_code=303, dependencies=[trailed("model.register")])
async def register_model(
    graph_id: uuid.UUID,
    request: Request,
    response: Response,
    session: SessionDep,
    user: ConsoleAuditorDep,
    settings: SettingsDep,
) -> Response:
    """Register a model trained on this graph (its weights, config and, optionally, its own outputs) as the API
    does; on success the graph's page with the model chosen to audit, else the page with the form's refusal."""

    async def register(received: ReceivedUpload) -> str:
        missing = [part for part in ("weights", "config") if part not in received.files]
        if missing:
            raise ValidationProblem(
                "A model is its weights (.safetensors) and its config (.json).",
                errors=[{"field": part, "message": "required"} for part in missing],
            )
        parts = {part: await run_in_threadpool(path.read_bytes) for part, path in received.files.items()}
        given = None if "outputs" not in parts else (parts["outputs"], received.client_names.get("outputs", ""))
        unknown = supplied.parse_unknown_categories(received.fields.get("unknown_categories"))
        row = await run_in_threadpool(
            lambda: supplied.register(
                session,
                user.tenant,
                graph_id,
                parts["weights"],
                parts["config"],
                name=received.fields.get("name"),
                unknown_categories=unknown,
                outputs=given,
            )
        )
        return f"/console/graphs/{graph_id}?registered={row.id}"

    return await graph_form(
        request,
        response,
        session,
        user,
        settings,
        file_parts=MODEL_FILES,
        field_parts=("name", "unknown_categories"),
        what="model",
        refusal="The model cannot be registered.",
        act=register,
        shown=lambda sent, problem: graph_view(session, user, graph_id, model_form=sent, model_problem=problem),
    )


@router.post("/graphs/{graph_id}/audit", dependencies=[trailed("audit.create")])
def start_audit(
    graph_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAuditorDep,
    settings: SettingsDep,
    broker: BrokerDep,
    response: Response,
    csrf: FormText = "",
    action: FormText = "estimate",
    arch: FormText = "gcn",
    layers: FormText = "1",
    epochs: FormText = "1000",
    budgets: FormText = "0.01,0.1",
    chance: FormText = "",
    edges: FormText = "",
    model_id: FormText = "",
) -> Response:
    """``action=estimate``: the audit's estimated cost, and a button that queues it; ``action=queue``: queue it and
    go to its page (where it can be cancelled)."""
    check_csrf(user, csrf)
    graph = graphs.get_graph(session, user.tenant, graph_id)  # 404 for another tenant's graph, before anything
    form = {
        "action": action,
        "arch": arch,
        "layers": layers,
        "epochs": epochs,
        "budgets": budgets,
        "chance": chance,
        "edges": edges,
        "model_id": model_id,
    }
    problem: ProblemError | None = None
    try:
        body = AuditCreate.model_validate(_request(graph_id, form))
        model = supplied.get_model(session, user.tenant, body.model_id) if body.model_id else None
        cost = _estimate(body, graph, model)
        if form.get("action") != "queue":
            return graph_view(session, user, graph_id, form=form, estimate=cost)
        audit, _ = audits.create_audit(session, user.tenant, body, settings=settings, publisher=broker)
    except (ValidationError, ProblemError) as exc:
        problem = form_refusal(exc, "The audit's settings are not valid.")
    except BindError as exc:
        problem = ValidationProblem(str(exc), slug="invalid-config")
    if problem is not None:
        refused(response, problem.status)
        return graph_view(session, user, graph_id, form=form, problem=problem)
    return RedirectResponse(f"/console/audits/{audit.id}", status_code=303)


def _request(graph_id: uuid.UUID, form: dict[str, str]) -> dict[str, Any]:
    """The ``POST /v1/audits`` body the form asks for."""
    body: dict[str, Any] = {"graph_id": str(graph_id)}
    if form.get("model_id"):
        body["model_id"] = form["model_id"]
    else:
        body["model"] = {"arch": form.get("arch", "gcn"), "layers": _int(form.get("layers"), 1)}
        body["training"] = {"epochs": _int(form.get("epochs"), 1000)}
    budgets = [b.strip() for b in form.get("budgets", "").split(",") if b.strip()]
    if budgets:
        body["budgets"] = [_number(b) for b in budgets]
    if form.get("chance"):
        body["debias_seeds"] = list(AUTO_CHANCE_SEEDS)
    if form.get("edges"):
        body["edges"] = True
    return body


def _int(value: str | None, default: int) -> int | str:
    """An integer field's value (the text as given where it is not one, so that validation names it)."""
    text = (value or "").strip()
    return default if not text else int(text) if text.lstrip("-").isdigit() else text


def _number(value: str) -> float | str:
    try:
        return float(value)
    except ValueError:
        return value


def _estimate(body: AuditCreate, graph: Graph, model: SuppliedModel | None) -> dict[str, str]:
    """The estimated peak memory and work of the audit (the same figures the limits compare)."""
    config = AuditConfig.from_dict(body.config_dict())
    cost = cost_of(config, graph.summary or {}, model.config if model is not None else None)
    return {
        "memory": f"{cost.peak_memory_bytes / 1024**3:.2f} GiB"
        if cost.peak_memory_bytes >= 1024**3
        else f"{cost.peak_memory_bytes / 1024**2:.1f} MiB",
        "work": f"{cost.work_flops:.3g} flops",
        "parts": ", ".join(f"{k} {v:.2g}" for k, v in cost.work.items()),
    }


def graph_view(
    session: SessionDep,
    user: Any,
    graph_id: uuid.UUID,
    *,
    form: dict[str, str] | None = None,
    estimate: dict[str, str] | None = None,
    problem: ProblemError | None = None,
    schedule: dict[str, str] | None = None,
    schedule_problem: ProblemError | None = None,
    model_form: dict[str, str] | None = None,
    model_problem: ProblemError | None = None,
    outputs_form: dict[str, str] | None = None,
    outputs_problem: ProblemError | None = None,
    outputs_given: uuid.UUID | None = None,
) -> Response:
    """The graph's page; with ``problem``, the start form shows it (with its status and its fields at fault); with
    ``schedule_problem``, the schedule form (``schedule`` its fields as sent); with ``model_problem``, the form that
    registers a model (``model_form`` its fields as sent); with ``outputs_problem``, the form that gives a model's
    outputs on this version (``outputs_form``); ``outputs_given``: the model whose outputs were just given."""
    failed = problem or schedule_problem or model_problem or outputs_problem
    graph = graphs.get_graph(session, user.tenant, graph_id)
    rows, _ = audits.list_audits(
        session, user.tenant, graph_id=graph_id, state=None, limit=AUDITS_SHOWN, page_token=None
    )
    models = supplied.models_for_name(session, user.tenant, graph.name, limit=MODELS_SHOWN)
    here = version_outputs.matched_on(session, graph_id, [m.id for m in models])
    return page(
        "graph.html",
        user,
        status_code=failed.status if failed else 200,
        title=f"{graph.name} v{graph.version} · bind-audit",
        graph=graph_row(graph),
        summary=graph.summary or {},
        audits=[audit_row(a) for a in rows],
        models=[
            {"id": str(m.id), "name": _model_choice(m, version=graph.version, here=here.get(m.id))} for m in models
        ],
        registered=next((m.name for m in models if form and str(m.id) == form.get("model_id")), None),
        archs=ARCHS,
        form=form or {},
        estimate=estimate,
        errors=problem.errors if problem else [],
        detail=(problem.detail or problem.title) if problem else None,
        schedule=schedule or {},
        schedule_errors=schedule_problem.errors if schedule_problem else [],
        schedule_detail=(schedule_problem.detail or schedule_problem.title) if schedule_problem else None,
        every=EVERY,
        model_form=model_form or {},
        model_errors=model_problem.errors if model_problem else [],
        model_detail=(model_problem.detail or model_problem.title) if model_problem else None,
        registered_fit=_registered_fit(models, form),
        outputs_form=outputs_form or {},
        outputs_errors=outputs_problem.errors if outputs_problem else [],
        outputs_detail=(outputs_problem.detail or outputs_problem.title) if outputs_problem else None,
        outputs_note=None if outputs_given is None else _outputs_note(session, graph_id, outputs_given),
    )


def _outputs_note(session: SessionDep, graph_id: uuid.UUID, model_id: uuid.UUID) -> str | None:
    """What the page says of the outputs just given for ``model_id`` on this version, or ``None``."""
    given = version_outputs.given_on(session, model_id, graph_id)
    if given is None:
        return None
    name, match = given
    if (found := matched(match)) is not None:
        return (
            f"The outputs of {name} on this version were reproduced on {found.get('nodes')} nodes: its audits here "
            "read it as your pipeline feeds it, and say so."
        )
    return f"The outputs of {name} on this version are kept: its first audit here compares them."


def _registered_fit(models: list[supplied.ModelChoice], form: dict[str, str] | None) -> str | None:
    """What the registration of the model just registered (chosen in the form) found, in a sentence, or ``None``."""
    chosen = next((m for m in models if form and str(m.id) == form.get("model_id")), None)
    if chosen is None:
        return None
    said = [FIT_SAID[code] for code in chosen.warning_codes if code in FIT_SAID]
    if chosen.outputs_confirmed:
        said.append("its own outputs were reproduced")
    return "; ".join(said) or None


@router.post("/audits/{audit_id}/what-if", dependencies=[trailed("what_if.estimate", "/audits/{audit_id}")])
def what_if(
    audit_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleUserDep,
    response: Response,
    csrf: FormText = "",
    nodes: Annotated[str, Form(max_length=200_000)] = "",
    top: FormText = "",
    rule: FormText = "",
) -> Response:
    """The what-if on an audit's page: the estimate of deleting the pasted ids (comma, space or newline separated),
    the top k most harmful training nodes or a profile rule's members, shown under the form (or the problem, with
    its field), with a form to verify it by retraining."""
    check_csrf(user, csrf)
    audit = audits.get_audit(session, user.tenant, audit_id)
    form = {"nodes": nodes, "top": top, "rule": rule}
    estimate: dict[str, Any] | None = None
    problem: ProblemError | None = None
    try:
        estimate = encode(choose(session, audit, **form_choice(form))[0].estimate)
    except ProblemError as exc:
        if exc.status in (403, 404):
            raise
        problem = exc
        refused(response, exc.status)
    return what_if_page(user, audit, form, estimate=estimate, problem=problem)


def _model_choice(model: supplied.ModelChoice, *, version: int, here: bool | None = None) -> str:
    """A supplied model as the start form offers it: its name, the version it was registered on where that is
    another (the audit carries this version's inputs over to the registration's), whether it reads a category it
    never saw as none of its own, what reading it at registration found wrong with its fit, and whether its own
    outputs, given then, were reproduced; ``here``: its outputs on this version were given, and reproduced (``True``)
    or not yet compared (``False``)."""
    said = [] if model.registered_on == version else [f"registered on version {model.registered_on}"]
    if here is not None:
        said.append("its outputs on this version reproduced" if here else "its outputs on this version given")
    if model.unknown_categories == "ignore":
        said.append("reads unseen categories as none")
    said += [FIT_SAID[code] for code in model.warning_codes if code in FIT_SAID]
    if model.outputs_confirmed:
        said.append("its own outputs reproduced when registered")
    return f"{model.name} ({'; '.join(said)})" if said else model.name


FIT_SAID = {
    "training_fit": "fit its training nodes poorly when registered",
    "output_order": "ranked its labels below chance when registered",
}
"""What the model choices say of a registration's warnings about the model's fit (by code)."""
