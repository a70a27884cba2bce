"""The console's what-if verification: the Verify button under an estimate queues the job and opens its page, which
refreshes while it runs and then shows the estimate, the measured effect and the verdict side by side; a rule of the
profile chooses the set; CSRF, cancel and tenants as everywhere."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker
from test_console import Tenant

from app.core.db.tables import InfluenceRow, WhatIf

RESULTS = {
    "top_harmful": [{"node_id": "u0", "group": 0, "label": 1, "delta": -0.3}],
    "metrics": {},
    "profile": {
        "rules": [
            {
                "text": "income > 1",
                "conditions": [{"text": "income > 1"}],
                "members": [0, 1],
                "holdout": {"harm_share": 0.5},
                "p_value": 0.01,
            }
        ]
    },
}
RESULT = {
    "size": 2, "seeds": [1, 10, 100], "random_sets": 3,
    "gamma_before": {"effects": [0.2, 0.2, 0.2], "mean": 0.2, "std": 0.0},
    "delta": {"effects": [-0.05, -0.06, -0.04], "mean": -0.05, "std": 0.01},
    "delta_sp": {"effects": [-0.1, -0.1, -0.1], "mean": -0.1, "std": 0.0},
    "delta_eo": {"effects": [0.0, 0.0, 0.0], "mean": 0.0, "std": 0.0},
    "chance": {"noise_floor": 0.001, "random_means": [0.01, 0.0, -0.01], "random_mean": 0.0, "random_std": 0.01,
               "advantage": 0.05, "yardstick": 0.01, "beats_random": True, "reduces_bias": True,
               "verdict": "deleting the selected nodes reduces bias more than deleting random nodes"},
}  # fmt: skip


@pytest.fixture
def tenant(client: TestClient, sessions: sessionmaker[Session]) -> Callable[..., Tenant]:
    return lambda **kw: Tenant(client, sessions, **kw)


def _audit(user: Tenant, sessions: sessionmaker[Session]) -> str:
    done = user.audit("succeeded", results=RESULTS, model_weights=b"w", model_config={"model": {}})
    with sessions.begin() as session:
        for i, (key, delta) in enumerate({"u0": -0.3, "u1": -0.1, "u2": 0.2, "u3": 0.1}.items()):
            session.add(InfluenceRow(audit_id=uuid.UUID(done), position=i, node_index=i, node_id=i, node_key=key,
                                     grp=0, label=1, delta=delta, delta_sp=delta, delta_eo=delta))  # fmt: skip
    return done


def _token(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', text)
    assert found is not None
    return found.group(1)


def test_estimate_verify_and_read_the_outcome(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    user = tenant()
    user.sign_in()
    done = _audit(user, sessions)
    page = user.browser.get(f"/console/audits/{done}").text
    assert 'id="what-if-rule"' in page and "income &gt; 1" in page  # the profile's rules are offered
    token = _token(page)
    estimate = user.browser.post(f"/console/audits/{done}/what-if", data={"csrf": token, "rule": "0"})
    assert estimate.status_code == 200 and 'id="verify-form"' in estimate.text and "u0, u1" in estimate.text
    verify = user.browser.post(f"/console/audits/{done}/what-if/verify", data={"csrf": token, "rule": "0"})
    assert verify.status_code == 303, verify.text
    location = verify.headers["location"]
    job = uuid.UUID(location.rsplit("/", 1)[1])
    queued = user.browser.get(location).text
    assert "<b>queued</b>" in queued and 'http-equiv="refresh"' in queued and 'id="cancel"' in queued
    assert "u0, u1" in queued and "income &gt; 1" in queued
    now = datetime.now(UTC)
    pace = {"stage": "verifying", "started_at": (now - timedelta(seconds=60)).isoformat(), "fraction": 0.25,
            "at": now.isoformat(), "after": [], "earlier": None}  # fmt: skip
    with sessions.begin() as session:  # a quarter of the retrainings in a minute
        session.execute(update(WhatIf).where(WhatIf.id == job).values(state="running", progress=0.25, pace=pace))
    running = user.browser.get(location).text
    assert "25% done" in running and ">about 3 min left</span>" in running
    assert 'title="the verifying stage at its pace so far (25% in 60 s); no stage follows"' in running
    with sessions.begin() as session:
        session.execute(update(WhatIf).where(WhatIf.id == job).values(state="succeeded", progress=1.0, result=RESULT))
    outcome = user.browser.get(location).text
    assert 'http-equiv="refresh"' not in outcome and 'id="what-if-outcome"' in outcome
    assert "-0.0500 ± 0.0100" in outcome and "-0.4000" in outcome  # measured beside estimated (−0.3 − 0.1)
    assert "reduces bias more than deleting random nodes" in outcome
    assert "changed it by -0.0500 on average" in outcome
    listed = user.browser.get(f"/console/audits/{done}").text  # the audit's page links its verifications
    assert 'id="verifications"' in listed and location in listed and "succeeded" in listed


def test_a_verified_set_with_a_member_without_a_value(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session], client: TestClient
) -> None:
    """A set whose estimate has no value (a member's deletion has no minimum near the weights) can still be verified
    by retraining; its pages say the estimate has none, never a 500, and the API serves it as null."""
    user = tenant()
    user.sign_in()
    done = _audit(user, sessions)
    with sessions.begin() as session:
        session.add(InfluenceRow(audit_id=uuid.UUID(done), position=4, node_index=4, node_id=4, node_key="u4", grp=0,
                                 label=1, delta=None, delta_sp=None, delta_eo=None, settled=False,
                                 no_minimum=True))  # fmt: skip
    token = _token(user.browser.get(f"/console/audits/{done}").text)
    verify = user.browser.post(f"/console/audits/{done}/what-if/verify", data={"csrf": token, "nodes": "u0 u4"})
    assert verify.status_code == 303, verify.text
    location = verify.headers["location"]
    job = uuid.UUID(location.rsplit("/", 1)[1])
    with sessions.begin() as session:
        session.execute(update(WhatIf).where(WhatIf.id == job).values(state="succeeded", progress=1.0, result=RESULT))
    outcome = user.browser.get(location)
    assert outcome.status_code == 200, outcome.text
    assert "The estimate has no value for deleting these 2 training nodes" in outcome.text
    assert "changed it by -0.0500 on average" in outcome.text
    assert "<td>—</td><td>-0.0500 ± 0.0100</td>" in outcome.text  # the estimated column: none
    served = client.get(f"/v1/audits/{done}/what-ifs/{job}", headers={"Authorization": f"Bearer {user.key}"})
    assert served.status_code == 200, served.text
    estimate = served.json()["estimate"]
    assert estimate["delta"] is None and estimate["delta_sp"] is None and estimate["delta_eo"] is None


def test_verify_errors_csrf_cancel_and_tenants(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    user, other = tenant(), tenant()
    user.sign_in()
    other.sign_in()
    done = _audit(user, sessions)
    token = _token(user.browser.get(f"/console/audits/{done}").text)
    url = f"/console/audits/{done}/what-if/verify"
    assert user.browser.post(url, data={"csrf": "forged", "top": "1"}).status_code == 403
    big = user.browser.post(url, data={"csrf": token, "nodes": "u0 u1 u2"})
    assert big.status_code == 422 and 'id="what-if-error"' in big.text and "too large" in big.text
    location = user.browser.post(url, data={"csrf": token, "top": "1"}).headers["location"]
    assert other.browser.get(location).status_code == 404
    other_token = _token(other.browser.get("/console/audits").text)
    assert other.browser.post(f"{location}/cancel", data={"csrf": other_token}).status_code == 404
    cancelled = user.browser.post(f"{location}/cancel", data={"csrf": token})
    assert cancelled.status_code == 303
    assert "<b>cancelled</b>" in user.browser.get(location).text
