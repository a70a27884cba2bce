"""The security tests reuse the API tests' fixtures (a fresh migrated Postgres database, Redis DB 13,
tenants with real API keys), loaded from ``tests/app/api/conftest.py`` under a name of their own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_API = Path(__file__).resolve().parents[1] / "app" / "api"
if str(_API) not in sys.path:
    sys.path.insert(0, str(_API))  # for `apihelp`, as in tests/app/api

_spec = importlib.util.spec_from_file_location("bind_api_fixtures", _API / "conftest.py")
assert _spec is not None and _spec.loader is not None
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)

make_database = _fixtures.make_database
database_url = _fixtures.database_url
redis_client = _fixtures.redis_client
settings = _fixtures.settings
client = _fixtures.client
sessions = _fixtures.sessions
new_key = _fixtures.new_key
auth = _fixtures.auth
other_auth = _fixtures.other_auth
graph_npz = _fixtures.graph_npz
graph_id = _fixtures.graph_id
