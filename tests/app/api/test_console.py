"""``/console``: sign-in with an API key, the session cookie's flags, CSRF on every form POST, tenant isolation,
pagination, and what the pages show (against the app with Postgres, rows arranged directly)."""

from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import ApiKey, Audit, Graph, Schedule, Webhook, WebhookDelivery
from app.core.settings import Settings
from app.main import create_app
from app.tenants.keys import authenticate, get_or_create_tenant, hash_key, key_prefix
from bind_core import AuditConfig, TrainConfig, run_audit, synthetic
from bind_core.data.datasets import load_npz
from bind_core.training.fit import train

HOSTILE = "<script>alert(1)</script>"
VERDICT = f"Biased: gender=F {HOSTILE}"


def _results() -> dict[str, Any]:
    """A finished audit's stored results (a real, small audit's document: the report renders only documents of the
    typed shape) with the figures and the hostile strings these tests look for."""
    config = AuditConfig(
        training=TrainConfig(epochs=20), stages=("training", "metrics"), bootstrap=20, validation_sample=0
    )
    doc: dict[str, Any] = json.loads(json.dumps(run_audit(synthetic(100, seed=1), config).to_dict()))
    doc["metrics"]["test"].update(nodes=40, accuracy=0.8, delta_sp=0.1, delta_eo=0.05, gamma=0.04)
    doc["metrics"]["intervals"]["delta_sp"].update(low=0.05, high=0.15)
    doc["warnings"] = [HOSTILE]
    doc["summary"].update(verdict=VERDICT, text=f"{VERDICT}\nThe 10 most")
    doc["summary"]["bias"][0]["excludes_zero"] = True
    doc["summary"]["trust"]["verdict"] = "trustworthy"
    return doc


RESULTS = _results()


class Tenant:
    """A tenant with an API key and its own browser (a cookie jar of its own)."""

    def __init__(self, client: TestClient, sessions: sessionmaker[Session], *, https: bool = False) -> None:
        self.key = f"bind_{uuid.uuid4().hex}{uuid.uuid4().hex}"
        with sessions.begin() as session:
            self.id = _make_key(session, self.key)
        self.sessions = sessions
        self.browser = TestClient(client.app, base_url="https://testserver" if https else "http://testserver",
                                  follow_redirects=False)  # fmt: skip

    def form_token(self, path: str = "/console/sign-in") -> str:
        page = self.browser.get(path)
        assert page.status_code == 200, page.text
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, page.text
        return found.group(1)

    def sign_in(self) -> None:
        token = self.form_token()
        response = self.browser.post("/console/sign-in", data={"api_key": self.key, "csrf": token})
        assert response.status_code == 303 and response.headers["location"] == "/console/audits", response.text

    def audit(self, state: str = "succeeded", **values: Any) -> str:
        with self.sessions.begin() as session:
            values.setdefault("results", RESULTS if state == "succeeded" else None)
            values.setdefault("config", {})
            row = Audit(tenant_id=self.id, dataset="synthetic", request_hash="0" * 64, state=state, **values)
            session.add(row)
            session.flush()
            return str(row.id)


def _make_key(session: Session, key: str) -> uuid.UUID:
    """Store ``key`` for a new tenant (as ``create_api_key`` does, with the key chosen here)."""
    tenant = get_or_create_tenant(session, f"tenant-{uuid.uuid4().hex[:10]}")
    session.add(ApiKey(tenant_id=tenant.id, prefix=key_prefix(key), key_hash=hash_key(key), role="admin"))
    session.flush()
    assert authenticate(session, key) is not None
    return tenant.id


@pytest.fixture
def tenant(client: TestClient, sessions: sessionmaker[Session]) -> Callable[..., Tenant]:
    return lambda **kw: Tenant(client, sessions, **kw)


def _cookie(response: Any, name: str) -> str:
    headers = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    assert len(headers) == 1, response.headers.get_list("set-cookie")
    return headers[0]


def test_sign_in_sets_a_strict_http_only_cookie(tenant: Callable[..., Tenant]) -> None:
    user = tenant()
    assert user.browser.get("/console/audits").headers["location"] == "/console/sign-in"  # signed out: to sign in
    token = user.form_token()
    response = user.browser.post("/console/sign-in", data={"api_key": user.key, "csrf": token})
    assert response.status_code == 303
    cookie = _cookie(response, "bind_console").lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie
    assert "max-age=28800" in cookie and "secure" not in cookie  # plain http: a Secure cookie would never return
    assert user.key not in cookie and hash_key(user.key) not in cookie
    page = user.browser.get("/console/audits")
    assert page.status_code == 200 and "<h1>Audits</h1>" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "form-action 'self'" in page.headers["content-security-policy"] and "<script" not in page.text


