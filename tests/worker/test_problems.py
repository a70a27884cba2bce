"""Problem documents recorded on failed audits."""

from __future__ import annotations

from app.audits.failures import problem_for
from bind_core.errors import ConfigError, ModelNotStationaryError


def test_a_model_that_is_not_stationary_gets_its_own_problem_with_the_gradient() -> None:
    exc = ModelNotStationaryError("not stationary", max_abs_grad=3e-3, grad_norm=1e-2, tolerance=1e-5)
    doc = problem_for(exc, audit_id="a1", stage="influence")
    assert doc["status"] == 422 and doc["type"].endswith("/model-not-stationary")
    assert doc["title"] == "Model not stationary" and doc["stage"] == "influence"
    assert (doc["max_abs_grad"], doc["grad_norm"], doc["tolerance"]) == (3e-3, 1e-2, 1e-5)
    assert doc["instance"] == "/v1/audits/a1"


def test_other_library_errors_keep_their_problems() -> None:
    doc = problem_for(ConfigError("lam: 2 must be in [0, 1]"), audit_id="a2")
    assert doc["type"].endswith("/invalid-config") and "max_abs_grad" not in doc
