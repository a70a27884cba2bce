"""Problem documents recorded on failed audits."""

from __future__ import annotations

from app.audits.failures import problem_for
from bind_core.errors import ConfigError


def test_other_library_errors_keep_their_problems() -> None:
    doc = problem_for(ConfigError("lam: 2 must be in [0, 1]"), audit_id="a2")
    assert doc["type"].endswith("/invalid-config") and "max_abs_grad" not in doc