def test_secure_cookie_over_https(tenant: Callable[..., Tenant]) -> None:
    user = tenant(https=True)
    form = user.browser.get("/console/sign-in")
    assert "; secure" in _cookie(form, "bind_console_sign_in").lower()
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token
    response = user.browser.post("/console/sign-in", data={"api_key": user.key, "csrf": token.group(1)})
    assert "; secure" in _cookie(response, "bind_console").lower()


def test_sign_in_refuses_a_wrong_key_and_a_missing_or_wrong_token(tenant: Callable[..., Tenant]) -> None:
    user = tenant()
    token = user.form_token()
    wrong = user.browser.post("/console/sign-in", data={"api_key": user.key[:-2] + "xx", "csrf": token})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    assert not any(h.startswith("bind_console=") for h in wrong.headers.get_list("set-cookie"))
    for data in ({"api_key": user.key}, {"api_key": user.key, "csrf": "forged"}):
        assert user.browser.post("/console/sign-in", data=data).status_code == 403
    other = tenant()  # a token from another browser's form does not fit this browser's cookie
    foreign = {"api_key": user.key, "csrf": other.form_token()}
    assert user.browser.post("/console/sign-in", data=foreign).status_code == 403
    assert user.browser.get("/console/audits").status_code == 303


def test_forged_expired_and_revoked_sessions_are_signed_out(tenant: Callable[..., Tenant]) -> None:
    user = tenant()
    user.sign_in()
    value = user.browser.cookies.get("bind_console", path="/console")
    assert value and user.browser.get("/console/graphs").status_code == 200
    payload, signature = value.split(".")
    user.browser.cookies.set("bind_console", f"{payload}.{signature[:-2]}AA", path="/console")
    assert user.browser.get("/console/graphs").status_code == 303
    user.browser.cookies.set("bind_console", value, path="/console")
    with user.sessions.begin() as session:
        session.execute(update(ApiKey).where(ApiKey.tenant_id == user.id).values(revoked_at=datetime.now(UTC)))
    assert user.browser.get("/console/graphs").headers["location"] == "/console/sign-in"


