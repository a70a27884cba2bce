"""The settings a production server refuses to start with (``BIND_ENVIRONMENT=production``).

Development (the default) starts with anything, so the embedded quick start, the tests and docker-compose work
unchanged; production must be set up on purpose: a server database, a console secret of its own, public webhook
targets only, CORS limited to named origins, and ``/metrics`` behind a key (or off).
"""

from __future__ import annotations

from sqlalchemy.engine import make_url

from app.core.settings import Settings

PLACEHOLDER_SECRETS = frozenset(
    {"changethis", "changeme", "change-me", "change_me", "secret", "console-secret", "please-change-me"}
)
"""Console secrets that examples and templates use; compared lower-cased, with any repetition of them refused too."""


class UnsafeSettings(RuntimeError):
    """Production settings that must be fixed before the server starts (the message lists each, with its fix)."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        lines = "\n".join(f"  - {r}" for r in reasons)
        super().__init__(f"BIND_ENVIRONMENT=production refuses to start with these settings:\n{lines}")


def _placeholder(secret: str) -> bool:
    lowered = secret.lower()
    return any(lowered.replace(p, "") == "" for p in PLACEHOLDER_SECRETS) or len(set(lowered)) < 4


def unsafe_reasons(settings: Settings) -> list[str]:
    """What is unsafe in ``settings`` for production, one sentence each (empty in development)."""
    if settings.environment != "production":
        return []
    reasons = []
    if make_url(settings.database_url).get_backend_name() == "sqlite":
        reasons.append("BIND_DATABASE_URL is SQLite; use Postgres (postgresql+psycopg://...).")
    if "console_secret" not in settings.model_fields_set:
        reasons.append("BIND_CONSOLE_SECRET is not set; set 32+ random characters, the same in every API process.")
    elif _placeholder(settings.console_secret.get_secret_value()):
        reasons.append("BIND_CONSOLE_SECRET is a placeholder; set 32+ random characters of your own.")
    if settings.webhook_allow_private:
        reasons.append("BIND_WEBHOOK_ALLOW_PRIVATE is on; webhooks could reach private addresses (turn it off).")
    if "*" in settings.cors_origins:
        reasons.append("BIND_CORS_ORIGINS allows '*'; name the origins allowed.")
    if settings.metrics_enabled and settings.metrics_key is None:
        reasons.append("/metrics has no key; set BIND_METRICS_KEY, or BIND_METRICS_ENABLED=false.")
    return reasons


def check_production(settings: Settings) -> None:
    """Raise :class:`UnsafeSettings` when ``settings`` are production settings with anything unsafe."""
    reasons = unsafe_reasons(settings)
    if reasons:
        raise UnsafeSettings(reasons)
