"""The CI-sized load test: ``bench/load_test.py`` with 10 audits on two real workers and three readers.

Every audit must succeed exactly once (``attempts == 1``, one set of influence rows) and no read may fail.
The full run (50 audits) and its figures: ``python bench/load_test.py``, docs/RELIABILITY.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from load_test import run_load

pytestmark = pytest.mark.integration


def test_ten_audits_on_two_workers_with_concurrent_readers() -> None:
    redis_url = os.environ.get("BIND_TEST_LOAD_REDIS_URL", "redis://127.0.0.1:6379/11")
    figures = run_load(audits=10, workers=2, readers=3, nodes=200, epochs=20, timeout=150, redis_url=redis_url)
    assert figures["succeeded_exactly_once"] == 10
    assert figures["reads"]["errors"] == 0 and figures["reads"]["requests"] > 0