def test_csrf_on_sign_out_and_cancel(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    user = tenant()
    user.sign_in()
    audit = user.audit("running", stage="train", progress=0.25)
    page = user.browser.get(f"/console/audits/{audit}")
    assert "25%" in page.text and 'http-equiv="refresh"' in page.text and "train" in page.text
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token
    for data in ({}, {"csrf": "wrong"}, {"csrf": token.group(1)[:-1]}):
        assert user.browser.post(f"/console/audits/{audit}/cancel", data=data).status_code == 403
        assert user.browser.post("/console/sign-out", data=data).status_code == 403
    with sessions() as session:
        assert session.scalar(select(Audit.state).where(Audit.id == uuid.UUID(audit))) == "running"
    done = user.browser.post(f"/console/audits/{audit}/cancel", data={"csrf": token.group(1)})
    assert done.status_code == 303
    with sessions() as session:
        assert session.scalar(select(Audit.state).where(Audit.id == uuid.UUID(audit))) == "cancelled"
    out = user.browser.post("/console/sign-out", data={"csrf": token.group(1)})
    assert out.status_code == 303 and out.headers["location"] == "/console/sign-in"
    cleared = _cookie(out, "bind_console").lower()
    assert 'bind_console=""' in cleared and "max-age=0" in cleared and "path=/console" in cleared
    assert user.browser.get("/console/audits").status_code == 303


def test_tenant_isolation(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    a, b = tenant(), tenant()
    a.sign_in()
    b.sign_in()
    secret = a.audit("succeeded")
    running = a.audit("running", progress=0.5)
    assert secret in a.browser.get("/console/audits").text
    assert a.browser.get(f"/console/audits/{secret}/report").status_code == 200
    listing = b.browser.get("/console/audits").text
    assert secret not in listing and running not in listing
    for path in ("", "/report", "/influence.csv", "/export"):
        response = b.browser.get(f"/console/audits/{secret}{path}")
        assert response.status_code == 404 and response.headers["content-type"].startswith("text/html"), path
        assert f"No audit with id {secret}." in response.text and "<code>audit-not-found</code>" in response.text
        assert "Biased" not in response.text and "alert(1)" not in response.text  # nothing of the results
    token = b.form_token("/console/audits")
    assert b.browser.post(f"/console/audits/{running}/cancel", data={"csrf": token}).status_code == 404
    with sessions() as session:
        assert session.scalar(select(Audit.state).where(Audit.id == uuid.UUID(running))) == "running"
    with sessions.begin() as session:
        session.add(Graph(tenant_id=a.id, name="a-only", version=1, summary={}, data=b"", size_bytes=0))
    assert "a-only" in a.browser.get("/console/graphs").text and "a-only" not in b.browser.get("/console/graphs").text


def test_audits_paginate(tenant: Callable[..., Tenant]) -> None:
    user = tenant()
    user.sign_in()
    made = {user.audit("failed", error={"title": "Invalid input", "detail": HOSTILE}) for _ in range(25)}
    first = user.browser.get("/console/audits")
    shown = set(re.findall(r'<tr id="audit-([0-9a-f-]+)"', first.text))
    assert len(shown) == 20 and shown <= made
    assert "&lt;script&gt;" in first.text and "<script" not in first.text  # the failure's detail, escaped
    link = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert link and 'http-equiv="refresh"' not in first.text  # nothing running: no refresh
    second = user.browser.get(link.group(1).replace("&amp;", "&"))
    rest = set(re.findall(r'<tr id="audit-([0-9a-f-]+)"', second.text))
    assert len(rest) == 5 and shown | rest == made and 'id="next-page"' not in second.text
    assert user.browser.get("/console/audits?page_token=forged").status_code == 400


def test_report_exports_and_running_progress(tenant: Callable[..., Tenant]) -> None:
    user = tenant()
    user.sign_in()
    done = user.audit("succeeded")
    now = datetime.now(UTC)
    pace = {"stage": "influence", "started_at": (now - timedelta(seconds=120)).isoformat(), "fraction": 0.5,
            "at": now.isoformat(), "after": ["debiasing"], "earlier": None}  # fmt: skip
    running = user.audit("running", stage="influence", progress=0.6, pace=pace)
    listing = user.browser.get("/console/audits").text
    assert 'http-equiv="refresh"' in listing and 'value="60"' in listing and "influence" in listing
    # its time left, and how it was reached on hover
    basis = "the influence stage at its pace so far (50% in 120 s); the stages after it (debiasing) are not estimated"
    assert f'<span class=left title="{basis}' in listing
    assert ">this stage about 2 min left</span>" in listing
    assert f'href="/console/audits/{done}/report"' in listing
    report = user.browser.get(f"/console/audits/{done}/report")
    assert report.status_code == 200 and report.headers["content-type"].startswith("text/html")
    assert "form-action 'none'" in report.headers["content-security-policy"]
    assert report.headers["cache-control"] == "no-store"  # nothing of the tenant's stays in the browser's cache
    assert f"<title>BIND audit {done}</title>" in report.text and "&lt;script&gt;alert(1)" in report.text
    card = user.browser.get(f"/console/audits/{done}/export")
    assert card.status_code == 200 and "attachment" in card.headers["content-disposition"]
    assert user.browser.get(f"/console/audits/{running}/report").status_code == 409
    row = listing[listing.index(f'id="audit-{done}"') :].split("</tr>")[0]  # the headline of a finished audit
    assert "10.0 [5.0, 15.0]" in row and "80.0" in row and ">biased<" in row and "trustworthy" in row
    assert f'title="{VERDICT}"' not in row and "&lt;script&gt;" in row  # the verdict, escaped, as the badge's title
    detail = user.browser.get(f"/console/audits/{done}").text  # the verdict first, escaped
    assert 'id="verdict"' in detail and "Biased: gender=F &lt;script&gt;" in detail and "<li>The 10 most</li>" in detail
    assert 'id="verdict"' not in user.browser.get(f"/console/audits/{running}").text


def test_a_running_audit_shows_its_warnings_so_far(tenant: Callable[..., Tenant]) -> None:
    """The warnings the worker stored once the model and metrics were in, shown while the estimate runs (escaped)."""
    user = tenant()
    user.sign_in()
    fed_wrong = "the model does no better than a constant <b>on its own training nodes</b>"
    running = user.audit("running", stage="influence", progress=0.4, warnings=[fed_wrong])
    page = user.browser.get(f"/console/audits/{running}").text
    shown = page[page.index('id="warnings-so-far"') :].split("</section>")[0]
    assert "before the estimate's minutes" in shown and "no better than a constant &lt;b&gt;on its own" in shown
    quiet = user.audit("running")
    assert 'id="warnings-so-far"' not in user.browser.get(f"/console/audits/{quiet}").text  # none known
    done = user.audit("succeeded", warnings=[fed_wrong, "a low self-check"])  # its results' warnings instead
    assert 'id="warnings-so-far"' not in user.browser.get(f"/console/audits/{done}").text
    listing = user.browser.get("/console/audits").text  # the list marks each audit with warnings, linked to them
    row = {a: listing[listing.index(f'id="audit-{a}"') :].split("</tr>")[0] for a in (running, quiet, done)}
    assert f'href="/console/audits/{running}#warnings-so-far"' in row[running] and "⚠ 1 warning<" in row[running]
    assert f'href="/console/audits/{done}#warnings"' in row[done] and "⚠ 2 warnings<" in row[done]
    assert "&lt;b&gt;on its own" in row[running] and "⚠" not in row[quiet]  # the sentences, escaped, on hover


def test_a_withheld_verdict_is_no_verdict_in_the_list(tenant: Callable[..., Tenant]) -> None:
    """A supplied model fed inputs it never saw (or outputs in another order): the gap as measured is no finding, so
    the badge says so rather than 'biased'."""
    user = tenant()
    user.sign_in()
    doc = _results()
    why = "on its own training nodes the model does no better than a constant (mean cross-entropy 543 against 0.519)"
    doc["summary"].update(withheld=why, verdict=f"No verdict: {why}. As measured: {VERDICT}")
    withheld = user.audit("succeeded", results=doc)
    plain = user.audit("succeeded")
    listing = user.browser.get("/console/audits").text
    row = {a: listing[listing.index(f'id="audit-{a}"') :].split("</tr>")[0] for a in (withheld, plain)}
    assert ">no verdict<" in row[withheld] and ">biased<" not in row[withheld]
    assert ">biased<" in row[plain]


def test_a_supplied_models_audits_are_listed_by_its_name(tenant: Callable[..., Tenant], graph_npz: bytes) -> None:
    """The audits list names a supplied model as it was registered, beside its shape; an audit's own model by its
    shape alone."""
    user = tenant()
    user.sign_in()
    auth = {"Authorization": f"Bearer {user.key}"}
    graph = user.browser.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)}).json()
    model = train(load_npz(io.BytesIO(graph_npz)), TrainConfig(epochs=5, polish=False))
    ids, models = {}, {}
    for name in ("income-gcn", None):  # a name of the user's own, and none (the architecture's, by default)
        data = {"config": json.dumps(model.config_dict()), "graph_id": graph["id"]} | ({"name": name} if name else {})
        registered = user.browser.post(
            "/v1/models", headers=auth, files={"weights": ("m.safetensors", model.to_bytes())}, data=data
        )
        assert registered.status_code == 201, registered.text
        config = {"model": {"arch": "gcn", "layers": 1}}
        models[name] = uuid.UUID(registered.json()["id"])
        ids[name] = user.audit("running", model_id=models[name], config=config)
    own = user.audit("running", config={"model": {"arch": "sage", "layers": 2}})
    carried = {"supplied_model": {"polished_by_service": False, "carried": {"registered_version": 1}}}
    later = user.audit(
        "succeeded", model_id=models["income-gcn"], config={"model": {"arch": "gcn", "layers": 1}}, results=carried
    )  # on another version of its graph, its inputs carried over from version 1's
    listing = user.browser.get("/console/audits").text
    assert "<td class=l>income-gcn (gcn-1, registered on v1)</td>" in listing[listing.index(f'id="audit-{later}"') :]
    row = {key: listing[listing.index(f'id="audit-{a}"') :].split("</tr>")[0] for key, a in ids.items()}
    assert "<td class=l>income-gcn (gcn-1)</td>" in row["income-gcn"]
    assert "<td class=l>gcn-1, supplied</td>" in row[None]
    assert "<td class=l>sage-2</td>" in listing[listing.index(f'id="audit-{own}"') :].split("</tr>")[0]
    assert "with income-gcn (gcn-1)" in user.browser.get(f"/console/audits/{ids['income-gcn']}").text


def test_graphs_schedules_and_webhooks(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    user = tenant()
    user.sign_in()
    now = datetime.now(UTC)
    with sessions.begin() as session:
        for version in (1, 2):
            session.add(Graph(tenant_id=user.id, name=HOSTILE, version=version, summary={"nodes": 120 * version},
                              data=b"", size_bytes=10, created_at=now + timedelta(seconds=version)))  # fmt: skip
        schedule = Schedule(tenant_id=user.id, dataset="synthetic", settings={}, config={}, interval_seconds=3600,
                            thresholds={"delta_sp": 0.15}, next_run_at=now)  # fmt: skip
        session.add(schedule)
        session.flush()
        for i, sp in enumerate((0.05, 0.1, 0.2)):
            metrics = {"test": {"accuracy": 0.8, "delta_sp": sp, "delta_eo": sp / 2, "gamma": sp / 3}}
            said = {"summary": {"withheld": "the model no longer fits"}} if i == 2 else {}  # the latest: no verdict
            session.add(Audit(tenant_id=user.id, dataset="synthetic", config={}, request_hash="0" * 64,
                              state="succeeded", results={"metrics": metrics, **said}, schedule_id=schedule.id,
                              slot_time=now - timedelta(hours=3 - i)))  # fmt: skip
        hook = Webhook(tenant_id=user.id, url="https://example.org/hook", events=["audit.succeeded"], secret="s")
        filtered = Webhook(tenant_id=user.id, url="https://example.org/drift", events=["audit.warned"],
                           warning_codes=["output_order", "training_fit"], secret="t")  # fmt: skip
        session.add_all([hook, filtered])
        session.flush()
        session.add(WebhookDelivery(webhook_id=hook.id, event="audit.succeeded", payload={}, state="failed",
                                    attempts=8, response_status=500, last_error=HOSTILE))  # fmt: skip
        about = uuid.uuid4()
        session.add(WebhookDelivery(webhook_id=filtered.id, event="audit.warned", state="succeeded", attempts=1,
                                    payload={"data": {"audit_id": str(about)}}))  # fmt: skip
    graphs = user.browser.get("/console/graphs").text
    assert graphs.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2 and "<script" not in graphs
    assert "<td>240</td>" in graphs and "<td>120</td>" in graphs
    schedules = user.browser.get("/console/schedules").text
    assert "▲ 0.200 / 0.150" in schedules and "<polyline" in schedules and "stroke-dasharray" in schedules
    assert f'href="/console/schedules/{schedule.id}/report"' in schedules
    assert "no verdict (the report says why)" in schedules
    history = user.browser.get(f"/console/schedules/{schedule.id}/report")
    assert history.status_code == 200 and "Runs, newest first" in history.text
    assert "no verdict: the model no longer fits" in history.text
    hooks = user.browser.get("/console/webhooks").text
    assert "https://example.org/hook" in hooks and "<td>500</td>" in hooks and "&lt;script&gt;" in hooks
    assert "<b>audit.warned only for</b>: output_order, training_fit" in hooks
    assert f'<a href="/console/audits/{about}"><code>{str(about)[:8]}</code></a>' in hooks  # what it is about


def test_console_requests_share_the_api_keys_rate_limit(settings: Settings, sessions: sessionmaker[Session]) -> None:
    """The console counts against its API key's bucket: spent in the console, the API refuses the key too."""
    with TestClient(create_app(settings.model_copy(update={"rate_limit_per_minute": 3}))) as limited:
        user = Tenant(limited, sessions)
        user.sign_in()  # signing in takes no token from the bucket
        assert [user.browser.get("/console/audits").status_code for _ in range(4)] == [200, 200, 200, 429]
        refused = limited.get("/v1/audits", headers={"Authorization": f"Bearer {user.key}"})
        assert refused.status_code == 429 and "retry-after" in refused.headers


def test_a_finished_audits_page_shows_groups_nodes_debiasing_and_the_self_check(tenant: Callable[..., Tenant]) -> None:
    from bind_core import AuditConfig, TrainConfig, run_audit, synthetic

    config = AuditConfig(
        training=TrainConfig(epochs=30),
        budgets=(0.1,),
        validation_sample=5,
        bootstrap=0,
        edges=True,
        edge_validation_sample=0,
    )
    results = json.loads(json.dumps(run_audit(synthetic(300, seed=1), config).to_dict()))
    user = tenant()
    user.sign_in()
    done = user.audit("succeeded", results=results)
    page = user.browser.get(f"/console/audits/{done}").text
    for section in ("verdict", "groups", "nodes", "debiasing", "edges", "self-check"):
        assert f'id="{section}"' in page
    assert "<td class=l>sens=0</td>" in page and "<td class=l>sens=1</td>" in page  # groups by name
    top = results["top_harmful"][0]
    assert f"<td class=l>{top['node_id']}</td><td class=l>sens={top['group']}</td>" in page  # nodes by the user's id
    assert results["graph"]["node_id_meaning"] in page
    assert "not checked (set debias_seeds)" in page and f"Pearson {results['validation']['pearson']:.4f}" in page
    edge = results["edges"]["top_harmful"][0]
    assert f"<td class=l>{edge['u_id']} – {edge['v_id']}</td>" in page  # edges by their endpoints' ids


def _problem_page(response: Any, status: int, says: str, back: str, *, signed_in: bool = True) -> None:
    """A console error page: the API's status, HTML in the console's layout saying ``says``, a link back to ``back``
    (and the navigation bar where a page's route knew who is signed in)."""
    assert response.status_code == status, (response.request.url, response.text)
    assert response.headers["content-type"].startswith("text/html"), response.text
    assert response.headers["content-security-policy"].startswith("default-src 'none'")
    assert response.headers["cache-control"] == "no-store"
    assert says in response.text, response.text
    assert f'<a href="{back}" id="back">' in response.text
    assert ('id="sign-out"' in response.text) is signed_in  # the navigation bar
    assert "<script" not in response.text


def test_unknown_or_malformed_ids_are_pages_not_problem_documents(tenant: Callable[..., Tenant]) -> None:
    """Was raw problem+json in the browser: every console page answers an unknown resource, a malformed id or an
    unknown path with a page in its own layout, with the status the API gives; the API keeps problem+json."""
    user = tenant()
    user.sign_in()
    done, nobody = user.audit("succeeded"), uuid.uuid4()
    get = user.browser.get
    for path in ("", "/report", "/influence.csv", "/influence.parquet", "/export"):
        _problem_page(get(f"/console/audits/{nobody}{path}"), 404, f"No audit with id {nobody}.", "/console/audits")
    _problem_page(get(f"/console/graphs/{nobody}"), 404, f"No graph with id {nobody}.", "/console/graphs")
    _problem_page(get(f"/console/compare?a={done}&b={nobody}"), 404, f"No audit with id {nobody}.", "/console/audits")
    report = get(f"/console/schedules/{nobody}/report")
    _problem_page(report, 404, f"No schedule with id {nobody}.", "/console/schedules")
    job = get(f"/console/audits/{done}/what-ifs/{nobody}")
    _problem_page(job, 404, f"No what-if with id {nobody}.", "/console/audits")
    weights = get(f"/console/audits/{done}/models/{nobody}/weights")
    _problem_page(weights, 404, f"has no retrained model with id {nobody}.", "/console/audits")
    token = user.form_token("/console/audits")
    what_if = user.browser.post(f"/console/audits/{nobody}/what-if", data={"csrf": token, "top": "1"})
    _problem_page(what_if, 404, f"No audit with id {nobody}.", "/console/audits")
    # A malformed id: the API's 422, naming the parameter.
    _problem_page(get("/console/audits/not-a-uuid"), 422, "<code>audit_id</code>: ", "/console/audits")
    _problem_page(get("/console/graphs/123"), 422, "<code>graph_id</code>: ", "/console/graphs")
    _problem_page(get(f"/console/compare?a={done}&b=x"), 422, "<code>b</code>: ", "/console/audits")
    _problem_page(get("/console/audits?graph=not-a-uuid"), 422, "<code>graph</code>: ", "/console/audits")
    # No such page at all, its path shown escaped (no route ran to say who is signed in: no navigation bar).
    unknown = get("/console/schedules/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    says = "There is no page at /console/schedules/&lt;script&gt;"
    _problem_page(unknown, 404, says, "/console/schedules", signed_in=False)
    # Signed out: still to the sign-in page, nothing said about the id.
    user.browser.cookies.clear()
    assert get(f"/console/audits/{nobody}").headers["location"] == "/console/sign-in"
    # The API's answer to the same is unchanged.
    api = user.browser.get(f"/v1/audits/{nobody}", headers={"Authorization": f"Bearer {user.key}"})
    assert api.status_code == 404 and api.headers["content-type"] == "application/problem+json"
    assert api.json()["type"].endswith("/audit-not-found")
